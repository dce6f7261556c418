package apiserver_test

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/catalog"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/wallet"
)

const cursorMessage = "cursor is not valid for this list; use a nextCursor this list returned"

// pages follows a cursor-paged list from path (which has a query) to its end and returns every
// item of field, in order, and the number of pages.
func (s *stack) pages(t *testing.T, env, key, path, field string) ([]map[string]any, int) {
	t.Helper()
	var items []map[string]any
	cursor := ""
	for n := 1; ; n++ {
		p := path
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		r := s.call(t, env, "GET", p, key, nil)
		if r.status != 200 {
			t.Fatalf("GET %s: %d %s", p, r.status, r.raw)
		}
		list, ok := r.body[field].([]any)
		if !ok {
			t.Fatalf("GET %s: no %s array: %s", p, field, r.raw)
		}
		for _, it := range list {
			items = append(items, it.(map[string]any))
		}
		cursor = r.str("nextCursor")
		if cursor == "" {
			return items, n
		}
		if n > 100 {
			t.Fatal("list does not end")
		}
	}
}

// placeAndFinish places an order of one unit of product and waits for its end.
func (s *stack) placeAndFinish(t *testing.T, env, key, code, product string, extra map[string]any) response {
	t.Helper()
	body := map[string]any{"externalOrderCode": code, "currency": "EUR",
		"orderProducts": []line{{"productCode": product, "quantity": 1}}}
	for k, v := range extra {
		body[k] = v
	}
	if r := s.call(t, env, "POST", "/v2/orders", key, body); r.status != 202 {
		t.Fatalf("place %s: %d %s", code, r.status, r.raw)
	}
	return s.waitOrder(t, env, key, code)
}

// TestStatement: the ledger of the calling account, newest first, cursor-paged without gaps or
// repeats, with balance after each entry and the order of debits and refunds, in JSON and CSV;
// other accounts (another partner, the other environment) see none of it and cannot use its
// cursors.
func TestStatement(t *testing.T) {
	s := newStack(t, stackOptions{})
	a, b := s.onboard(t, "acme", nil), s.onboard(t, "bolt", nil)
	s.topUp(t, a, "production", "0",
		v1alpha1.TopUp{ID: "wire-1", Currency: "EUR", Amount: "100.00", Note: `wire, "ref" 1`},
		v1alpha1.TopUp{ID: "wire-2", Currency: "GBP", Amount: "20.00"})
	s.topUp(t, a, "sandbox", "0", v1alpha1.TopUp{ID: "test-1", Currency: "EUR", Amount: "50.00"})
	key := a.keys["production"]
	// Production has no stock: each order is debited, fails, and is refunded.
	for i := range 3 {
		s.placeAndFinish(t, "production", key, fmt.Sprintf("st-%d", i), "10000000000001", nil)
	}

	entries, pages := s.pages(t, "production", key, "/v2/wallet/transactions?limit=3", "entries")
	if len(entries) != 8 || pages != 3 {
		t.Fatalf("%d entries in %d pages, want 8 in 3: %v", len(entries), pages, entries)
	}
	checkStatement(t, entries)

	gbp, _ := s.pages(t, "production", key, "/v2/wallet/transactions?currency=gbp", "entries")
	if len(gbp) != 1 || gbp[0]["amount"].(float64) != 2000 || gbp[0]["amountMajor"].(float64) != 20 ||
		gbp[0]["reference"] != "wire-2" {
		t.Fatalf("GBP entries %v", gbp)
	}

	// CSV: the same rows, page by page, with the cursor in X-Next-Cursor.
	csvIDs := s.csvPages(t, key, entries)
	var jsonIDs []string
	for _, e := range entries {
		jsonIDs = append(jsonIDs, fmt.Sprint(e["id"]))
	}
	if strings.Join(csvIDs, " ") != strings.Join(jsonIDs, " ") {
		t.Fatalf("CSV rows %v, JSON entries %v", csvIDs, jsonIDs)
	}

	// Isolation: another partner and the other environment see only their own.
	other, _ := s.pages(t, "production", b.keys["production"], "/v2/wallet/transactions?limit=10", "entries")
	if len(other) != 0 {
		t.Fatalf("partner B sees %v", other)
	}
	sandbox, _ := s.pages(t, "sandbox", a.keys["sandbox"], "/v2/wallet/transactions?limit=10", "entries")
	if len(sandbox) != 1 || sandbox[0]["reference"] != "test-1" {
		t.Fatalf("sandbox sees %v", sandbox)
	}
	first := s.call(t, "production", "GET", "/v2/wallet/transactions?limit=1", key, nil)
	stolen := "/v2/wallet/transactions?cursor=" + url.QueryEscape(first.str("nextCursor"))
	others := []struct{ env, key string }{{"production", b.keys["production"]}, {"sandbox", a.keys["sandbox"]}}
	for _, o := range others {
		expectError(t, s.call(t, o.env, "GET", stolen, o.key, nil), 400, cursorMessage)
	}
}

