package listing_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/listing"
	"github.com/codeport/codeport/internal/queryparam"
)

var account = uuid.MustParse("0193a8a0-5d7e-7c3e-9b1a-2f4d6e8a0b1c")

func parse(raw string, list string, allowed ...listing.Param) (listing.Query, error) {
	v, _ := url.ParseQuery(raw)
	return listing.Parse(queryparam.Values(v), list, account, allowed...)
}

func TestParseRefusals(t *testing.T) {
	other := listing.EncodeCursor(listing.Statement, uuid.New(), listing.Cursor{At: time.Now(), ID: "1"})
	ordersCursor := listing.EncodeCursor(listing.Orders, account, listing.Cursor{At: time.Now(), ID: uuid.NewString()})
	all := []listing.Param{listing.ParamCurrency, listing.ParamStatus, listing.ParamExternalOrderCode}
	cases := []struct {
		query string
		want  listing.Param
	}{
		{"currency=EU", listing.ParamCurrency},
		{"currency=EURO", listing.ParamCurrency},
		{"currency=E1R", listing.ParamCurrency},
		// Values are judged as sent: whitespace around them counts.
		{"currency=+EUR", listing.ParamCurrency},
		{"currency=EUR%09", listing.ParamCurrency},
		{"externalOrderCode=+" + strings.Repeat("a", 100), listing.ParamExternalOrderCode},
		{"limit=+10", listing.ParamLimit},
		{"status=COMPLETED", listing.ParamStatus},
		{"status=done", listing.ParamStatus},
		{"externalOrderCode=" + strings.Repeat("é", 101), listing.ParamExternalOrderCode},
		{"externalOrderCode=%20", listing.ParamExternalOrderCode},
		{"from=2026-11-25T10:00:00", listing.ParamFrom},
		{"from=25.11.2026", listing.ParamFrom},
		{"to=2026-02-30", listing.ParamTo},
		{"to=0000-01-01", listing.ParamTo},
		{"from=2026-11-25&to=2026-11-24", listing.ParamRange},
		{"from=2026-11-25&to=2026-11-25T00:00:00Z", listing.ParamRange},
		{"limit=0", listing.ParamLimit},
		{"limit=-1", listing.ParamLimit},
		{"limit=1001", listing.ParamLimit},
		{"limit=1e2", listing.ParamLimit},
		{"cursor=!!", listing.ParamCursor},
		// Sent empty, or without a value, a parameter is refused as any value it does not take.
		{"currency=", listing.ParamCurrency},
		{"status=", listing.ParamStatus},
		{"externalOrderCode=", listing.ParamExternalOrderCode},
		{"from=", listing.ParamFrom},
		{"to=", listing.ParamTo},
		{"limit=", listing.ParamLimit},
		{"limit", listing.ParamLimit},
		{"cursor=", listing.ParamCursor},
		{"cursor=" + other, listing.ParamCursor},
		{"cursor=" + ordersCursor, listing.ParamCursor},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			_, err := parse(tc.query, listing.Statement, all...)
			var qe *listing.QueryError
			if !errors.As(err, &qe) || qe.Param != tc.want {
				t.Fatalf("error %v, want a refusal of %s", err, tc.want)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	at := time.Date(2026, 11, 25, 10, 0, 0, 123456000, time.UTC)
	cursor := listing.EncodeCursor(listing.Orders, account, listing.Cursor{At: at, ID: "x"})
	q, err := parse("currency=eur&status=failed&externalOrderCode=+po-1+&from=2026-11-01&to=2026-11-25T12:00:00%2B01:00"+
		"&limit=1000&cursor="+cursor, listing.Orders,
		listing.ParamCurrency, listing.ParamStatus, listing.ParamExternalOrderCode)
	if err != nil {
		t.Fatal(err)
	}
	if q.Currency != "EUR" || q.Status != "failed" || q.ExternalOrderCode != "po-1" || q.Limit != 1000 {
		t.Fatalf("query %+v", q)
	}
	from, to := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 25, 11, 0, 0, 0, time.UTC)
	if !q.From.Equal(from) || !q.To.Equal(to) {
		t.Fatalf("window %v %v", q.From, q.To)
	}
	// The cursor keeps the microseconds PostgreSQL stores.
	if q.Before == nil || !q.Before.At.Equal(at) || q.Before.ID != "x" {
		t.Fatalf("cursor %+v", q.Before)
	}
	if q, err := parse("", listing.Orders); err != nil || q.Limit != listing.DefaultLimit || q.Before != nil {
		t.Fatalf("defaults %+v %v", q, err)
	}
	// A statement may be read for any code the ledger can hold: one withdrawn since it was
	// credited, or one the wallet never held, whose statement is empty.
	for _, code := range []string{"DEM", "dem", "QQQ"} {
		want := strings.ToUpper(code)
		if q, err := parse("currency="+code, listing.Statement, listing.ParamCurrency); err != nil || q.Currency != want {
			t.Fatalf("currency=%s: %+v %v", code, q, err)
		}
	}
	// A filter the list does not have is not read.
	if q, err := parse("status=nonsense", listing.Statement, listing.ParamCurrency); err != nil || q.Status != "" {
		t.Fatalf("status on a statement: %+v %v", q, err)
	}
}

func TestCursorKeys(t *testing.T) {
	if _, err := listing.LedgerKey(&listing.Cursor{ID: "abc"}); err == nil {
		t.Fatal("ledger cursor with a non-numeric id accepted")
	}
	if _, err := listing.OrderKey(&listing.Cursor{ID: "12"}); err == nil {
		t.Fatal("order cursor with a non-uuid id accepted")
	}
	if k, err := listing.LedgerKey(&listing.Cursor{ID: "12"}); err != nil || k.ID != 12 {
		t.Fatalf("ledger key %+v %v", k, err)
	}
}
