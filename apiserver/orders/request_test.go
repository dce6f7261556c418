package orders_test

import (
	"errors"
	"testing"

	"github.com/codeport/codeport/apiserver/apierror"
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
	base := decode(`{"externalOrderCode":"a","currency":"EUR",` +
		`"orderProducts":[{"productCode":"99000000000001","quantity":1}]}`)
	same := []string{
		`{"orderProducts":[{"quantity":1,"productCode":"99000000000001"}],"currency":"EUR","externalOrderCode":"a"}`,
		`{"externalOrderCode":"a","currency":"eur","orderProducts":[{"productId":"99000000000001","quantity":1.0}]}`,
	}
	different := []string{
		`{"externalOrderCode":"a","currency":"EUR","orderProducts":[{"productCode":"99000000000001","quantity":2}]}`,
		`{"externalOrderCode":"a","currency":"EUR","price":1000,` +
			`"orderProducts":[{"productCode":"99000000000001","quantity":1}]}`,
		`{"externalOrderCode":"a","currency":"EUR",` +
			`"orderProducts":[{"productCode":"99000000000001","quantity":1,"price":1000}]}`,
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
// outcome is a plan or a refusal the contract words as a 4xx, never a panic or another error,
// and a plan's total is consistent.
func FuzzPlaceOrder(f *testing.F) {
	for _, seed := range []string{
		`{"externalOrderCode":"a","currency":"EUR","orderProducts":[{"productCode":"99000000000001","quantity":1}]}`,
		`{"externalOrderCode":"b","currency":"EUR","price":2500,` +
			`"orderProducts":[{"productCode":"99000000000002","quantity":1,"price":2500}]}`,
		`{"externalOrderCode":"c","currency":"EUR",` +
			`"orderProducts":[{"productCode":"99000000000002","quantity":9223372036854775807,"price":50000}]}`,
		`{"externalOrderCode":"d","currency":"EUR",` +
			`"orderProducts":[{"productCode":"99000000000001","quantity":1,"sku":"DE-EN-99000000000001"}]}`,
		`{"externalOrderCode":"e","currency":"JPY","orderProducts":[{"productCode":"1","quantity":-1}]}`,
		`{"externalOrderCode":"","currency":null,"orderProducts":{}}`,
		`{"externalOrderCode":"f","currency":"EUR","orderProducts":[{"productCode":"99000000000001","quantity":1}],` +
			`"metadata":{"invoice":"INV-1","n":1}}`,
		`[]`, `null`, `{`, `{"orderProducts":[1,"x",null]}`,
	} {
		f.Add([]byte(seed))
	}
	snap := sandboxSnapshot(f)
	acct := &auth.Account{MaxQuantityPerOrder: 1000}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := orders.Decode(body)
		if err != nil {
			refused(t, "decode", err)
			return
		}
		plan, err := orders.Validate(&req, snap, acct)
		if err != nil {
			refused(t, "validate", err)
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

// refused fails unless err is a refusal that the contract answers with a 4xx.
func refused(t *testing.T, step string, err error) {
	t.Helper()
	var refusal *orders.Refusal
	if !errors.As(err, &refusal) {
		t.Fatalf("%s: %v is not a refusal", step, err)
	}
	if e, ok := apierror.FromDomain(err); !ok || e.Status < 400 || e.Status >= 500 {
		t.Fatalf("%s: refusal %v answered %v", step, err, e)
	}
}
