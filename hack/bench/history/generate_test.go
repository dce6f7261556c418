package history_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/hack/bench/history"
	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/codes/codestest"
	"github.com/codeport/codeport/internal/orders"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/tenancy"
	"github.com/codeport/codeport/internal/test/testfixture"
)

const (
	historyOrders = 100_000
	inFlight      = 20
	span          = 2 * 365 * 24 * time.Hour
)

// TestGenerateHistory writes 100,000 orders of two years into five partners' wallets in three
// currencies, as the 10-million-order run does, and holds them to what the API and fulfilment
// would have left: the money audit finds nothing, statuses and times spread as configured, each
// payload hash is the request's, and every delivered code opens under the database's keyring to
// the code it was.
func TestGenerateHistory(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t, store.Options{})
	cipher := attachedCipher(t, db)
	provisionWallets(t, db)

	until := time.Now().Add(-time.Hour).Truncate(time.Second)
	res, err := history.Generate(ctx, db.Pool, history.Config{Orders: historyOrders, Until: until, Span: span,
		Prefix: "h", Workers: 2, Batch: 5000, Seed: 1, Cipher: cipher, Processing: inFlight})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d orders, %d lines, %d entries, %d codes in %s", res.Orders, res.Lines, res.Entries, res.Codes,
		res.Elapsed.Round(time.Millisecond))
	if res.Orders != historyOrders {
		t.Fatalf("wrote %d orders, want %d", res.Orders, historyOrders)
	}

	audit, err := storetest.AuditMoney(ctx, db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(audit.Orders) != historyOrders || len(audit.Findings) > 0 {
		t.Fatalf("audit: %d orders, findings %v", len(audit.Orders), audit.Findings)
	}
	findings, err := history.Verify(ctx, db.Pool)
	if err != nil || len(findings) > 0 {
		t.Fatalf("verify: %v, %v", findings, err)
	}
	checkSpread(t, db, until)
	checkPayloadHashes(t, db)
	checkCodes(t, db, cipher)
}

// TestVerifyFindsBrokenMoney breaks each rule Verify checks on a small history and expects it
// named: a check that cannot fail would let the 10-million-order run pass whatever it wrote.
func TestVerifyFindsBrokenMoney(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t, store.Options{})
	cipher := attachedCipher(t, db)
	provisionWallets(t, db)
	_, err := history.Generate(ctx, db.Pool, history.Config{Orders: 2000, Until: time.Now(), Span: span,
		Prefix: "v", Workers: 2, Batch: 500, Seed: 2, Cipher: cipher, Processing: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, breakage, finding string
	}{
		{"balance off its ledger", `UPDATE wallet_balances SET balance = balance + 1
			WHERE (account_id, currency) IN (SELECT account_id, currency FROM wallet_balances LIMIT 1)`,
			"1 balances that differ from their ledger"},
		{"refund recorded but not paid", `UPDATE orders SET refunded_amount = refunded_amount + 1,
			debited_amount = debited_amount + 1
			WHERE id = (SELECT id FROM orders WHERE status = 'completed' LIMIT 1)`,
			"1 finished orders whose status, debit, refund or codes disagree"},
		{"status off its codes", `UPDATE orders SET status = 'failed'
			WHERE id = (SELECT id FROM orders WHERE status = 'completed' LIMIT 1)`,
			"1 finished orders whose status, debit, refund or codes disagree"},
		{"in flight without its job", `DELETE FROM river_job
			WHERE id = (SELECT id FROM river_job WHERE kind = 'codeport.fulfil_order' LIMIT 1)`,
			"1 processing orders without their fulfilment job"},
		{"delivered code back in stock", `INSERT INTO code_stock (product_code, key_ref, ciphertext, digest)
			SELECT l.product_code, d.key_ref, d.ciphertext, d.digest
			FROM delivered_codes d JOIN order_lines l USING (order_id, line_no) LIMIT 1`,
			"1 delivered codes still available in stock"},
		{"stock row of another order", `INSERT INTO code_stock (id, product_code, key_ref, ciphertext, digest,
				order_id, delivered_at)
			SELECT d.stock_id, l.product_code, d.key_ref, d.ciphertext, d.digest,
				(SELECT id FROM orders WHERE status = 'failed' LIMIT 1), d.delivered_at
			FROM delivered_codes d JOIN order_lines l USING (order_id, line_no) LIMIT 1`,
			"1 stock codes delivered twice or not as recorded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tx, err := db.Pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if _, err := tx.Exec(ctx, tc.breakage); err != nil {
				t.Fatal(err)
			}
			findings, err := history.VerifyIn(ctx, tx)
			if err != nil {
				t.Fatal(err)
			}
			if len(findings) != 1 || findings[0] != tc.finding {
				t.Fatalf("findings %q, want [%q]", findings, tc.finding)
			}
		})
	}
}

