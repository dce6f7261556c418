package orders

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Bounds of an order's metadata: what a partner needs to tie an order to its own records, and
// small enough that orders, their history pages and webhooks stay small.
const (
	MaxMetadataKeys        = 20
	MaxMetadataKeyLength   = 40
	MaxMetadataValueLength = 500
)

// decodeMetadata reads the optional metadata object: string keys of 1 to MaxMetadataKeyLength
// characters with string values of at most MaxMetadataValueLength, at most MaxMetadataKeys of
// them. Absent and {} are no metadata (nil), so they place, and replay, the same order; null is
// refused (nullRefusal), as any value that is not an object.
func decodeMetadata(raw json.RawMessage) (map[string]string, *Refusal) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, refuse(MetadataNotObject)
	}
	var values map[string]json.RawMessage
	if err := json.Unmarshal(raw, &values); err != nil {
		return nil, refuse(MetadataNotObject)
	}
	if len(values) == 0 {
		return nil, nil
	}
	if len(values) > MaxMetadataKeys {
		return nil, refuse(MetadataTooManyKeys)
	}
	out := make(map[string]string, len(values))
	for k, v := range values {
		if n := utf8.RuneCountInString(k); n < 1 || n > MaxMetadataKeyLength {
			return nil, refuse(MetadataKeyLength)
		}
		var s string
		if v = bytes.TrimSpace(v); len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil {
			return nil, &Refusal{Reason: MetadataValueNotString, Key: k}
		}
		if utf8.RuneCountInString(s) > MaxMetadataValueLength {
			return nil, &Refusal{Reason: MetadataValueTooLong, Key: k}
		}
		out[k] = s
	}
	return out, nil
}
