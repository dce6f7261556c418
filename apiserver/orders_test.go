package apiserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/test/poll"
)

type line = map[string]any

func order(code string, lines ...line) map[string]any {
	return map[string]any{"externalOrderCode": code, "currency": "EUR", "orderProducts": lines}
}

// wrongTypeCases are the order's fields sent as another JSON type, or as an integer beyond the
// documents' bound of every integer: each refusal names the field and the type or bound it
// takes, except where the contract words the case already (metadata, a quantity below 1).
var wrongTypeCases = []struct {
	name    string
	body    any
	status  int
	message string
}{
	{"quantity as string", `{"externalOrderCode":"w1","currency":"EUR","orderProducts":[` +
		`{"productCode":"10000000000001","quantity":"2"}]}`, 400, "orderProducts[0].quantity must be an integer"},
	{"order price as string", `{"externalOrderCode":"w2","currency":"EUR","price":"10","orderProducts":[` +
		`{"productCode":"10000000000001","quantity":1}]}`, 400, "price must be an integer"},
	{"metadata as number", `{"externalOrderCode":"w3","currency":"EUR","metadata":5,"orderProducts":[` +
		`{"productCode":"10000000000001","quantity":1}]}`, 400,
		"metadata must be an object of string keys and string values"},
	{"lines as object", `{"externalOrderCode":"w4","currency":"EUR","orderProducts":{}}`, 400,
		"orderProducts must be an array"},
	{"line as number", `{"externalOrderCode":"w5","currency":"EUR","orderProducts":[5]}`, 400,
		"orderProducts[0] must be an object"},
	{"externalOrderCode as number", `{"externalOrderCode":5,"currency":"EUR","orderProducts":[` +
		`{"productCode":"10000000000001","quantity":1}]}`, 400, "externalOrderCode must be a string"},
	{"currency as boolean", `{"externalOrderCode":"w6","currency":true,"orderProducts":[` +
		`{"productCode":"10000000000001","quantity":1}]}`, 400, "currency must be a string"},
	{"productCode as number", `{"externalOrderCode":"w7","currency":"EUR","orderProducts":[` +
		`{"productCode":10000000000001,"quantity":1}]}`, 400, "orderProducts[0].productCode must be a string"},
	{"productId as array", `{"externalOrderCode":"w8","currency":"EUR","orderProducts":[` +
		`{"productId":["10000000000001"],"quantity":1}]}`, 400, "orderProducts[0].productId must be a string"},
	{"line currency as object", `{"externalOrderCode":"w9","currency":"EUR","orderProducts":[` +
		`{"productCode":"10000000000001","quantity":1,"currency":{}}]}`, 400, "orderProducts[0].currency must be a string"},
	{"sku as number", `{"externalOrderCode":"w10","currency":"EUR","orderProducts":[` +
		`{"productCode":"10000000000001","quantity":1,"sku":1}]}`, 400, "orderProducts[0].sku must be a string"},
	{"quantity past the bound", `{"externalOrderCode":"w11","currency":"EUR","orderProducts":[` +
		`{"productCode":"10000000000001","quantity":9007199254740992}]}`, 400,
		"orderProducts[0].quantity must be at most 9007199254740991"},
	{"quantity past every float", `{"externalOrderCode":"w12","currency":"EUR","orderProducts":[` +
		`{"productCode":"10000000000001","quantity":1e400}]}`, 400,
		"orderProducts[0].quantity must be at most 9007199254740991"},
	{"quantity far below 1", `{"externalOrderCode":"w13","currency":"EUR","orderProducts":[` +
		`{"productCode":"10000000000001","quantity":-1e400}]}`, 400, invalidLineMessage},
	{"price below the bound", `{"externalOrderCode":"w14","currency":"EUR","price":-9007199254740992,` +
		`"orderProducts":[{"productCode":"10000000000001","quantity":1}]}`, 400,
		"price must be at least -9007199254740991"},
	{"line price past the bound", `{"externalOrderCode":"w15","currency":"EUR","orderProducts":[` +
		`{"productCode":"10000000000001","quantity":1,"price":1e16}]}`, 400,
		"orderProducts[0].price must be at most 9007199254740991"},
	// Values are judged as sent: whitespace around a currency code, or an externalOrderCode
	// longer than 100 characters with it, is refused.
	{"currency with a space", `{"externalOrderCode":"w16","currency":" EUR","orderProducts":[` +
		`{"productCode":"10000000000001","quantity":1}]}`, 400, "currency must be an ISO 4217 currency code"},
	{"currency with a tab", `{"externalOrderCode":"w17","currency":"EUR\t","orderProducts":[` +
		`{"productCode":"10000000000001","quantity":1}]}`, 400, "currency must be an ISO 4217 currency code"},
	{"externalOrderCode of 101 characters with a space", `{"externalOrderCode":" ` + strings.Repeat("a", 100) +
		`","currency":"EUR","orderProducts":[{"productCode":"10000000000001","quantity":1}]}`, 400,
		"externalOrderCode must be at most 100 characters"},
	{"externalOrderCode of no-break spaces", `{"externalOrderCode":"\u00a0\u3000","currency":"EUR","orderProducts":[` +
		`{"productCode":"10000000000001","quantity":1}]}`, 400, "externalOrderCode is required"},
}