func attachedCipher(t *testing.T, db *store.DB) *codes.Cipher {
	t.Helper()
	keys, _ := codestest.Keys(t, 1)
	c, err := codes.ParseKeyring(keys[0], "")
	if err != nil {
		t.Fatal(err)
	}
	c, err = c.Attach(context.Background(), db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// provisionWallets onboards five partners on a catalog selling in EUR, USD and GBP, each with
// a production wallet in the three currencies, through provisioning as the operator does.
func provisionWallets(t *testing.T, db *store.DB) {
	t.Helper()
	ctx := context.Background()
	prov, err := testfixture.NewProvisioner(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	var products []v1alpha1.CatalogProduct
	for i, sold := range [][2]string{{"DE", "EUR"}, {"FR", "EUR"}, {"US", "USD"}, {"GB", "GBP"}, {"US", "USD"}} {
		products = append(products, testfixture.Product(fmt.Sprintf("2%013d", i),
			testfixture.SoldIn(sold[0], sold[1]), testfixture.WithPrice(int64(500+1000*i))))
	}
	cat := testfixture.Catalog("history", testfixture.InNamespace("history"))
	if _, err := prov.ApplyCatalog(ctx, cat, products); err != nil {
		t.Fatal(err)
	}
	production := string(tenancy.Production)
	for i := range 5 {
		_, err := testfixture.Onboard(ctx, prov, testfixture.Partner(fmt.Sprintf("h%d", i),
			testfixture.InNamespace("history"), testfixture.WithCatalogRef("history")),
			testfixture.WithKeys(testfixture.APIKeyIn(production)),
			testfixture.WithBalance(production, "", testfixture.TopUp("start", "EUR", "100.00"),
				testfixture.TopUp("start-usd", "USD", "100.00"), testfixture.TopUp("start-gbp", "GBP", "100.00")))
		if err != nil {
			t.Fatal(err)
		}
	}
}

// checkSpread holds the history to its configuration: two years up to until, every status,
// three currencies over five accounts, the first account the busiest, top-ups when balances ran
// short, and the in-flight orders the newest.
func checkSpread(t *testing.T, db *store.DB, until time.Time) {
	t.Helper()
	ctx := context.Background()
	var oldest, newest time.Time
	var accounts, currencies, topUps, newestInFlight int64
	if err := db.Pool.QueryRow(ctx, `SELECT min(created_at), max(created_at), count(DISTINCT account_id),
			count(DISTINCT currency), (SELECT count(*) FROM wallet_entries WHERE reference LIKE 'h-top-up-%'),
			count(*) FILTER (WHERE status = 'processing' AND created_at > $1::timestamptz - interval '1 minute')
		FROM orders`, until).Scan(&oldest, &newest, &accounts, &currencies, &topUps, &newestInFlight); err != nil {
		t.Fatal(err)
	}
	if got := newest.Sub(oldest); got < span-24*time.Hour || newest.After(until) {
		t.Errorf("orders from %s to %s, want two years up to %s", oldest, newest, until)
	}
	if accounts != 5 || currencies != 3 || topUps == 0 || newestInFlight != inFlight {
		t.Errorf("%d accounts, %d currencies, %d top-ups, %d newest in flight; want 5, 3, some, %d",
			accounts, currencies, topUps, newestInFlight, inFlight)
	}
	rows, err := db.Pool.Query(ctx, `SELECT status, count(*) FROM orders GROUP BY status`)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}
	var status string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&status, &n}, func() error { counts[status] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	for status, floor := range map[string]int64{store.OrderCompleted: 90_000, store.OrderFailed: 1000,
		store.OrderPartiallyCompleted: 100, store.OrderProcessing: inFlight} {
		if counts[status] < floor {
			t.Errorf("%d orders %s, want at least %d (all: %v)", counts[status], status, floor, counts)
		}
	}
	var busiest, quietest int64
	if err := db.Pool.QueryRow(ctx, `SELECT max(n), min(n) FROM (SELECT count(*) AS n FROM orders
		GROUP BY account_id) c`).Scan(&busiest, &quietest); err != nil {
		t.Fatal(err)
	}
	if busiest < 3*quietest {
		t.Errorf("busiest account %d orders, quietest %d: want a skewed spread", busiest, quietest)
	}
}

// checkPayloadHashes recomputes the payload hash of a sample of orders from what is stored, as
// a replay of the same request would: the stored hash must be the request's.
func checkPayloadHashes(t *testing.T, db *store.DB) {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `SELECT o.external_order_code, o.currency, o.payload_hash,
			COALESCE((SELECT jsonb_object_agg(k, v) FROM jsonb_each_text(o.metadata) AS m (k, v)), '{}'),
			array_agg(l.product_code ORDER BY l.line_no), array_agg(l.quantity::bigint ORDER BY l.line_no)
		FROM orders o JOIN order_lines l ON l.order_id = o.id
		WHERE o.id IN (SELECT id FROM orders TABLESAMPLE BERNOULLI (1))
		GROUP BY o.id`)
	if err != nil {
		t.Fatal(err)
	}
	var code, currency string
	var hash []byte
	var metadata map[string]string
	var products []string
	var quantities []int64
	checked := 0
	_, err = pgx.ForEachRow(rows, []any{&code, &currency, &hash, &metadata, &products, &quantities}, func() error {
		req := orders.Request{ExternalOrderCode: code, Currency: currency}
		if len(metadata) > 0 {
			req.Metadata = metadata
		}
		for i := range products {
			req.Lines = append(req.Lines, orders.LineRequest{ProductCode: products[i], Quantity: quantities[i]})
		}
		if !bytes.Equal(req.Hash(), hash) {
			t.Errorf("order %s: stored payload hash is not its request's", code)
		}
		checked++
		return nil
	})
	if err != nil || checked < 500 {
		t.Fatalf("checked %d payload hashes: %v", checked, err)
	}
}

// checkCodes opens a sample of delivered codes with the keyring: each is the code the
// generator sealed for its unit, and its stock row is gone, as a delivery leaves it.
func checkCodes(t *testing.T, db *store.DB, cipher *codes.Cipher) {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `SELECT d.order_id, d.line_no, d.unit_no, d.key_ref,
			d.ciphertext, d.digest, d.stock_id IS NOT NULL AND s.id IS NULL
		FROM delivered_codes d LEFT JOIN code_stock s ON s.id = d.stock_id
		WHERE d.order_id IN (SELECT id FROM orders TABLESAMPLE BERNOULLI (1))`)
	if err != nil {
		t.Fatal(err)
	}
	var order uuid.UUID
	var line, unit int
	var key store.KeyRef
	var ciphertext, digest []byte
	var stockGone bool
	opened := 0
	_, err = pgx.ForEachRow(rows, []any{&order, &line, &unit, &key, &ciphertext, &digest, &stockGone}, func() error {
		code, err := cipher.Open(key, ciphertext, digest)
		if want := fmt.Sprintf("h-%s-%d-%d", order, line, unit); err != nil || code != want || !stockGone {
			t.Errorf("code of %s/%d/%d: %q, %v, stock row gone %t; want %q", order, line, unit, code, err,
				stockGone, want)
		}
		opened++
		return nil
	})
	if err != nil || opened < 500 {
		t.Fatalf("opened %d codes: %v", opened, err)
	}
}
