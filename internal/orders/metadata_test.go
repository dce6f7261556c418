package orders_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/codeport/codeport/apiserver/apierror"
	"github.com/codeport/codeport/internal/orders"
)

func withMetadata(metadata string) string {
	return `{"externalOrderCode":"m","currency":"EUR","orderProducts":[{"productCode":"99000000000001","quantity":1}]` +
		`,"metadata":` + metadata + `}`
}

func pairs(n int) string {
	kv := make([]string, n)
	for i := range kv {
		kv[i] = fmt.Sprintf(`"k%d":"v"`, i)
	}
	return "{" + strings.Join(kv, ",") + "}"
}

// TestMetadataRules: every rule of metadata, at and past its bound, with the message partners get.
func TestMetadataRules(t *testing.T) {
	cases := []struct {
		name, metadata string
		want           map[string]string // nil with message set: refused
		message        string
	}{
		{"null", `null`, nil, "metadata must be an object of string keys and string values"},
		{"empty object", `{}`, nil, ""},
		{"pairs", `{"invoice":"INV-1","note":""}`, map[string]string{"invoice": "INV-1", "note": ""}, ""},
		{"20 keys", pairs(20), nil, ""},
		{"21 keys", pairs(21), nil, "metadata must not have more than 20 keys"},
		{"key of 40 characters", `{"` + strings.Repeat("ü", 40) + `":"v"}`, nil, ""},
		{"key of 41 characters", `{"` + strings.Repeat("k", 41) + `":"v"}`, nil, "metadata keys must be 1 to 40 characters"},
		{"empty key", `{"":"v"}`, nil, "metadata keys must be 1 to 40 characters"},
		{"value of 500 characters", `{"k":"` + strings.Repeat("é", 500) + `"}`, nil, ""},
		{"value of 501 characters", `{"k":"` + strings.Repeat("v", 501) + `"}`, nil,
			`metadata value of key "k" must be at most 500 characters`},
		{"number value", `{"k":1}`, nil, `metadata value of key "k" must be a string`},
		{"null value", `{"k":null}`, nil, `metadata value of key "k" must be a string`},
		{"object value", `{"k":{"a":"b"}}`, nil, `metadata value of key "k" must be a string`},
		{"array", `["a"]`, nil, "metadata must be an object of string keys and string values"},
		{"string", `"a=b"`, nil, "metadata must be an object of string keys and string values"},
		{"number", `7`, nil, "metadata must be an object of string keys and string values"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := orders.Decode([]byte(withMetadata(tc.metadata)))
			if tc.message != "" {
				e, ok := apierror.As(err)
				if !ok || e.Status != 400 || e.Message != tc.message {
					t.Fatalf("error %v, want 400 %q", err, tc.message)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != nil && fmt.Sprint(req.Metadata) != fmt.Sprint(tc.want) {
				t.Fatalf("metadata %v, want %v", req.Metadata, tc.want)
			}
		})
	}
}

// TestMetadataInHash: metadata is part of the idempotency payload; none and {} are alike, and
// the order of keys does not matter.
func TestMetadataInHash(t *testing.T) {
	hash := func(body string) string {
		req, err := orders.Decode([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return string(req.Hash())
	}
	none := hash(`{"externalOrderCode":"m","currency":"EUR",` +
		`"orderProducts":[{"productCode":"99000000000001","quantity":1}]}`)
	if hash(withMetadata(`{}`)) != none {
		t.Fatal("empty metadata changes the order")
	}
	ab := hash(withMetadata(`{"a":"1","b":"2"}`))
	if hash(withMetadata(`{"b":"2","a":"1"}`)) != ab {
		t.Fatal("key order changes the order")
	}
	for _, other := range []string{`{"a":"1"}`, `{"a":"1","b":"3"}`, `{"a":"1","c":"2"}`} {
		if h := hash(withMetadata(other)); h == ab || h == none {
			t.Fatalf("metadata %s hashed like another", other)
		}
	}
	var refusal *orders.Refusal
	if _, err := orders.Decode([]byte(withMetadata(`{"k":2}`))); !errors.As(err, &refusal) {
		t.Fatalf("refusal %v", err)
	}
}