// checkStatement checks a whole statement: no entry twice, newest first, the order of every
// debit and refund, and balance after each entry equal to the running sum of its currency.
func checkStatement(t *testing.T, entries []map[string]any) {
	t.Helper()
	seen := map[float64]bool{}
	kinds := map[string]int{}
	for i, e := range entries {
		id := e["id"].(float64)
		if seen[id] {
			t.Fatalf("entry %v twice", id)
		}
		seen[id] = true
		kinds[e["type"].(string)]++
		if i > 0 {
			prev := entries[i-1]
			if e["createdAt"].(string) > prev["createdAt"].(string) ||
				(e["createdAt"] == prev["createdAt"] && id > prev["id"].(float64)) {
				t.Fatalf("entry %d is newer than entry %d", i, i-1)
			}
		}
		switch e["type"] {
		case "order_debit", "refund":
			if e["orderId"] == nil || !strings.HasPrefix(e["externalOrderCode"].(string), "st-") {
				t.Fatalf("order entry without its order: %v", e)
			}
		default:
			if e["orderId"] != nil {
				t.Fatalf("top-up with an order: %v", e)
			}
		}
	}
	if kinds["top_up"] != 2 || kinds["order_debit"] != 3 || kinds["refund"] != 3 {
		t.Fatalf("kinds %v", kinds)
	}
	// Oldest first, every balance after is the previous one of its currency plus the amount.
	balance := map[string]float64{}
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		cur := e["currency"].(string)
		balance[cur] += e["amount"].(float64)
		if e["balanceAfter"].(float64) != balance[cur] {
			t.Fatalf("entry %v: balanceAfter %v, want %v", e["id"], e["balanceAfter"], balance[cur])
		}
		if math.Round(e["balanceAfterMajor"].(float64)*100) != balance[cur] {
			t.Fatalf("entry %v: balanceAfterMajor %v, balanceAfter %v", e["id"], e["balanceAfterMajor"], balance[cur])
		}
	}
	if balance["EUR"] != 10000 || balance["GBP"] != 2000 {
		t.Fatalf("balances %v", balance)
	}

}

// csvPages reads the production statement of key as CSV, 3 rows a page, and returns the ids of
// its rows; the oldest entry's note must read back as written.
func (s *stack) csvPages(t *testing.T, key string, entries []map[string]any) []string {
	t.Helper()
	var csvIDs []string
	cursor := ""
	for n := 0; ; n++ {
		path := "/v2/wallet/transactions?limit=3"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		header, records := s.csv(t, "production", key, path)
		if len(records) == 0 || strings.Join(records[0], ",") != strings.Join(wallet.CSVHeader, ",") {
			t.Fatalf("CSV without its header row: %v", records)
		}
		for _, rec := range records[1:] {
			csvIDs = append(csvIDs, rec[0])
			if rec[0] == fmt.Sprint(entries[len(entries)-1]["id"]) && rec[11] != `wire, "ref" 1` {
				t.Fatalf("note read back as %q", rec[11])
			}
		}
		cursor = header.Get("X-Next-Cursor")
		if cursor == "" {
			break
		}
		if n > 10 {
			t.Fatal("CSV pages do not end")
		}
	}
	return csvIDs
}

// csv requests path as text/csv and parses it strictly as RFC 4180.
func (s *stack) csv(t *testing.T, env, key, path string) (http.Header, [][]string) {
	t.Helper()
	r := s.callWith(t, env, "GET", path, key, nil, http.Header{"Accept": {"text/csv"}})
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/csv") {
		t.Fatalf("GET %s as CSV: %d %q %s", path, r.status, r.header.Get("Content-Type"), r.raw)
	}
	if r.header.Get("X-RateLimit-Remaining") == "" {
		t.Fatalf("CSV without rate-limit headers: %v", r.header)
	}
	if !bytes.HasSuffix(r.raw, []byte("\r\n")) {
		t.Fatalf("CSV records must end with CRLF: %q", r.raw)
	}
	records, err := csv.NewReader(bytes.NewReader(r.raw)).ReadAll()
	if err != nil {
		t.Fatalf("CSV: %v: %s", err, r.raw)
	}
	return r.header, records
}

