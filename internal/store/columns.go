package store

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5/pgtype"
)

// Column types for the models' array and jsonb columns. They implement sql.Scanner and
// driver.Valuer so pgx and database/sql (the operator's configuration writes, through GORM in
// internal/provisioning/configdb) read and write them the same way, without a database driver
// of another dialect in the binary.

// TextArray is a PostgreSQL text[] (or cidr[]) column, read and written in the array's text form.
type TextArray []string

// arrayMaps hands out pgtype maps, which parse and format array literals but are not safe for
// concurrent use.
var arrayMaps = sync.Pool{New: func() any { return pgtype.NewMap() }}

// Scan implements sql.Scanner.
func (a *TextArray) Scan(src any) error {
	var text []byte
	switch s := src.(type) {
	case nil:
		*a = nil
		return nil
	case string:
		text = []byte(s)
	case []byte:
		text = s
	default:
		return fmt.Errorf("store: cannot scan %T into TextArray", src)
	}
	m := arrayMaps.Get().(*pgtype.Map)
	defer arrayMaps.Put(m)
	var out []string
	if err := m.Scan(pgtype.TextArrayOID, pgtype.TextFormatCode, text, &out); err != nil {
		return fmt.Errorf("store: scan TextArray: %w", err)
	}
	*a = out
	return nil
}

// Value implements driver.Valuer; a nil array is NULL.
func (a TextArray) Value() (driver.Value, error) {
	if a == nil {
		return nil, nil
	}
	m := arrayMaps.Get().(*pgtype.Map)
	defer arrayMaps.Put(m)
	text, err := m.Encode(pgtype.TextArrayOID, pgtype.TextFormatCode, []string(a), nil)
	if err != nil {
		return nil, fmt.Errorf("store: encode TextArray: %w", err)
	}
	return string(text), nil
}

// jsonBytes returns the JSON text a jsonb column was read as.
func jsonBytes(src any, into string) ([]byte, error) {
	switch s := src.(type) {
	case string:
		return []byte(s), nil
	case []byte:
		return s, nil
	default:
		return nil, fmt.Errorf("store: cannot scan %T into %s", src, into)
	}
}

// JSONSlice is a jsonb column holding a JSON array of T.
type JSONSlice[T any] []T

// Scan implements sql.Scanner.
func (s *JSONSlice[T]) Scan(src any) error {
	if src == nil {
		*s = nil
		return nil
	}
	b, err := jsonBytes(src, "JSONSlice")
	if err != nil {
		return err
	}
	return json.Unmarshal(b, s)
}

// Value implements driver.Valuer.
func (s JSONSlice[T]) Value() (driver.Value, error) {
	b, err := json.Marshal(s)
	return string(b), err
}

// JSONObject is a jsonb column holding one T.
type JSONObject[T any] struct {
	data T
}

// NewJSONObject returns a JSONObject holding data.
func NewJSONObject[T any](data T) JSONObject[T] {
	return JSONObject[T]{data: data}
}

// Data returns the value held.
func (o JSONObject[T]) Data() T { return o.data }

// MarshalJSON implements json.Marshaler.
func (o JSONObject[T]) MarshalJSON() ([]byte, error) { return json.Marshal(o.data) }

// UnmarshalJSON implements json.Unmarshaler.
func (o *JSONObject[T]) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &o.data) }

// Scan implements sql.Scanner.
func (o *JSONObject[T]) Scan(src any) error {
	b, err := jsonBytes(src, "JSONObject")
	if err != nil {
		return err
	}
	return json.Unmarshal(b, &o.data)
}

// Value implements driver.Valuer.
func (o JSONObject[T]) Value() (driver.Value, error) {
	b, err := json.Marshal(o.data)
	return string(b), err
}

// JSONMap is a jsonb column holding a JSON object; a nil map is NULL.
type JSONMap map[string]any

// Scan implements sql.Scanner.
func (m *JSONMap) Scan(src any) error {
	if src == nil {
		*m = nil
		return nil
	}
	b, err := jsonBytes(src, "JSONMap")
	if err != nil {
		return err
	}
	out := map[string]any{}
	if err := json.Unmarshal(b, &out); err != nil {
		return err
	}
	*m = out
	return nil
}

// Value implements driver.Valuer.
func (m JSONMap) Value() (driver.Value, error) {
	if m == nil {
		return nil, nil
	}
	b, err := json.Marshal(map[string]any(m))
	return string(b), err
}

// JSON is a jsonb column held as its raw JSON text; an empty value is NULL.
type JSON json.RawMessage

// Scan implements sql.Scanner.
func (j *JSON) Scan(src any) error {
	if src == nil {
		*j = nil
		return nil
	}
	b, err := jsonBytes(src, "JSON")
	if err != nil {
		return err
	}
	*j = append((*j)[:0], b...)
	return nil
}

// Value implements driver.Valuer.
func (j JSON) Value() (driver.Value, error) {
	if len(j) == 0 {
		return nil, nil
	}
	return string(j), nil
}

// MarshalJSON implements json.Marshaler.
func (j JSON) MarshalJSON() ([]byte, error) {
	if j == nil {
		return []byte("null"), nil
	}
	return j, nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (j *JSON) UnmarshalJSON(b []byte) error {
	*j = append((*j)[:0], b...)
	return nil
}