func TestOrderValidationMessages(t *testing.T) {
	s := newStack(t, stackOptions{})
	tn := s.onboard(t, "acme", nil)
	s.topUp(t, tn, "production", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "1000.00"})
	key := tn.keys["production"]
	cases := []struct {
		name    string
		body    any
		status  int
		message string
	}{
		{"empty lines", order("v1"), 400, "orderProducts must not be empty"},
		{"lines absent", map[string]any{"externalOrderCode": "v2", "currency": "EUR"},
			400, "orderProducts must not be empty"},
		{"no product code", order("v3", line{"quantity": 1}),
			400, "Each line requires a productCode and a quantity of at least 1"},
		{"zero quantity", order("v4", line{"productCode": "10000000000001", "quantity": 0}),
			400, "Each line requires a productCode and a quantity of at least 1"},
		{"fractional quantity", order("v5", line{"productCode": "10000000000001", "quantity": 1.5}),
			400, "orderProducts[0].quantity must be an integer"},
		{"line currency differs", order("v6", line{"productCode": "10000000000001", "quantity": 1, "currency": "GBP"}),
			400, "Product 10000000000001 is priced in EUR, not GBP"},
		{"order currency differs", map[string]any{"externalOrderCode": "v7", "currency": "GBP",
			"orderProducts": []line{{"productCode": "10000000000001", "quantity": 1}}},
			400, "Product 10000000000001 is priced in EUR, not GBP"},
		{"line currency right, order currency wrong", map[string]any{"externalOrderCode": "v8", "currency": "GBP",
			"orderProducts": []line{{"productCode": "10000000000001", "quantity": 1, "currency": "EUR"}}},
			400, "Product 10000000000001 cannot be ordered in the requested currency."},
		{"open without price", order("v9", line{"productCode": "10000000000002", "quantity": 1}),
			400, "Product 10000000000002 is open-denomination and requires a price"},
		{"open below minimum", order("v10", line{"productCode": "10000000000002", "quantity": 1, "price": 400}),
			400, "Price for product 10000000000002 is below the minimum allowed (500)"},
		{"open above maximum", order("v11", line{"productCode": "10000000000002", "quantity": 1, "price": 10100}),
			400, "Price for product 10000000000002 exceeds the maximum allowed (10000)"},
		{"fixed price mismatch", order("v12", line{"productCode": "10000000000001", "quantity": 1, "price": 1999}),
			400, "Product 10000000000001 price mismatch: expected 2000"},
		{"total mismatch", map[string]any{"externalOrderCode": "v13", "currency": "EUR", "price": 3000,
			"orderProducts": []line{{"productCode": "10000000000001", "quantity": 2}}},
			400, "Order price mismatch: expected total 4000"},
		{"sku of another market",
			order("v14", line{"productCode": "10000000000001", "quantity": 1, "sku": "GB-EN-10000000000001"}),
			400, "Product 10000000000001 is not available for ordering with the supplied country or currency."},
		{"inactive product", order("v15", line{"productCode": "10000000000003", "quantity": 1}),
			400, "Product 10000000000003 is not currently available."},
		{"unknown product", order("v16", line{"productCode": "10000000000099", "quantity": 1}),
			404, "Product 10000000000099 was not found in your catalog"},
		{"overflowing total",
			order("v17", line{"productCode": "10000000000002", "quantity": 9007199254740991, "price": 10000}),
			400, "The order could not be validated. Check product codes, prices, and currency."},
		{"price as string", order("v18", line{"productCode": "10000000000001", "quantity": 1, "price": "2000"}),
			400, "orderProducts[0].price must be an integer"},
		{"missing external code",
			map[string]any{"currency": "EUR", "orderProducts": []line{{"productCode": "10000000000001", "quantity": 1}}},
			400, "externalOrderCode is required"},
		{"missing currency", map[string]any{"externalOrderCode": "v19",
			"orderProducts": []line{{"productCode": "10000000000001", "quantity": 1}}},
			400, "currency is required"},
		{"not JSON", "{not json", 400, "Request body must be a JSON object"},
		// The contract's message, word for word, though it does not say where the body breaks.
		{"JSON cut short", `{"externalOrderCode":"v20","currency":"EUR","orderProducts":[{"productCode`, 400,
			"Request body must be a JSON object"},
		{"JSON with a trailing comma", `{"externalOrderCode":"v21","currency":"EUR",}`, 400,
			"Request body must be a JSON object"},
		{"JSON array", "[]", 400, "Request body must be a JSON object"},
	}
	cases = append(cases, wrongTypeCases...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expectError(t, s.call(t, "production", "POST", "/v2/orders", key, tc.body), tc.status, tc.message)
		})
	}
	var n int64
	if err := s.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM orders o
		JOIN accounts a ON a.id = o.account_id JOIN partners p ON p.id = a.partner_id WHERE p.namespace = $1`,
		tn.namespace).Scan(&n); err != nil || n != 0 {
		t.Fatalf("rejected orders were recorded: %d %v", n, err)
	}
}

func TestOrderAccountRules(t *testing.T) {
	// No workers: production has no stock for these orders, so fulfilment would fail them and
	// refund their value, which no longer counts against the daily limit, racing the placements
	// that count on it.
	s := newStack(t, stackOptions{noWorker: true})
	// place orders quantity units of the fixed-price product in production with key, as code.
	place := func(key, code string, quantity int) response {
		return s.call(t, "production", "POST", "/v2/orders", key,
			order(code, line{"productCode": "10000000000001", "quantity": quantity}))
	}
	disabled := s.onboard(t, "disabled", func(p *v1alpha1.Partner) {
		p.Spec.Ordering = &v1alpha1.OrderingSpec{Enabled: ptr(false)}
	})
	expectError(t, place(disabled.keys["production"], "d1", 1),
		403, "API ordering is disabled for your account. Contact support for assistance.")

	limited := s.onboard(t, "limited", func(p *v1alpha1.Partner) {
		p.Spec.Ordering = &v1alpha1.OrderingSpec{Limits: &v1alpha1.OrderLimits{
			MaxQuantityPerOrder: ptr(int32(3)),
			DailySpend:          map[string]int64{"EUR": 5000},
		}}
	})
	s.topUp(t, limited, "production", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "1000.00"})
	key := limited.keys["production"]
	expectError(t, place(key, "l1", 4),
		422, "Your account order limit has been exceeded. Contact support for assistance.")
	if r := place(key, "l2", 2); r.status != 202 {
		t.Fatalf("within limits: %d %s", r.status, r.raw)
	}
	// 4000 of the 5000 daily EUR are spent; another 2000 is over.
	expectError(t, place(key, "l3", 1),
		422, "Your account order limit has been exceeded. Contact support for assistance.")

	poor := s.onboard(t, "poor", nil)
	s.topUp(t, poor, "production", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "10.00"})
	expectError(t, place(poor.keys["production"], "p1", 1),
		422, "Insufficient funds. Please top up your wallet and try again.")

	// Without wallet ordering nothing is debited, and no balance is needed.
	free := s.onboard(t, "free", func(p *v1alpha1.Partner) {
		p.Spec.Ordering = &v1alpha1.OrderingSpec{WalletEnabled: ptr(false)}
	})
	if r := place(free.keys["production"], "f1", 1); r.status != 202 {
		t.Fatalf("wallet disabled: %d %s", r.status, r.raw)
	}
}

// sandboxCase is an order of sandbox products and the outcome the sandbox promises for it.
type sandboxCase struct {
	name      string
	lines     []line
	status    string
	delivered []int // codes per line
	refund    int64
}

func TestSandboxOrderOutcomes(t *testing.T) {
	s := newStack(t, stackOptions{})
	tn := s.onboard(t, "acme", nil)
	s.topUp(t, tn, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "1000.00"})
	key := tn.keys["sandbox"]
	cases := []sandboxCase{
		{"success fixed", []line{{"productCode": "99000000000001", "quantity": 2}}, "completed", []int{2}, 0},
		{"success open", []line{{"productCode": "99000000000002", "quantity": 1, "price": 700}}, "completed", []int{1}, 0},
		{"failure", []line{{"productCode": "99000000000003", "quantity": 1}}, "failed", nil, 1000},
		{"partial", []line{{"productCode": "99000000000004", "quantity": 4}}, "partially_completed", []int{2}, 2000},
		{"partial of one completes", []line{{"productCode": "99000000000004", "quantity": 1}}, "completed", []int{1}, 0},
		{"success and failure",
			[]line{{"productCode": "99000000000001", "quantity": 1}, {"productCode": "99000000000003", "quantity": 1}},
			"partially_completed", []int{1, 0}, 1000},
		{"ordinary product", []line{{"productCode": "10000000000001", "quantity": 1}}, "completed", []int{1}, 0},
		{"slow", []line{{"productCode": "99000000000005", "quantity": 1}}, "completed", []int{1}, 0},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkSandboxOutcome(t, s, key, fmt.Sprintf("sb-%d", i), tc)
		})
	}
	t.Cleanup(func() {
		acct := s.account(t, tn, "sandbox")
		assertLedgerMatches(t, s, acct.ID)
	})
}

// checkSandboxOutcome places tc's order as code and checks that it is accepted, then finishes
// as tc promises.
func checkSandboxOutcome(t *testing.T, s *stack, key, code string, tc sandboxCase) {
	t.Helper()
	placed := s.call(t, "sandbox", "POST", "/v2/orders", key, order(code, tc.lines...))
	if placed.status != 202 || placed.str("status") != "processing" || placed.str("estimatedReadyAt") == "" ||
		placed.body["wallet"] == nil {
		t.Fatalf("placement: %d %s", placed.status, placed.raw)
	}
	if placed.header.Get("X-RateLimit-Limit") == "" {
		t.Fatal("202 without rate-limit headers")
	}
	if tc.name == "slow" {
		r := s.call(t, "sandbox", "GET", "/v2/orders/"+code, key, nil)
		if r.str("status") != "processing" || r.str("message") != "Order is still processing" || r.body["products"] != nil {
			t.Fatalf("slow order not processing: %s", r.raw)
		}
	}
	final := s.waitOrder(t, "sandbox", key, placed.str("orderId"))
	if final.str("status") != tc.status {
		t.Fatalf("status %s, want %s: %s", final.str("status"), tc.status, final.raw)
	}
	if tc.status == "failed" {
		if final.str("reason") == "" || final.body["products"] != nil {
			t.Fatalf("failed order: %s", final.raw)
		}
		return
	}
	total := checkSandboxCodes(t, final.body["products"].([]any), tc.delivered)
	if tc.status == "partially_completed" && (final.body["delivered"] != float64(total) || final.body["total"] == nil) {
		t.Fatalf("partial fields: %s", final.raw)
	}
}

// checkSandboxCodes checks that each line of products delivered the number of sandbox codes
// delivered holds for it, and returns how many codes were delivered in all.
func checkSandboxCodes(t *testing.T, products []any, delivered []int) int {
	t.Helper()
	total := 0
	for j, p := range products {
		codes := p.(map[string]any)["codes"].([]any)
		if len(codes) != delivered[j] {
			t.Fatalf("line %d: %d codes, want %d", j, len(codes), delivered[j])
		}
		for _, c := range codes {
			if !strings.HasPrefix(c.(map[string]any)["code"].(string), "SANDBOX-") {
				t.Fatalf("code %v", c)
			}
		}
		total += len(codes)
	}
	return total
}

// count runs query, a SELECT count(*), on the test's database.
func count(t *testing.T, db *store.DB, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.Pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func assertLedgerMatches(t *testing.T, s *stack, accountID any) {
	t.Helper()
	read, err := s.db.Pool.Query(context.Background(), `SELECT b.currency, b.balance,
		COALESCE((SELECT sum(amount) FROM wallet_entries e
		WHERE e.account_id = b.account_id AND e.currency = b.currency), 0)::bigint AS sum
		FROM wallet_balances b WHERE b.account_id = $1`, accountID)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := pgx.CollectRows(read, pgx.RowToStructByPos[struct {
		Currency string
		Balance  int64
		Sum      int64
	}])
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Balance != r.Sum || r.Balance < 0 {
			t.Errorf("%s: balance %d, ledger sum %d", r.Currency, r.Balance, r.Sum)
		}
	}
}

func TestIdempotentPlacement(t *testing.T) {
	s := newStack(t, stackOptions{})
	tn := s.onboard(t, "acme", nil)
	s.topUp(t, tn, "production", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "1000.00"})
	key := tn.keys["production"]
	body := order("idem-1", line{"productCode": "10000000000001", "quantity": 1})
	first := s.call(t, "production", "POST", "/v2/orders", key, body)
	if first.status != 202 {
		t.Fatalf("%d %s", first.status, first.raw)
	}
	// The same order with keys reordered and productId instead of productCode is the same payload.
	again := s.call(t, "production", "POST", "/v2/orders", key,
		`{"orderProducts":[{"quantity":1,"productId":"10000000000001"}],"currency":"EUR","externalOrderCode":"idem-1"}`)
	if again.status != 200 || again.header.Get("Idempotent-Replayed") != "true" ||
		again.str("orderId") != first.str("orderId") {
		t.Fatalf("replay: %d %v %s", again.status, again.header, again.raw)
	}
	changed := order("idem-1", line{"productCode": "10000000000001", "quantity": 2})
	expectError(t, s.call(t, "production", "POST", "/v2/orders", key, changed),
		409, "An order with this external order code already exists.")
	// The product leaves the catalog: a new order for it is refused, the replay still gets its order.
	c, products := testCatalog(tn.namespace)
	if _, err := s.prov.ApplyCatalog(context.Background(), c, products[1:]); err != nil {
		t.Fatal(err)
	}
	attempt := 0
	// The withdrawal reaches the API's catalog snapshot by notification and a background refresh:
	// milliseconds, or seconds on a busy machine.
	poll.UntilTrue(t, 10*time.Second, "catalog change", func() bool {
		// A fresh code each time: an attempt that still saw the old catalog placed its order,
		// and repeating its code would only replay it.
		attempt++
		code := fmt.Sprintf("idem-new-%d", attempt)
		r := s.call(t, "production", "POST", "/v2/orders", key,
			order(code, line{"productCode": "10000000000001", "quantity": 1}))
		return r.status == 404
	})
	if r := s.call(t, "production", "POST", "/v2/orders", key, body); r.status != 200 ||
		r.str("orderId") != first.str("orderId") {
		t.Fatalf("replay after the product was withdrawn: %d %s", r.status, r.raw)
	}
	expectError(t, s.call(t, "production", "POST", "/v2/orders", key, changed),
		409, "An order with this external order code already exists.")
	var debits int64
	err := s.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM wallet_entries WHERE kind = 'order_debit' AND reference = $1`,
		first.str("orderId")).Scan(&debits)
	if err != nil || debits != 1 {
		t.Fatalf("%d debits", debits)
	}
}