// TestListQueryValidation: every refused filter of both lists is a 400 in the contract's shape.
func TestListQueryValidation(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	tn := s.onboard(t, "acme", nil)
	key := tn.keys["production"]
	const dateMessage = " must be an RFC 3339 date-time or a date (YYYY-MM-DD)"
	cases := []struct {
		name, path, message string
	}{
		{"unknown currency", "/v2/wallet/transactions?currency=EURO", "currency must be an ISO 4217 currency code"},
		// Any three letters are read (a code withdrawn since its entries were credited among
		// them), so only a value of another form is refused.
		{"currency not three letters", "/v2/wallet/transactions?currency=E1R", "currency must be an ISO 4217 currency code"},
		{"limit zero", "/v2/wallet/transactions?limit=0", "limit must be an integer between 1 and 1000"},
		{"limit too high", "/v2/orders?limit=1001", "limit must be an integer between 1 and 1000"},
		{"limit not a number", "/v2/orders?limit=ten", "limit must be an integer between 1 and 1000"},
		{"from not a date", "/v2/wallet/transactions?from=yesterday", "from" + dateMessage},
		{"to impossible", "/v2/orders?to=2026-13-01", "to" + dateMessage},
		{"from after to", "/v2/orders?from=2026-02-01&to=2026-01-01", "from must be earlier than to"},
		{"empty range", "/v2/wallet/transactions?from=2026-01-01&to=2026-01-01", "from must be earlier than to"},
		{"unknown status", "/v2/orders?status=done",
			"status must be one of processing, completed, partially_completed, failed"},
		{"external code too long", "/v2/orders?externalOrderCode=" + strings.Repeat("x", 101),
			"externalOrderCode must be 1 to 100 characters"},
		{"cursor not base64", "/v2/orders?cursor=%25%25", cursorMessage},
		{"cursor of nothing", "/v2/wallet/transactions?cursor=bm9wZQ", cursorMessage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expectError(t, s.call(t, "production", "GET", tc.path, key, nil), 400, tc.message)
		})
	}
}

