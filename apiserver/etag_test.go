package apiserver

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"testing"

	"github.com/codeport/codeport/internal/test/benchratio"
)

func TestIfNoneMatch(t *testing.T) {
	const tag = `"3k9a1z"`
	for _, c := range []struct {
		value string
		match bool
	}{
		{`"3k9a1z"`, true},
		{`W/"3k9a1z"`, true},
		{`*`, true},
		{` * `, true},
		{`"other", "3k9a1z"`, true},
		{`"other",W/"3k9a1z"`, true},
		{`  "3k9a1z"  `, true},
		{`,"3k9a1z",`, true},
		{`"a,b", "3k9a1z"`, true},
		{`"other"`, false},
		{`W/"other", "x"`, false},
		{`3k9a1z`, false},
		{`"3k9a1z`, false},
		{`"3K9A1Z"`, false},
		{`w/"3k9a1z"`, false},
		{`"3k9a1z"x`, false},
		{`"x" "3k9a1z"`, false},
		{`*, "3k9a1z"`, false},
		{``, false},
	} {
		if got := ifNoneMatchMatches(c.value, tag); got != c.match {
			t.Errorf("If-None-Match %q against %s: %v, want %v", c.value, tag, got, c.match)
		}
	}
}

func TestETagFollowsTheBytes(t *testing.T) {
	etagOf := func(body string) string { return string(appendETag(nil, []byte(body))) }
	a, b := etagOf(`{"price":2000}`), etagOf(`{"price":2001}`)
	if a == b || a != etagOf(`{"price":2000}`) {
		t.Fatalf("tags %s, %s", a, b)
	}
	if a[0] != '"' || a[len(a)-1] != '"' {
		t.Fatalf("tag %s is not a quoted strong entity tag", a)
	}
	// The largest hash fits the size withETag reserves for a tag.
	if longest := len(strconv.AppendUint(nil, math.MaxUint64, 36)) + len(`""`); longest != etagSize {
		t.Fatalf("etagSize is %d, the longest tag %d bytes", etagSize, longest)
	}
}

// BenchmarkETag tags a 20-product page (about 16 KB) and a 100-product one (about 80 KB) and
// reports the cost as a ratio (x-copy) to copying the same body, timed in the same run, as
// catalog's BenchmarkListPage reports the page's encoding.
func BenchmarkETag(b *testing.B) {
	item := `{"productCode":"10000000000001","name":"Game Credit 20 EUR","price":2000,"tags":["a"]},`
	for _, size := range []int{16 << 10, 80 << 10} {
		body := bytes.Repeat([]byte(item), size/len(item)+1)[:size]
		b.Run(fmt.Sprintf("bytes=%d", size), func(b *testing.B) {
			var tag [etagSize]byte
			benchratio.CopyRatio(b, body, func() { _ = appendETag(tag[:0], body) })
		})
	}
}
