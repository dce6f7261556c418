package queryparam_test

import (
	"net/url"
	"testing"

	"github.com/codeport/codeport/internal/queryparam"
)

// TestEmptyIsPresent: a parameter sent with an empty value, or with none, is present with the
// value ""; only a parameter the query does not name is absent. (The HTTP suites send the same
// through *fasthttp.Args.)
func TestEmptyIsPresent(t *testing.T) {
	const raw = "limit=&type&cursor=abc&cursor=def"
	parsed, err := url.ParseQuery(raw)
	if err != nil {
		t.Fatal(err)
	}
	args := queryparam.Values(parsed)
	for _, tc := range []struct {
		param, value string
		present      bool
	}{
		{"limit", "", true},
		{"type", "", true},
		{"cursor", "abc", true},
		{"from", "", false},
	} {
		if v, ok := queryparam.Get(args, tc.param); v != tc.value || ok != tc.present {
			t.Errorf("%s is %q present %v, want %q present %v", tc.param, v, ok, tc.value, tc.present)
		}
	}
}