// TestOrderHistory: the account's orders newest first, cursor-paged, filtered, without codes;
// another partner and the other environment see none of them and cannot use their cursors.
func TestOrderHistory(t *testing.T) {
	s := newStack(t, stackOptions{})
	a, b := s.onboard(t, "acme", nil), s.onboard(t, "bolt", nil)
	key := a.keys["sandbox"]
	for _, tn := range []*tenant{a, b} {
		s.topUp(t, tn, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"},
			v1alpha1.TopUp{ID: "t2", Currency: "EUR", Amount: "1.00"})
	}
	products := []string{catalog.TestSuccessFixed, catalog.TestFailure, catalog.TestSuccessFixed,
		catalog.TestFailure, catalog.TestSuccessFixed}
	for i, p := range products {
		s.placeAndFinish(t, "sandbox", key, fmt.Sprintf("h-%d", i), p, nil)
	}
	s.placeAndFinish(t, "sandbox", b.keys["sandbox"], "h-0", catalog.TestSuccessFixed, nil)

	all, pages := s.pages(t, "sandbox", key, "/v2/orders?limit=2", "orders")
	if len(all) != 5 || pages != 3 {
		t.Fatalf("%d orders in %d pages, want 5 in 3", len(all), pages)
	}
	for i, o := range all {
		if want := fmt.Sprintf("h-%d", 4-i); o["externalOrderCode"] != want {
			t.Fatalf("order %d is %v, want %s (newest first)", i, o["externalOrderCode"], want)
		}
		lines := o["products"].([]any)
		if len(lines) != 1 {
			t.Fatalf("order lines %v", lines)
		}
		if _, hasCodes := lines[0].(map[string]any)["codes"]; hasCodes {
			t.Fatalf("history shows codes: %v", o)
		}
		if o["price"].(float64) != 1000 || o["total"].(float64) != 1 || o["createdAt"] == nil || o["finishedAt"] == nil {
			t.Fatalf("summary %v", o)
		}
	}
	failed, _ := s.pages(t, "sandbox", key, "/v2/orders?status=failed", "orders")
	if len(failed) != 2 || failed[0]["externalOrderCode"] != "h-3" || failed[0]["reason"] == nil {
		t.Fatalf("failed orders %v", failed)
	}
	one, _ := s.pages(t, "sandbox", key, "/v2/orders?externalOrderCode=h-2", "orders")
	if len(one) != 1 || one[0]["status"] != "completed" || one[0]["orderId"] != all[2]["orderId"] {
		t.Fatalf("by external code %v", one)
	}
	// A window around the middle order holds it alone.
	middle := all[2]["createdAt"].(string)
	windowed, _ := s.pages(t, "sandbox", key, "/v2/orders?from="+url.QueryEscape(middle)+"&to="+
		url.QueryEscape(all[1]["createdAt"].(string)), "orders")
	if len(windowed) != 1 || windowed[0]["externalOrderCode"] != "h-2" {
		t.Fatalf("window [%s, %s): %v", middle, all[1]["createdAt"], windowed)
	}
	// The single-order read still answers for the reference "h-1" and is not taken by the list.
	r := s.call(t, "sandbox", "GET", "/v2/orders/h-1", key, nil)
	if r.status != 200 || r.str("externalOrderCode") != "h-1" {
		t.Fatalf("single read: %d %s", r.status, r.raw)
	}

	// Isolation.
	other, _ := s.pages(t, "sandbox", b.keys["sandbox"], "/v2/orders?limit=10", "orders")
	if len(other) != 1 || other[0]["orderId"] == all[4]["orderId"] {
		t.Fatalf("partner B sees %v", other)
	}
	if prod, _ := s.pages(t, "production", a.keys["production"], "/v2/orders", "orders"); len(prod) != 0 {
		t.Fatalf("production sees sandbox orders: %v", prod)
	}
	first := s.call(t, "sandbox", "GET", "/v2/orders?limit=1", key, nil)
	stolen := "/v2/orders?cursor=" + url.QueryEscape(first.str("nextCursor"))
	for _, o := range []struct{ env, key string }{{"sandbox", b.keys["sandbox"]}, {"production", a.keys["production"]}} {
		expectError(t, s.call(t, o.env, "GET", stolen, o.key, nil), 400, cursorMessage)
	}
	// A statement cursor is not an order-history cursor.
	stmt := s.call(t, "sandbox", "GET", "/v2/wallet/transactions?limit=1", key, nil).str("nextCursor")
	if stmt == "" {
		t.Fatal("statement of more than one entry without a next cursor")
	}
	expectError(t, s.call(t, "sandbox", "GET", "/v2/orders?cursor="+url.QueryEscape(stmt), key, nil), 400,
		cursorMessage)
}

// TestListsStableUnderConcurrentPlacement: orders placed while a partner pages through its
// history and statement neither repeat rows nor hide rows that existed when paging began.
func TestListsStableUnderConcurrentPlacement(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{databaseURL: storetest.New(t).URL, noWorker: true})
	tn := s.onboard(t, "acme", nil)
	s.topUp(t, tn, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "10000.00"})
	key := tn.keys["sandbox"]
	place := func(code string) {
		r := s.call(t, "sandbox", "POST", "/v2/orders", key,
			order(code, line{"productCode": catalog.TestSuccessFixed, "quantity": 1}))
		if r.status != 202 {
			t.Errorf("place %s: %d %s", code, r.status, r.raw)
		}
	}
	const before, during = 30, 30
	for i := range before {
		place(fmt.Sprintf("old-%d", i))
	}
	for _, list := range []struct{ path, field, id string }{
		{"/v2/orders?limit=4", "orders", "externalOrderCode"},
		{"/v2/wallet/transactions?limit=4", "entries", "id"},
	} {
		t.Run(list.field, func(t *testing.T) {
			existing := map[string]bool{}
			all, _ := s.pages(t, "sandbox", key, strings.Replace(list.path, "limit=4", "limit=1000", 1), list.field)
			for _, it := range all {
				existing[fmt.Sprint(it[list.id])] = true
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := range during {
					place(fmt.Sprintf("new-%s-%d", list.field, i))
				}
			}()
			paged, _ := s.pages(t, "sandbox", key, list.path, list.field)
			<-done
			seen := map[string]bool{}
			for _, it := range paged {
				id := fmt.Sprint(it[list.id])
				if seen[id] {
					t.Fatalf("%s listed twice", id)
				}
				seen[id] = true
			}
			for id := range existing {
				if !seen[id] {
					t.Fatalf("%s existed before paging and was not listed", id)
				}
			}
		})
	}
}
