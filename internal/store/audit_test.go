package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/codeport/codeport/internal/store/storetest"
)

// TestAuditMoneyFindsEachBrokenRule: the audit the fault, failover and restore tests rely on
// finds nothing in a database the store wrote, and names each rule a damaged one breaks.
func TestAuditMoneyFindsEachBrokenRule(t *testing.T) {
	cases := []struct {
		name   string
		damage string // SQL run on a wallet of 100000 with orders a and b (100 each) processing
		want   string // the start of a finding; empty: none
	}{
		{"as the store wrote it", ``, ""},
		{"balance moved without an entry", `UPDATE wallet_balances SET balance = balance + 1`,
			"balance differs from its ledger"},
		{"completed without codes", `UPDATE orders SET status = 'completed' WHERE external_order_code = 'a'`,
			"order a ("},
		{"failed without its refund", `UPDATE orders SET status = 'failed' WHERE external_order_code = 'b'`,
			"order b ("},
		{"refunded without failing", `UPDATE orders SET status = 'completed', delivered = 1, refunded_amount = 100
			WHERE external_order_code = 'a'`, "order a ("},
		{"daily spend total off its orders", `UPDATE daily_spend SET spent = spent + 1, counted = true`,
			"daily spend differs from its orders"},
		{"debit of no order", `WITH e AS (INSERT INTO wallet_entries
			(account_id, currency, kind, reference, amount, balance_after)
			SELECT account_id, 'EUR', 'order_debit', 'ghost', -5, balance - 5 FROM wallet_balances WHERE currency = 'EUR')
			UPDATE wallet_balances SET balance = balance - 5 WHERE currency = 'EUR'`,
			"debit or refund without its order: order_debit ghost of -5"},
		{"entry that does not chain", `WITH e AS (INSERT INTO wallet_entries
			(account_id, currency, kind, reference, amount, balance_after)
			SELECT account_id, 'EUR', 'adjustment', 'skew', 5, balance + 7 FROM wallet_balances WHERE currency = 'EUR')
			UPDATE wallet_balances SET balance = balance + 5 WHERE currency = 'EUR'`,
			"ledger does not chain"},
		{"carried entry with nothing archived", `WITH e AS (INSERT INTO wallet_entries
			(id, account_id, currency, kind, reference, amount, balance_after)
			SELECT n, account_id, 'EUR', 'adjustment', 'archived:' || n, 5, balance + 5
			FROM (SELECT nextval('wallet_entries_id_seq') AS n) s, wallet_balances WHERE currency = 'EUR')
			UPDATE wallet_balances SET balance = balance + 5 WHERE currency = 'EUR'`,
			"balance differs from its ledger with the archive"},
		{"archived with its rows online", `UPDATE orders SET archived_at = now() WHERE external_order_code = 'a'`,
			"archived order with online rows"},
		{"lines archived, order online", `INSERT INTO order_lines_archive
			(order_id, line_no, product_code, unit_price, quantity, currency, sku)
			SELECT order_id, line_no, product_code, unit_price, quantity, currency, sku FROM order_lines`,
			"archived lines or codes of an order online"},
		{"delivered code back in stock", `WITH d AS (INSERT INTO delivered_codes
			(order_id, line_no, unit_no, key_ref, ciphertext, digest)
			SELECT id, 0, 0, 1, '\x00', sha256('x') FROM orders WHERE external_order_code = 'a' RETURNING digest)
			INSERT INTO code_stock (product_code, ciphertext, digest) SELECT '10000000000001', '\x00', digest FROM d`,
			"delivered code available in stock"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			w := newWallet(t, "10.00", map[string]int64{"EUR": 100_000})
			for _, code := range []string{"a", "b"} {
				o := w.order(code, 100)
				if _, _, err := w.db.PlaceOrder(ctx, o, fulfilJob, w.debit(o)); err != nil {
					t.Fatal(err)
				}
			}
			if tc.damage != "" {
				if _, err := w.db.Pool.Exec(ctx, tc.damage); err != nil {
					t.Fatal(err)
				}
			}
			a, err := storetest.AuditMoney(ctx, w.db.Pool)
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Orders) != 2 || a.ByCode()["a"].Status == "" || a.ByCode()["b"].Status == "" {
				t.Errorf("orders %+v", a.Orders)
			}
			if problem := findingsProblem(a.Findings, tc.want); problem != "" {
				t.Error(problem)
			}
		})
	}
}

// findingsProblem says how findings differ from one starting with want (empty: none at all).
func findingsProblem(findings []string, want string) string {
	if want == "" {
		if len(findings) > 0 {
			return fmt.Sprintf("findings in an intact database: %q", findings)
		}
		return ""
	}
	for _, f := range findings {
		if strings.HasPrefix(f, want) {
			return ""
		}
	}
	return fmt.Sprintf("findings %q, want one starting %q", findings, want)
}