func TestConcurrentDuplicatePlacement(t *testing.T) {
	s := newStack(t, stackOptions{})
	tn := s.onboard(t, "acme", nil)
	s.topUp(t, tn, "production", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "1000.00"})
	key := tn.keys["production"]
	body := order("dup-1", line{"productCode": "10000000000001", "quantity": 1})
	results := make([]response, 50)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = s.call(t, "production", "POST", "/v2/orders", key, body) }()
	}
	wg.Wait()
	ids := map[string]bool{}
	accepted := 0
	for _, r := range results {
		switch r.status {
		case 202:
			accepted++
		case 200:
			if r.header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("200 without Idempotent-Replayed")
			}
		default:
			t.Fatalf("status %d: %s", r.status, r.raw)
		}
		ids[r.str("orderId")] = true
	}
	if accepted != 1 || len(ids) != 1 {
		t.Fatalf("%d accepted, %d distinct orders", accepted, len(ids))
	}
	acct := s.account(t, tn, "production")
	var debits int64
	err := s.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM wallet_entries WHERE account_id = $1 AND kind = 'order_debit'`, acct.ID).Scan(&debits)
	if err != nil || debits != 1 {
		t.Fatalf("%d debits", debits)
	}
}

func TestConcurrentOrdersNeverOverdraw(t *testing.T) {
	s := newStack(t, stackOptions{})
	tn := s.onboard(t, "acme", nil)
	// Exactly 100 orders of 20.00 EUR are affordable.
	s.topUp(t, tn, "production", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "2000.00"})
	key := tn.keys["production"]
	var stock strings.Builder
	for i := range 200 {
		fmt.Fprintf(&stock, "CODE-%s-%04d\n", tn.namespace, i)
	}
	if _, err := codes.Import(context.Background(), s.db.Pool, s.cipher, "10000000000001", "test",
		strings.NewReader(stock.String()), nil); err != nil {
		t.Fatal(err)
	}
	statuses := make([]int, 200)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 40)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			// A placement that outlives its deadline on a starved machine answers 502 and
			// commits nothing; a partner sends the same order again, as this does.
			body := order(fmt.Sprintf("c-%d", i), line{"productCode": "10000000000001", "quantity": 1})
			r := s.call(t, "production", "POST", "/v2/orders", key, body)
			for attempt := 0; r.status == 502 && attempt < 5; attempt++ {
				r = s.call(t, "production", "POST", "/v2/orders", key, body)
			}
			statuses[i] = r.status
			if r.status == 422 && r.str("message") != "Insufficient funds. Please top up your wallet and try again." {
				t.Errorf("422 message %q", r.str("message"))
			}
		}()
	}
	wg.Wait()
	count := map[int]int{}
	for _, st := range statuses {
		count[st]++
	}
	if count[202] != 100 || count[422] != 100 {
		t.Fatalf("statuses %v, want 100 accepted and 100 refused", count)
	}
	acct := s.account(t, tn, "production")
	assertLedgerMatches(t, s, acct.ID)
	w := s.call(t, "production", "GET", "/v2/wallet", key, nil)
	if w.body["balances"].(map[string]any)["EUR"] != float64(0) {
		t.Fatalf("wallet: %s", w.raw)
	}
}

func TestTenantIsolation(t *testing.T) {
	s := newStack(t, stackOptions{})
	a := s.onboard(t, "alpha", nil)
	b := s.onboard(t, "beta", nil)
	s.topUp(t, a, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"})
	shared := order("shared-code", line{"productCode": "99000000000001", "quantity": 1})
	placed := s.call(t, "sandbox", "POST", "/v2/orders", a.keys["sandbox"], shared)
	if placed.status != 202 {
		t.Fatalf("%d %s", placed.status, placed.raw)
	}
	id := placed.str("orderId")
	expectError(t, s.call(t, "sandbox", "GET", "/v2/orders/"+id, b.keys["sandbox"], nil), 404, "Order "+id+" not found")
	expectError(t, s.call(t, "sandbox", "GET", "/v2/orders/shared-code", b.keys["sandbox"], nil),
		404, "Order shared-code not found")
	// The same external code is free for another partner.
	s.topUp(t, b, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"})
	if r := s.call(t, "sandbox", "POST", "/v2/orders", b.keys["sandbox"], shared); r.status != 202 ||
		r.str("orderId") == id {
		t.Fatalf("beta's own order: %d %s", r.status, r.raw)
	}
	if r := s.call(t, "sandbox", "GET", "/v2/orders/shared-code", a.keys["sandbox"], nil); r.str("orderId") != id {
		t.Fatalf("alpha by code: %s", r.raw)
	}
	// A production key does not see sandbox orders.
	expectError(t, s.call(t, "production", "GET", "/v2/orders/"+id, a.keys["production"], nil),
		404, "Order "+id+" not found")
}

func TestProductionStock(t *testing.T) {
	s := newStack(t, stackOptions{})
	tn := s.onboard(t, "acme", nil)
	s.topUp(t, tn, "production", "0", v1alpha1.TopUp{ID: "t1", Currency: "GBP", Amount: "100.00"})
	key := tn.keys["production"]
	res, err := codes.Import(context.Background(), s.db.Pool, s.cipher, "10000000000004", "batch-1",
		strings.NewReader("code\nSTREAM-"+tn.namespace+"-1\nSTREAM-"+tn.namespace+"-2\nSTREAM-"+tn.namespace+"-2\n"), nil)
	if err != nil || res.Imported != 2 || res.Duplicates != 1 {
		t.Fatalf("import: %+v %v", res, err)
	}
	gbp := func(code string, qty int) map[string]any {
		return map[string]any{"externalOrderCode": code, "currency": "GBP",
			"orderProducts": []line{{"productCode": "10000000000004", "quantity": qty}}}
	}
	first := s.call(t, "production", "POST", "/v2/orders", key, gbp("s1", 3))
	done := s.waitOrder(t, "production", key, first.str("orderId"))
	if done.str("status") != "partially_completed" || done.body["delivered"] != float64(2) ||
		done.body["total"] != float64(3) {
		t.Fatalf("partial from stock: %s", done.raw)
	}
	codesOut := done.body["products"].([]any)[0].(map[string]any)["codes"].([]any)
	if len(codesOut) != 2 || codesOut[0].(map[string]any)["code"] == codesOut[1].(map[string]any)["code"] {
		t.Fatalf("codes: %v", codesOut)
	}
	// One unit (8.99) was refunded: 100.00 - 3*8.99 + 8.99.
	if w := done.body["wallet"].(map[string]any)["balances"].(map[string]any)["GBP"]; w != 82.02 {
		t.Fatalf("wallet after refund: %v", w)
	}
	second := s.call(t, "production", "POST", "/v2/orders", key, gbp("s2", 1))
	failed := s.waitOrder(t, "production", key, second.str("orderId"))
	if failed.str("status") != "failed" || failed.str("reason") == "" {
		t.Fatalf("out of stock: %s", failed.raw)
	}
	acct := s.account(t, tn, "production")
	assertLedgerMatches(t, s, acct.ID)
}

func TestWalletAndScenarios(t *testing.T) {
	s := newStack(t, stackOptions{})
	tn := s.onboard(t, "acme", nil)
	s.topUp(t, tn, "sandbox", "50.00", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"},
		v1alpha1.TopUp{ID: "t2", Currency: "JPY", Amount: "5000"}, v1alpha1.TopUp{ID: "t3", Currency: "KWD", Amount: "1.250"})
	key := tn.keys["sandbox"]
	w := s.call(t, "sandbox", "GET", "/v2/wallet", key, nil)
	if string(w.raw) != `{"balances":{"EUR":100.00,"JPY":5000,"KWD":1.250},"lowBalance":true,"threshold":50}` {
		t.Fatalf("wallet: %s", w.raw)
	}
	sc := s.call(t, "sandbox", "GET", "/v2/sandbox/scenarios", key, nil)
	scenarios := sc.body["scenarios"].([]any)
	if len(scenarios) != 5 {
		t.Fatalf("scenarios: %s", sc.raw)
	}
	for i, raw := range scenarios {
		scn := raw.(map[string]any)
		body := map[string]any{"externalOrderCode": fmt.Sprintf("scn-%d", i), "currency": scn["currency"],
			"orderProducts": []any{scn["sampleOrderLine"]}}
		if r := s.call(t, "sandbox", "POST", "/v2/orders", key, body); r.status != 202 {
			t.Fatalf("scenario %v not orderable: %d %s", scn["name"], r.status, r.raw)
		}
		if scn["name"] == "Slow" && scn["processingSeconds"] == nil {
			t.Fatal("Slow scenario without processingSeconds")
		}
	}
	expectError(t, s.call(t, "production", "GET", "/v2/sandbox/scenarios", tn.keys["production"], nil),
		404, "Cannot GET /v2/sandbox/scenarios")
}

// TestPlacementShowsWalletAfterDebit: a 202's wallet is the wallet as the order left it: every
// currency, the debited one lowered, lowBalance judged after the debit.
func TestPlacementShowsWalletAfterDebit(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	tn := s.onboard(t, "acme", nil)
	s.topUp(t, tn, "sandbox", "95", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"},
		v1alpha1.TopUp{ID: "t2", Currency: "JPY", Amount: "5000"})
	key := tn.keys["sandbox"]
	placed := s.call(t, "sandbox", "POST", "/v2/orders", key,
		order("w-1", line{"productCode": "99000000000001", "quantity": 1}))
	if placed.status != 202 {
		t.Fatalf("%d %s", placed.status, placed.raw)
	}
	var body struct{ Wallet json.RawMessage }
	if err := json.Unmarshal(placed.raw, &body); err != nil {
		t.Fatal(err)
	}
	w := s.call(t, "sandbox", "GET", "/v2/wallet", key, nil)
	want := strings.TrimSuffix(string(w.raw), `,"threshold":95}`) + "}"
	if string(body.Wallet) != want {
		t.Fatalf("placement wallet %s, wallet now %s", body.Wallet, w.raw)
	}
	balances := w.body["balances"].(map[string]any)
	if eur := balances["EUR"].(float64); eur >= 100 || eur < 90 || balances["JPY"] != float64(5000) ||
		w.body["lowBalance"] != true {
		t.Fatalf("wallet after a 10.00 EUR order: %s", w.raw)
	}
}

func TestRequestShapeErrors(t *testing.T) {
	s := newStack(t, stackOptions{})
	tn := s.onboard(t, "acme", nil)
	key := tn.keys["production"]
	r := s.call(t, "production", "POST", "/v2/orders", key, nil)
	if r.status != 415 {
		t.Fatalf("no content type: %d %s", r.status, r.raw)
	}
	// Announce a body over the limit; the server must answer 413 in the contract's shape without
	// reading it (writing the body could race with the server closing the connection).
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.baseURL["production"], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v2/orders HTTP/1.1\r\nHost: api\r\nx-api-key: %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", key, 2<<20)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || !strings.Contains(string(raw), `"statusCode":413`) {
		t.Fatalf("oversized body: %d %s", resp.StatusCode, raw)
	}
	if resp.Header.Get("X-Request-Id") == "" || resp.Header.Get("X-RateLimit-Limit") == "" ||
		resp.Header.Get("X-RateLimit-Reset") == "" {
		t.Fatalf("413 without X-Request-Id or rate-limit headers: %v", resp.Header)
	}
	if r := s.call(t, "production", "GET", "/v2/nope", key, nil); r.status != 404 ||
		r.header.Get("X-RateLimit-Limit") == "" {
		t.Fatalf("unknown route: %d %s", r.status, r.raw)
	}
}

// TestTopUpsApplyOnceUnderConcurrentReconciles: several operator replicas (or restarts) applying
// the same Wallet at once credit each top-up exactly once.
func TestTopUpsApplyOnceUnderConcurrentReconciles(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	tn := s.onboard(t, "acme", nil)
	topUps := []v1alpha1.TopUp{
		{ID: "a", Currency: "EUR", Amount: "100.00"},
		{ID: "b", Currency: "EUR", Amount: "0.01"},
		{ID: "c", Currency: "JPY", Amount: "500"},
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() { defer wg.Done(); s.topUp(t, tn, "production", "10", topUps...) }()
	}
	wg.Wait()
	w := s.call(t, "production", "GET", "/v2/wallet", tn.keys["production"], nil)
	if string(w.raw) != `{"balances":{"EUR":100.01,"JPY":500},"lowBalance":false,"threshold":10}` {
		t.Fatalf("wallet: %s", w.raw)
	}
	assertLedgerMatches(t, s, s.account(t, tn, "production").ID)
}
