package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
)

// wallet is an account of a fresh database with balances (minor units) and a low-balance
// threshold (major units).
type wallet struct {
	db      *store.DB
	account uuid.UUID
}

func newWallet(t *testing.T, threshold string, balances map[string]int64) wallet {
	t.Helper()
	ctx := context.Background()
	db := storetest.Open(t, store.Options{MaxConns: 8})
	var account uuid.UUID
	err := db.Pool.QueryRow(ctx, `WITH p AS (INSERT INTO partners (namespace, name) VALUES ('ns', 'acme') RETURNING id)
		INSERT INTO accounts (partner_id, environment, low_balance_threshold)
		SELECT id, 'production', $1::numeric FROM p RETURNING id`,
		threshold).Scan(&account)
	if err != nil {
		t.Fatal(err)
	}
	for currency, amount := range balances {
		err := db.InTx(ctx, func(tx pgx.Tx) error {
			_, err := store.ApplyLedgerEntry(ctx, tx, store.LedgerEntry{AccountID: account, Currency: currency,
				Kind: store.EntryTopUp, Reference: "seed-" + currency, Amount: amount})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return wallet{db: db, account: account}
}

func (w wallet) order(code string, price int64) *store.Order {
	id := uuid.Must(uuid.NewV7())
	return &store.Order{ID: id, AccountID: w.account, ExternalOrderCode: code, PayloadHash: []byte{1}, Currency: "EUR",
		TotalPrice: price, TotalQuantity: 1, DebitedAmount: price, Status: store.OrderProcessing,
		EstimatedReadyAt: time.Now().Add(time.Second), CreatedAt: time.Now(),
		Lines: []store.OrderLine{{OrderID: id, ProductCode: "p1", UnitPrice: price, Quantity: 1, Currency: "EUR"}}}
}

func (w wallet) debit(o *store.Order) *store.LedgerEntry {
	return &store.LedgerEntry{AccountID: w.account, Currency: o.Currency, Kind: store.EntryOrderDebit,
		Reference: o.ID.String(), Amount: -o.DebitedAmount}
}

var fulfilJob = store.Job{
	Kind:        "codeport.fulfil_order",
	Queue:       "fulfilment_production",
	Args:        []byte(`{}`),
	MaxAttempts: 3,
}

// state is what the database holds for the account: orders, their lines and jobs, ledger
// entries, and the EUR balance and ledger sum.
type state struct{ orders, lines, jobs, entries, balance, ledger int64 }

func (w wallet) state(t *testing.T) state {
	t.Helper()
	var s state
	err := w.db.Pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM orders WHERE account_id = $1),
		(SELECT count(*) FROM order_lines l JOIN orders o ON o.id = l.order_id WHERE o.account_id = $1),
		(SELECT count(*) FROM river_job),
		(SELECT count(*) FROM wallet_entries WHERE account_id = $1),
		(SELECT balance FROM wallet_balances WHERE account_id = $1 AND currency = 'EUR'),
		(SELECT sum(amount)::bigint FROM wallet_entries WHERE account_id = $1 AND currency = 'EUR')`, w.account).
		Scan(&s.orders, &s.lines, &s.jobs, &s.entries, &s.balance, &s.ledger)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPlaceOrder: the pipelined placement writes the order, its line, its job, the debit and its
// ledger entry together, or, when the code is taken, the balance short, the threshold crossed or
// the ledger write failing, nothing at all; the connection goes back to the pool idle.
func TestPlaceOrder(t *testing.T) {
	ctx := context.Background()
	w := newWallet(t, "5", map[string]int64{"EUR": 1000, "USD": 700})
	first := w.order("first", 300)
	inserted, res, err := w.db.PlaceOrder(ctx, first, fulfilJob, w.debit(first))
	if err != nil || !inserted {
		t.Fatalf("place: inserted %v, %v", inserted, err)
	}
	if !res.Applied || res.BalanceAfter != 700 || res.IsLow || res.Threshold != 500 {
		t.Fatalf("ledger result %+v", res)
	}
	wantBalances := []store.Balance{{Currency: "EUR", Balance: 700}, {Currency: "USD", Balance: 700}}
	if fmt.Sprint(res.Balances) != fmt.Sprint(wantBalances) {
		t.Fatalf("balances after the debit %+v, want %+v", res.Balances, wantBalances)
	}
	placed := state{orders: 1, lines: 1, jobs: 1, entries: 3, balance: 700, ledger: 700}
	if got := w.state(t); got != placed {
		t.Fatalf("after placement %+v, want %+v", got, placed)
	}
	connections := w.db.Pool.Stat().NewConnsCount()

	taken := w.order("first", 300)
	tooDear := w.order("too-dear", 701)
	crossing := w.order("crossing", 201) // 700 - 201 < 500, the threshold in cents
	failing := w.order("failing", 100)
	badEntry := w.debit(failing)
	badEntry.Kind = "no-such-kind" // the ledger write fails after the order is written
	for _, tc := range []struct {
		name    string
		order   *store.Order
		debit   *store.LedgerEntry
		wantErr error
	}{
		{"external code taken", taken, w.debit(taken), nil},
		{"balance short", tooDear, w.debit(tooDear), store.ErrInsufficientBalance},
		{"threshold crossed", crossing, w.debit(crossing), store.ErrNeedsTransaction},
		{"ledger write fails", failing, badEntry, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inserted, _, err := w.db.PlaceOrder(ctx, tc.order, fulfilJob, tc.debit)
			if inserted {
				t.Fatal("inserted")
			}
			switch {
			case tc.name == "ledger write fails":
				if err == nil {
					t.Fatal("a failed ledger write reported no error")
				}
			case tc.wantErr == nil && err != nil, tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if got := w.state(t); got != placed {
				t.Fatalf("state %+v, want %+v unchanged", got, placed)
			}
		})
	}
	// Refusals roll back rather than leave the pool to discard a connection mid-transaction;
	// only the failed pipeline's connection is replaced.
	if n := w.db.Pool.Stat().NewConnsCount() - connections; n > 1 {
		t.Fatalf("%d connections replaced after the refusals", n)
	}

	noBalance := w.order("yen", 100)
	noBalance.Currency = "JPY"
	debit := w.debit(noBalance)
	debit.Currency = "JPY"
	if _, _, err := w.db.PlaceOrder(ctx, noBalance, fulfilJob, debit); !errors.Is(err, store.ErrInsufficientBalance) {
		t.Fatalf("no balance in the currency: %v", err)
	}
	free := w.order("free", 0)
	if inserted, res, err := w.db.PlaceOrder(ctx, free, fulfilJob, nil); err != nil || !inserted || res.Applied {
		t.Fatalf("order without a debit: inserted %v, %+v, %v", inserted, res, err)
	}
	want := state{orders: 2, lines: 2, jobs: 2, entries: 3, balance: 700, ledger: 700}
	if got := w.state(t); got != want {
		t.Fatalf("after an order without a debit %+v, want %+v", got, want)
	}
}

// TestPlaceOrderConcurrently: placements racing for one wallet and one external order code
// debit exactly what the balance covers, insert each code once, and keep the ledger equal to the
// balance.
func TestPlaceOrderConcurrently(t *testing.T) {
	ctx := context.Background()
	w := newWallet(t, "0", map[string]int64{"EUR": 1000})
	const racers = 24
	var wg sync.WaitGroup
	var mu sync.Mutex
	var placed, short, replays int
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code := fmt.Sprintf("order-%d", i)
			if i%3 == 0 {
				code = "shared" // a third of them place the same code
			}
			o := w.order(code, 100)
			inserted, _, err := w.db.PlaceOrder(ctx, o, fulfilJob, w.debit(o))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, store.ErrInsufficientBalance):
				short++
			case err != nil:
				t.Errorf("%s: %v", code, err)
			case inserted:
				placed++
			default:
				replays++
			}
		}()
	}
	wg.Wait()
	s := w.state(t)
	if int64(placed) != s.orders || s.balance != 1000-100*s.orders || s.ledger != s.balance || s.jobs != s.orders {
		t.Fatalf("%d placed, %d short, %d replays; database %+v", placed, short, replays, s)
	}
	var shared int64
	err := w.db.Pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE external_order_code = 'shared'`).Scan(&shared)
	if err != nil {
		t.Fatal(err)
	}
	// 17 distinct codes compete for 10 debits: all of the balance goes, the shared code at most once.
	if shared > 1 || s.balance != 0 || placed+short+replays != racers {
		t.Fatalf("shared code placed %d times; %d placed, %d short, %d replays; balance %d",
			shared, placed, short, replays, s.balance)
	}
}
