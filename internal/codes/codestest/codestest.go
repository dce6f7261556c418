// Package codestest gives tests fresh codes keys, as the text processes take them, and stock.
package codestest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/store"
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

// Key returns one fresh codes key in the text form processes take.
func Key(t testing.TB) string {
	t.Helper()
	keys, _ := Keys(t, 1)
	return keys[0]
}

// Stock imports n codes of product, named prefix-0 to prefix-(n-1), as one batch, and fails
// the test unless all n are new.
func Stock(t testing.TB, db store.TxBeginner, c *codes.Cipher, product, prefix string, n int) {
	t.Helper()
	var in strings.Builder
	in.WriteString("code\n")
	for i := range n {
		fmt.Fprintf(&in, "%s-%d\n", prefix, i)
	}
	res, err := codes.Import(context.Background(), db, c, product, prefix, strings.NewReader(in.String()), nil)
	if err != nil || res.Imported != int64(n) {
		t.Fatalf("import %d codes of %s: %+v, %v", n, product, res, err)
	}
}
