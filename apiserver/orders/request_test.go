package orders_test

import (
	"net/http"
	"testing"

	"github.com/codeport/codeport/apiserver/auth"
	"github.com/codeport/codeport/apiserver/catalog"
	"github.com/codeport/codeport/apiserver/orders"
)

func sandboxSnapshot(t testing.TB) *catalog.Snapshot {
	snap, err := catalog.NewSnapshot(catalog.TestProducts(), "2026-11-22")
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func TestHashIgnoresFormNotMeaning(t *testing.T) {
	decode := func(body string) []byte {
		req, e := orders.Decode([]byte(body))
		if e != nil {
			t.Fatalf("%s: %v", body, e)
		}
		return req.Hash()
	}
	base := decode(`{"externalOrderCode":"a","currency":"EUR","orderProducts":[{"productCode":"99000000000001","quantity":1}]}`)
	same := []string{
		`{"orderProducts":[{"quantity":1,"productCode":"99000000000001"}],"currency":"EUR","externalOrderCode":"a"}`,
		`{"externalOrderCode":"a","currency":"eur","orderProducts":[{"productId":"99000000000001","quantity":1.0}]}`,
	}
	different := []string{
		`{"externalOrderCode":"a","currency":"EUR","orderProducts":[{"productCode":"99000000000001","quantity":2}]}`,
		`{"externalOrderCode":"a","currency":"EUR","price":1000,"orderProducts":[{"productCode":"99000000000001","quantity":1}]}`,
		`{"externalOrderCode":"a","currency":"EUR","orderProducts":[{"productCode":"99000000000001","quantity":1,"price":1000}]}`,
	}
	for _, b := range same {
		if string(decode(b)) != string(base) {
			t.Errorf("same order hashed differently: %s", b)
		}
	}
	for _, b := range different {
		if string(decode(b)) == string(base) {
			t.Errorf("different order hashed alike: %s", b)
		}
	}
}

// FuzzPlaceOrder feeds arbitrary bodies through decoding and validation: whatever arrives, the
// outcome is a plan or a 4xx, never a panic or a 5xx, and a plan's total is consistent.
func FuzzPlaceOrder(f *testing.F) {
	for _, seed := range []string{
		`{"externalOrderCode":"a","currency":"EUR","orderProducts":[{"productCode":"99000000000001","quantity":1}]}`,
		`{"externalOrderCode":"b","currency":"EUR","price":2500,"orderProducts":[{"productCode":"99000000000002","quantity":1,"price":2500}]}`,
		`{"externalOrderCode":"c","currency":"EUR","orderProducts":[{"productCode":"99000000000002","quantity":9223372036854775807,"price":50000}]}`,
		`{"externalOrderCode":"d","currency":"EUR","orderProducts":[{"productCode":"99000000000001","quantity":1,"sku":"DE-EN-99000000000001"}]}`,
		`{"externalOrderCode":"e","currency":"JPY","orderProducts":[{"productCode":"1","quantity":-1}]}`,
		`{"externalOrderCode":"","currency":null,"orderProducts":{}}`,
		`[]`, `null`, `{`, `{"orderProducts":[1,"x",null]}`,
	} {
		f.Add([]byte(seed))
	}
	snap := sandboxSnapshot(f)
	acct := &auth.Account{MaxQuantityPerOrder: 1000}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := orders.Decode(body)
		if e != nil {
			if e.Status < 400 || e.Status >= 500 {
				t.Fatalf("decode answered %d", e.Status)
			}
			return
		}
		plan, e := orders.Validate(&req, snap, acct)
		if e != nil {
			if e.Status < 400 || e.Status >= 500 || e.Status == http.StatusInternalServerError {
				t.Fatalf("validate answered %d", e.Status)
			}
			return
		}
		var total int64
		for _, l := range plan.Lines {
			total += l.UnitPrice * l.Quantity
		}
		if total != plan.Total || total < 0 {
			t.Fatalf("plan total %d, lines sum to %d", plan.Total, total)
		}
	})
}
