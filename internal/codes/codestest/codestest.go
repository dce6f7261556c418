// Package codestest gives tests fresh codes keys, as the text processes take them.
package codestest

import (
	"testing"

	"github.com/codeport/codeport/internal/codes"
)

// Keys returns n fresh codes keys in the text form processes take, and their ids.
func Keys(t testing.TB, n int) (keys, ids []string) {
	t.Helper()
	for range n {
		k, err := codes.NewKey()
		if err != nil {
			t.Fatal(err)
		}
		c, err := codes.ParseKeyring(k, "")
		if err != nil {
			t.Fatal(err)
		}
		keys, ids = append(keys, k), append(ids, c.KeyID())
	}
	return keys, ids
}
