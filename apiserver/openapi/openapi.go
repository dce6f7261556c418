package openapi

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
)

//go:embed v2.json
var v2 []byte

//go:embed v1.json
var v1 []byte

// V2 returns the document of the current API as it is kept, with its placeholder server.
func V2() []byte { return append([]byte(nil), v2...) }

// V1 returns the document of the legacy catalog API as it is kept, with its placeholder server.
func V1() []byte { return append([]byte(nil), v1...) }

// Server is one entry of a document's servers.
type Server struct {
	URL         string `json:"url"`
	Description string `json:"description,omitempty"`
}

// WithServers returns doc with its top-level servers replaced, every other byte as it was: the
// order of keys is part of what a renderer shows (responses in the contract's order), which a
// decode and re-encode through a map would lose.
func WithServers(doc []byte, servers []Server) ([]byte, error) {
	value, err := json.Marshal(servers)
	if err != nil {
		return nil, fmt.Errorf("encode servers: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("OpenAPI document: not a JSON object")
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("OpenAPI document: %w", err)
		}
		// The value (after the colon and any space) runs from here to where its decoding ends.
		start := dec.InputOffset()
		var skipped json.RawMessage
		if err := dec.Decode(&skipped); err != nil {
			return nil, fmt.Errorf("OpenAPI document: %w", err)
		}
		if key != "servers" {
			continue
		}
		end := dec.InputOffset()
		out := make([]byte, 0, len(doc)-int(end-start)+len(value)+2)
		out = append(out, doc[:start]...)
		out = append(out, ": "...)
		out = append(out, value...)
		return append(out, doc[end:]...), nil
	}
	return nil, errors.New("OpenAPI document: no top-level servers")
}
