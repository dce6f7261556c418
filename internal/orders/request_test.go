package orders_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/codeport/codeport/apiserver/apierror"
	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/catalog"
	"github.com/codeport/codeport/internal/orders"
)

func sandboxSnapshot(t testing.TB) *catalog.Snapshot {
	t.Helper()
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
		if !bytes.Equal(decode(b), base) {
			t.Errorf("same order hashed differently: %s", b)
		}
	}
	for _, b := range different {
		if bytes.Equal(decode(b), base) {
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

// TestDecodeRefusesAmbiguousBodies: a body must say one thing, in text PostgreSQL can store,
// with the contract's spelling of each field; each refusal is worded as a 400 naming the place.
func TestDecodeRefusesAmbiguousBodies(t *testing.T) {
	const line = `{"productCode":"99000000000001","quantity":1}`
	for _, tc := range []struct {
		name, body, message string
	}{
		{"duplicate externalOrderCode", `{"externalOrderCode":"A","currency":"EUR","orderProducts":[` + line +
			`],"externalOrderCode":"B"}`, `Request body has the key "externalOrderCode" more than once; send each key once`},
		{"duplicate quantity", `{"externalOrderCode":"A","currency":"EUR","orderProducts":[` + line + `,` +
			`{"productCode":"99000000000001","quantity":1,"quantity":2}]}`,
			`Request body has the key "quantity" more than once in orderProducts[1]; send each key once`},
		{"duplicate metadata key", `{"externalOrderCode":"A","currency":"EUR","orderProducts":[` + line +
			`],"metadata":{"k":"1","k":"2"}}`, `Request body has the key "k" more than once in metadata; send each key once`},
		{"NUL in externalOrderCode", `{"externalOrderCode":"A\u0000","currency":"EUR","orderProducts":[` + line + `]}`,
			"externalOrderCode must be valid UTF-8 text without NUL characters"},
		{"NUL in a metadata value", `{"externalOrderCode":"A","currency":"EUR","orderProducts":[` + line +
			`],"metadata":{"note":"x\u0000"}}`, "metadata.note must be valid UTF-8 text without NUL characters"},
		{"NUL in a metadata key", `{"externalOrderCode":"A","currency":"EUR","orderProducts":[` + line +
			`],"metadata":{"\u0000":"x"}}`, "Keys in metadata must be valid UTF-8 text without NUL characters"},
		{"invalid UTF-8 in a SKU", "{\"externalOrderCode\":\"A\",\"currency\":\"EUR\",\"orderProducts\":" +
			"[{\"productCode\":\"99000000000001\",\"quantity\":1,\"sku\":\"DE-\xff\"}]}",
			"orderProducts[0].sku must be valid UTF-8 text without NUL characters"},
		{"lone surrogate in productCode", `{"externalOrderCode":"A","currency":"EUR","orderProducts":[` +
			`{"productCode":"\ud800","quantity":1}]}`,
			"orderProducts[0].productCode must be valid UTF-8 text without NUL characters"},
		{"field in other case", `{"ExternalOrderCode":"A","currency":"EUR","orderProducts":[` + line + `]}`,
			`Unknown field "ExternalOrderCode": field names are case-sensitive; did you mean "externalOrderCode"?`},
		{"line field in other case", `{"externalOrderCode":"A","currency":"EUR","orderProducts":[` +
			`{"productCode":"99000000000001","QUANTITY":1}]}`,
			`Unknown field "QUANTITY" in orderProducts[0]: field names are case-sensitive; did you mean "quantity"?`},
		// null is a value, not absence (the HTTP suite sends every field null).
		{"null price", `{"externalOrderCode":"A","currency":"EUR","price" : null ,"orderProducts":[` + line + `]}`,
			"price must not be null; omit the field to leave it unset"},
		{"null line currency", `{"externalOrderCode":"A","currency":"EUR","orderProducts":[` + line + `,` +
			`{"productCode":"99000000000001","quantity":1,"currency":null}]}`,
			"orderProducts[1].currency must not be null; omit the field to leave it unset"},
		{"null quantity", `{"externalOrderCode":"A","currency":"EUR","orderProducts":[` +
			`{"productCode":"99000000000001","quantity":null}]}`,
			"Each line requires a productCode and a quantity of at least 1"},
		{"null productCode beside productId", `{"externalOrderCode":"A","currency":"EUR","orderProducts":[` +
			`{"productCode":null,"productId":"99000000000001","quantity":1}]}`,
			"Each line requires a productCode and a quantity of at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := orders.Decode([]byte(tc.body))
			e, ok := apierror.FromDomain(err)
			if !ok || e.Status != 400 || e.Message != tc.message {
				t.Fatalf("Decode: %v; answered %+v, want 400 %q", err, e, tc.message)
			}
		})
	}
	// Unknown fields are ignored, null or not.
	if _, err := orders.Decode([]byte(`{"externalOrderCode":"A","currency":"EUR","note":null,"orderProducts":[` +
		`{"productCode":"99000000000001","quantity":1,"extra":null}]}`)); err != nil {
		t.Fatalf("unknown fields sent null: %v", err)
	}
	// Metadata keys are the partner's own: any spelling is theirs to choose.
	if _, err := orders.Decode([]byte(`{"externalOrderCode":"A","currency":"EUR","orderProducts":[` + line +
		`],"metadata":{"Currency":"x","QUANTITY":"y"}}`)); err != nil {
		t.Fatalf("metadata keys spelled like fields: %v", err)
	}
}

// TestDecodeCurrency: an order names an active ISO 4217 currency (in any case, as the contract
// allows); codes ISO never assigned, placeholders and withdrawn codes are refused with the
// contract's 400, as the operator refuses them in resources.
func TestDecodeCurrency(t *testing.T) {
	for _, tc := range []struct {
		currency string
		ok       bool
	}{
		{"EUR", true}, {"eur", true}, {"JPY", true}, {"VES", true},
		{"ERU", false}, {"XXX", false}, {"XTS", false}, {"DEM", false}, {"EURO", false}, {"E", false},
	} {
		req, err := orders.Decode([]byte(`{"externalOrderCode":"a","currency":"` + tc.currency +
			`","orderProducts":[{"productCode":"99000000000001","quantity":1}]}`))
		var refusal *orders.Refusal
		// Exactly the upper-case code: a comparison ignoring case would pass a decoder that kept
		// the partner's spelling.
		want := strings.ToUpper(tc.currency)
		switch {
		case tc.ok && err != nil:
			t.Errorf("currency %q refused: %v", tc.currency, err)
		case tc.ok && req.Currency != want:
			t.Errorf("currency %q decoded as %q", tc.currency, req.Currency)
		case !tc.ok && (!errors.As(err, &refusal) || refusal.Reason != orders.CurrencyNotISO):
			t.Errorf("currency %q: %v, want %s", tc.currency, err, orders.CurrencyNotISO)
		}
	}
}
