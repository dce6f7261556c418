package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name     string
		body     string
		problem  Problem // 0: accepted
		location string
		key      string
	}{
		{"order", `{"externalOrderCode":"A-1","currency":"EUR","orderProducts":[{"productCode":"1","quantity":2}]}`,
			0, "", ""},
		{"escapes and unicode", `{"a":"\"\\\/\b\f\n\r\t\u00e9\ud83c\udfae","b":"注文🎮"}`, 0, "", ""},
		{"scalars", `{"a":1,"b":-1.5e3,"c":true,"d":false,"e":null,"f":[],"g":{}}`, 0, "", ""},
		{"duplicate top-level key", `{"externalOrderCode":"A","x":1,"externalOrderCode":"B"}`, DuplicateKey, "",
			"externalOrderCode"},
		{"duplicate key in a line", `{"orderProducts":[{"quantity":1},{"quantity":1,"quantity":2}]}`,
			DuplicateKey, "orderProducts[1]", "quantity"},
		{"duplicate spelled with an escape", `{"quantity":1,"q\u0075antity":2}`, DuplicateKey, "", "quantity"},
		{"same key in sibling objects", `{"a":{"k":1},"b":{"k":2}}`, 0, "", ""},
		{"duplicate in a large object", largeObjectWithDuplicate(), DuplicateKey, "metadata", "k3"},
		{"escaped NUL in a value", `{"externalOrderCode":"A\u0000"}`, InvalidText, "externalOrderCode", ""},
		{"escaped NUL in a key", `{"metadata":{"\u0000":"x"}}`, InvalidText, "metadata", ""},
		{"invalid UTF-8 in a top-level key", "{\"\xff\":1}", InvalidText, "", ""},
		{"invalid UTF-8 in a value", "{\"orderProducts\":[{\"sku\":\"\xff\"}]}", InvalidText, "orderProducts[0].sku", ""},
		{"overlong encoding", "{\"a\":\"\xc0\xaf\"}", InvalidText, "a", ""},
		{"lone high surrogate", `{"a":"\ud800"}`, InvalidText, "a", ""},
		{"lone low surrogate", `{"a":"\udc00x"}`, InvalidText, "a", ""},
		{"high surrogate without its low one", `{"a":"\ud800\u0041"}`, InvalidText, "a", ""},
		{"raw control character", "{\"a\":\"\x01\"}", Syntax, "a", ""},
		{"trailing value", `{} {}`, Syntax, "", ""},
		{"unterminated string", `{"a":"b`, Syntax, "a", ""},
		{"bad escape", `{"a":"\x"}`, Syntax, "a", ""},
		{"short unicode escape", `{"a":"\u12"}`, Syntax, "a", ""},
		{"missing colon", `{"a" 1}`, Syntax, "", ""},
		{"too deep", strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), Syntax,
			strings.Repeat("[0]", MaxDepth), ""},
		{"as deep as allowed", strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth), 0, "", ""},
		{"empty", ``, Syntax, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check([]byte(tc.body), nil)
			if tc.problem == 0 {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Problem != tc.problem || e.Location != tc.location || e.Key != tc.key ||
				e.InKey != strings.Contains(tc.name, "key") && tc.problem == InvalidText {
				t.Fatalf("Check = %#v, want problem %d at %q with key %q", err, tc.problem, tc.location, tc.key)
			}
		})
	}
}

func largeObjectWithDuplicate() string {
	var b strings.Builder
	b.WriteString(`{"metadata":{`)
	for i := range 40 {
		fmt.Fprintf(&b, `"k%d":"v",`, i)
	}
	b.WriteString(`"k3":"again"}}`)
	return b.String()
}

func TestCheckVisitsKeysWithTheirParents(t *testing.T) {
	var seen []string
	refuse := errors.New("refused")
	err := Check([]byte(`{"a":1,"n" : null ,"s":"null","orderProducts":[{"productCode":null},{"Quantity":1}],`+
		`"m":{"k":"v"}}`),
		func(parents []string, key string, null bool) error {
			visit := strings.Join(append(append([]string(nil), parents...), key), "/")
			if null {
				visit += "=null"
			}
			seen = append(seen, visit)
			if key == "Quantity" {
				return refuse
			}
			return nil
		})
	want := []string{"a", "n=null", "s", "orderProducts", "orderProducts/productCode=null", "orderProducts/Quantity"}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("visited %v, want %v", seen, want)
	}
	var e *Error
	if !errors.As(err, &e) || e.Problem != Refused || e.Key != "Quantity" || e.Location != "orderProducts[1]" ||
		!errors.Is(err, refuse) {
		t.Fatalf("Check = %#v, want the visitor's refusal of Quantity in orderProducts[1]", err)
	}
}

// FuzzCheck holds Check to encoding/json: it accepts no document encoding/json refuses, and a
// document it accepts is valid UTF-8 and decodes to strings without NUL.
func FuzzCheck(f *testing.F) {
	for _, seed := range []string{
		`{"externalOrderCode":"A-1","currency":"EUR","orderProducts":[{"productCode":"1","quantity":2}]}`,
		`{"a":"\u00e9\ud83c\udfae","b":[1,-2.5e3,true,null,{}]}`, `{"a":1,"a":2}`, `{"a":"\u0000"}`, "{\"a\":\"\xff\"}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := Check(data, nil)
		valid := json.Valid(data)
		if err == nil && !valid {
			t.Fatalf("Check accepted %q, which encoding/json refuses", data)
		}
		var e *Error
		if err != nil && !errors.As(err, &e) {
			t.Fatalf("Check returned %T", err)
		}
		if err != nil || !valid {
			return
		}
		// Outside strings, JSON is ASCII: invalid UTF-8 anywhere is invalid text in a string.
		if !utf8.Valid(data) {
			t.Fatalf("Check accepted %q, which is not valid UTF-8", data)
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber() // 1e1000 is valid JSON, though no float64
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("Unmarshal of an accepted document: %v", err)
		}
		if s, ok := firstBadString(v); ok {
			t.Fatalf("Check accepted %q holding the string %q", data, s)
		}
	})
}

func firstBadString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, strings.ContainsRune(v, 0)
	case []any:
		for _, e := range v {
			if s, bad := firstBadString(e); bad {
				return s, true
			}
		}
	case map[string]any:
		for k, e := range v {
			if s, bad := firstBadString(k); bad {
				return s, true
			}
			if s, bad := firstBadString(e); bad {
				return s, true
			}
		}
	}
	return "", false
}
