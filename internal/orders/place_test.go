package orders_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/catalog"
	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/fulfilment"
	"github.com/codeport/codeport/internal/orders"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/tenancy"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// These tests place and read orders through orders.Service on a database of their own, with
// partners, catalogs and wallets provisioned as the operator provisions them and accounts loaded
// as the API loads them for a key. They judge each outcome by what Place returns and by what the
// database holds afterwards: an order is its row, its fulfilment job and its debit, or nothing.

const (
	// eurCredit costs 20.00 EUR, yenCredit 500 JPY (a currency without minor units).
	eurCredit = "10000000000001"
	yenCredit = "10000000000002"
	namespace = "partners"
)

// fixture is a migrated database with the test catalog provisioned, and the production order
// service over it.
type fixture struct {
	db      *store.DB
	cipher  *codes.Cipher
	prov    *provisioning.Provisioner
	catalog uuid.UUID
	service *orders.Service
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	ctx := context.Background()
	db := storetest.Open(t, store.Options{MaxConns: 16})
	cipher := testfixture.Cipher(t)
	prov := testfixture.Provisioner(t, db, cipher)
	f := &fixture{db: db, cipher: cipher, prov: prov}
	c := testfixture.Catalog("main", testfixture.InNamespace(namespace), testfixture.WithDescription("Test", 1))
	gaming := func(p *v1alpha1.CatalogProduct) { p.MainCategory, p.Denomination = "Gaming", v1alpha1.Denomination{} }
	res, err := f.prov.ApplyCatalog(ctx, c, []v1alpha1.CatalogProduct{
		testfixture.Product(eurCredit, testfixture.WithName("Credit 20 EUR", "Acme"), gaming),
		testfixture.Product(yenCredit, testfixture.WithName("Credit 500 JPY", "Acme"), testfixture.SoldIn("JP", "JPY"),
			testfixture.WithPrice(500), gaming),
	})
	if err != nil || len(res.Invalid) > 0 {
		t.Fatalf("catalog: %v %v", err, res.Invalid)
	}
	f.catalog = res.ID
	f.service = orders.NewService(db, catalog.NewCache(db, tenancy.Production), cipher,
		orders.DefaultEstimate(), slog.New(slog.DiscardHandler))
	return f
}

func ptr[T any](v T) *T { return &v }

// partner is what a test provisions for one partner: its ordering policy and its production
// wallet.
type partner struct {
	ordering  *v1alpha1.OrderingSpec
	threshold string
	topUps    []v1alpha1.TopUp
}

// onboard provisions the partner and its production wallet, and returns the production account
// as the API loads it for a key.
func (f *fixture) onboard(t testing.TB, name string, p partner) *auth.Account {
	t.Helper()
	production := string(tenancy.Production)
	tn, err := testfixture.Onboard(context.Background(), f.prov, testfixture.Partner(name,
		testfixture.InNamespace(namespace), testfixture.WithCatalogRef("main"), testfixture.WithAllowlist("127.0.0.1"),
		testfixture.WithOrdering(p.ordering)), testfixture.WithKeys(testfixture.APIKeyIn(production)),
		testfixture.WithBalance(production, p.threshold, p.topUps...))
	if err != nil {
		t.Fatal(err)
	}
	return f.lookup(t, tn.Keys[production], production)
}

// account issues the partner a key of environment and returns its account as the API loads it.
func (f *fixture) account(t *testing.T, partner, environment string) *auth.Account {
	t.Helper()
	key, err := testfixture.IssueKey(context.Background(), f.prov, namespace, partner, testfixture.APIKeyIn(environment))
	if err != nil {
		t.Fatal(err)
	}
	return f.lookup(t, key, environment)
}

// lookup is the account of key as the API of environment loads it.
func (f *fixture) lookup(t testing.TB, key, environment string) *auth.Account {
	t.Helper()
	principal, err := auth.NewDirectory(f.db, environment).Lookup(context.Background(), key, tenancy.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	return principal.Account
}

// order is a PlaceOrder body of quantity units of product, priced in its catalog currency.
func order(code, product string, quantity int) string {
	currency := "EUR"
	if product == yenCredit {
		currency = "JPY"
	}
	return fmt.Sprintf(`{"externalOrderCode":%q,"currency":%q,"orderProducts":[{"productCode":%q,"quantity":%d}]}`,
		code, currency, product, quantity)
}

func eur(id, amount string) v1alpha1.TopUp {
	return v1alpha1.TopUp{ID: id, Currency: "EUR", Amount: amount}
}

// state is what the database holds for an account: its orders, its order debits, the fulfilment
// jobs (of the whole database, which is the test's own) and its balance in one currency, in
// minor units (0 when it has none).
type state struct{ orders, debits, jobs, balance int64 }

// stateOf reads the account's state and checks what holds whatever the outcome: every job is
// the fulfilment of an order of the account, on its environment's queue; every order's debit is
// its debited amount; the ledger sums to the balance.
func (f *fixture) stateOf(t *testing.T, acct *auth.Account, currency string) state {
	t.Helper()
	var s state
	var strayJobs, wrongDebits, ledger int64
	err := f.db.Pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM orders WHERE account_id = $1),
		(SELECT count(*) FROM wallet_entries WHERE account_id = $1 AND kind = 'order_debit'),
		(SELECT count(*) FROM river_job),
		COALESCE((SELECT balance FROM wallet_balances WHERE account_id = $1 AND currency = $2), 0),
		(SELECT count(*) FROM river_job j WHERE j.kind <> $3 OR j.queue <> $4 OR NOT EXISTS
			(SELECT 1 FROM orders o WHERE o.account_id = $1 AND o.id::text = j.args->>'orderId')),
		(SELECT count(*) FROM orders o WHERE o.account_id = $1 AND o.debited_amount <> COALESCE(
			(SELECT -sum(e.amount) FROM wallet_entries e
			 WHERE e.account_id = $1 AND e.kind = 'order_debit' AND e.reference = o.id::text), 0)),
		COALESCE((SELECT sum(amount)::bigint FROM wallet_entries WHERE account_id = $1 AND currency = $2), 0)`,
		acct.ID, currency, fulfilment.Args{}.Kind(), fulfilment.QueueName(acct.Environment)).
		Scan(&s.orders, &s.debits, &s.jobs, &s.balance, &strayJobs, &wrongDebits, &ledger)
	if err != nil {
		t.Fatal(err)
	}
	if strayJobs != 0 || wrongDebits != 0 || ledger != s.balance {
		t.Errorf("inconsistent database: %d jobs not fulfilling an order on its queue, "+
			"%d orders whose debit differs, ledger %d for a balance of %d", strayJobs, wrongDebits, ledger, s.balance)
	}
	return s
}

// reasonOf is the rule a refusal names, or "" when err is not a refusal.
func reasonOf(err error) orders.Reason {
	var refusal *orders.Refusal
	if errors.As(err, &refusal) {
		return refusal.Reason
	}
	return ""
}

// TestPlace: each outcome of one placement, after the account's earlier orders, as Place returns
// it and as the database holds it. A new order is its row, its job and its debit together; a
// refusal writes nothing; a replay or a conflicting reuse of the code leaves the original alone.
// With a daily spend limit the placement takes its transactional path rather than the pipelined
// one, so the outcomes the two share are tried on both.
func TestPlace(t *testing.T) {
	dailyLimit := func(eurCents int64) *v1alpha1.OrderingSpec {
		return &v1alpha1.OrderingSpec{Limits: &v1alpha1.OrderLimits{DailySpend: map[string]int64{"EUR": eurCents}}}
	}
	fifty := []v1alpha1.TopUp{eur("t1", "50.00")}
	tests := []struct {
		name    string
		partner partner
		// earlier are bodies placed first, each of which must be placed.
		earlier []string
		body    string
		// refusal is the rule the body breaks, "" when it is placed or replayed.
		refusal  orders.Reason
		replayed bool
		want     state
	}{
		{name: "placed and debited", partner: partner{topUps: fifty},
			body: order("A", eurCredit, 2), want: state{orders: 1, debits: 1, jobs: 1, balance: 1000}},
		{name: "replayed without a second debit", partner: partner{topUps: fifty},
			earlier: []string{order("A", eurCredit, 1)}, body: order("A", eurCredit, 1), replayed: true,
			want: state{orders: 1, debits: 1, jobs: 1, balance: 3000}},
		{name: "code reused for another order", partner: partner{topUps: fifty},
			earlier: []string{order("A", eurCredit, 1)}, body: order("A", eurCredit, 2),
			refusal: orders.ExternalOrderCodeReusedOther, want: state{orders: 1, debits: 1, jobs: 1, balance: 3000}},
		{name: "insufficient funds", partner: partner{topUps: []v1alpha1.TopUp{eur("t1", "19.99")}},
			body: order("A", eurCredit, 1), refusal: orders.InsufficientFunds, want: state{balance: 1999}},
		{name: "no wallet in the currency", partner: partner{},
			body: order("A", eurCredit, 1), refusal: orders.InsufficientFunds, want: state{}},
		{name: "ordering disabled", partner: partner{topUps: fifty,
			ordering: &v1alpha1.OrderingSpec{Enabled: ptr(false)}},
			body: order("A", eurCredit, 1), refusal: orders.OrderingDisabled, want: state{balance: 5000}},
		{name: "wallet disabled places without a debit", partner: partner{
			ordering: &v1alpha1.OrderingSpec{WalletEnabled: ptr(false)}},
			body: order("A", eurCredit, 3), want: state{orders: 1, jobs: 1}},
		{name: "daily limit reached exactly", partner: partner{topUps: fifty, ordering: dailyLimit(4000)},
			earlier: []string{order("A", eurCredit, 1)}, body: order("B", eurCredit, 1),
			want: state{orders: 2, debits: 2, jobs: 2, balance: 1000}},
		{name: "daily limit exceeded", partner: partner{topUps: fifty, ordering: dailyLimit(3999)},
			earlier: []string{order("A", eurCredit, 1)}, body: order("B", eurCredit, 1),
			refusal: orders.LimitExceeded, want: state{orders: 1, debits: 1, jobs: 1, balance: 3000}},
		{name: "daily limit of another currency", partner: partner{topUps: fifty, ordering: &v1alpha1.OrderingSpec{
			Limits: &v1alpha1.OrderLimits{DailySpend: map[string]int64{"JPY": 1}}}},
			body: order("A", eurCredit, 2), want: state{orders: 1, debits: 1, jobs: 1, balance: 1000}},
		{name: "daily limit, wallet disabled", partner: partner{ordering: &v1alpha1.OrderingSpec{
			WalletEnabled: ptr(false), Limits: &v1alpha1.OrderLimits{DailySpend: map[string]int64{"EUR": 5000}}}},
			earlier: []string{order("A", eurCredit, 2)}, body: order("B", eurCredit, 1),
			refusal: orders.LimitExceeded, want: state{orders: 1, jobs: 1}},
		{name: "insufficient funds under a daily limit", partner: partner{topUps: []v1alpha1.TopUp{eur("t1", "19.99")},
			ordering: dailyLimit(100000)}, body: order("A", eurCredit, 1), refusal: orders.InsufficientFunds,
			want: state{balance: 1999}},
		{name: "replayed under a daily limit", partner: partner{topUps: fifty, ordering: dailyLimit(100000)},
			earlier: []string{order("A", eurCredit, 1)}, body: order("A", eurCredit, 1), replayed: true,
			want: state{orders: 1, debits: 1, jobs: 1, balance: 3000}},
		{name: "code reused under a daily limit", partner: partner{topUps: fifty, ordering: dailyLimit(100000)},
			earlier: []string{order("A", eurCredit, 1)}, body: order("A", eurCredit, 2),
			refusal: orders.ExternalOrderCodeReusedOther, want: state{orders: 1, debits: 1, jobs: 1, balance: 3000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			acct := f.onboard(t, "acme", tt.partner)
			var first orders.View
			for i, body := range tt.earlier {
				v, replayed, err := f.service.Place(ctx, acct, []byte(body))
				if err != nil || replayed {
					t.Fatalf("earlier order %s: replayed %v, %v", body, replayed, err)
				}
				if i == 0 {
					first = v
				}
			}

			v, replayed, err := f.service.Place(ctx, acct, []byte(tt.body))
			switch {
			case tt.refusal != "":
				if reasonOf(err) != tt.refusal {
					t.Fatalf("Place = %v, want the refusal %q", err, tt.refusal)
				}
			case err != nil:
				t.Fatalf("Place: %v", err)
			case replayed != tt.replayed:
				t.Fatalf("replayed %v, want %v", replayed, tt.replayed)
			case tt.replayed && v.OrderID != first.OrderID:
				t.Fatalf("replay answered order %s, want the original %s", v.OrderID, first.OrderID)
			case v.Status != store.OrderProcessing || v.ExternalOrderCode != externalCode(t, tt.body) ||
				v.EstimatedReadyAt == nil:
				t.Fatalf("placed order %+v", v)
			case !tt.replayed && tt.want.balance != 0 && string(v.Wallet.Balances["EUR"]) != major(tt.want.balance):
				// The response shows the wallet as the debit left it.
				t.Fatalf("wallet in the response %v, want EUR %s", v.Wallet.Balances, major(tt.want.balance))
			}
			if got := f.stateOf(t, acct, "EUR"); got != tt.want {
				t.Errorf("database holds %+v, want %+v", got, tt.want)
			}
		})
	}
}

func externalCode(t *testing.T, body string) string {
	t.Helper()
	req, err := orders.Decode([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return req.ExternalOrderCode
}

// major renders EUR cents as the wallet does.
func major(cents int64) string { return fmt.Sprintf("%d.%02d", cents/100, cents%100) }

// lowBalanceLog is a hook that records each crossing it hears of in the table heard, with the
// Querier it is given, and counts its calls. It fails, after writing, when fail is set.
type lowBalanceLog struct {
	mu    sync.Mutex
	calls int
	fail  error
}

const heardTable = `CREATE TABLE heard (account_id uuid, environment text, currency text, balance_after bigint,
	threshold bigint, orders_seen bigint)`

func (l *lowBalanceLog) hook(
	ctx context.Context, q store.Querier, accountID uuid.UUID, environment, currency string, res store.LedgerResult,
) error {
	l.mu.Lock()
	l.calls++
	l.mu.Unlock()
	// orders_seen counts the account's orders as the hook's Querier sees them: the order being
	// placed is among them only inside the placement's transaction.
	_, err := q.Exec(ctx, `INSERT INTO heard SELECT $1, $2, $3, $4, $5,
		(SELECT count(*) FROM orders WHERE account_id = $1)`,
		accountID, environment, currency, res.BalanceAfter, res.Threshold)
	if err != nil {
		return err
	}
	return l.fail
}

// heard is a crossing as the hook recorded it, committed.
type heard struct {
	environment, currency            string
	balanceAfter, threshold, ordered int64
}

func (f *fixture) heard(t *testing.T, acct *auth.Account) []heard {
	t.Helper()
	rows, err := f.db.Pool.Query(context.Background(), `SELECT environment, currency, balance_after, threshold,
		orders_seen FROM heard WHERE account_id = $1 ORDER BY orders_seen`, acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []heard
	for rows.Next() {
		var h heard
		if err := rows.Scan(&h.environment, &h.currency, &h.balanceAfter, &h.threshold, &h.ordered); err != nil {
			t.Fatal(err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPlaceHearsLowBalanceOncePerCrossing: the order whose debit takes a balance below the
// threshold calls OnLowBalance once, inside its transaction; later orders of a balance still
// low do not. The threshold is compared as money.IsLow does, so "0.5" JPY, which no yen balance
// but 0 is under, fires when the balance reaches 0.
func TestPlaceHearsLowBalanceOncePerCrossing(t *testing.T) {
	tests := []struct {
		name      string
		product   string
		threshold string
		topUp     v1alpha1.TopUp
		// balances are the balances after each order; the crossing is the order that fires.
		balances       []int64
		crossing       int
		thresholdMinor int64
	}{
		{name: "EUR", product: eurCredit, threshold: "25", topUp: eur("t1", "60.00"),
			balances: []int64{4000, 2000, 0}, crossing: 1, thresholdMinor: 2500},
		{name: "JPY under half a yen", product: yenCredit, threshold: "0.5",
			topUp:    v1alpha1.TopUp{ID: "t1", Currency: "JPY", Amount: "1500"},
			balances: []int64{1000, 500, 0}, crossing: 2, thresholdMinor: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			if _, err := f.db.Pool.Exec(ctx, heardTable); err != nil {
				t.Fatal(err)
			}
			var log lowBalanceLog
			f.service.OnLowBalance = log.hook
			acct := f.onboard(t, "acme", partner{threshold: tt.threshold, topUps: []v1alpha1.TopUp{tt.topUp}})
			for i, balance := range tt.balances {
				v, _, err := f.service.Place(ctx, acct, []byte(order(fmt.Sprint(i), tt.product, 1)))
				if err != nil {
					t.Fatalf("order %d: %v", i, err)
				}
				if got := f.stateOf(t, acct, string(tt.topUp.Currency)).balance; got != balance {
					t.Fatalf("balance after order %d: %d, want %d", i, got, balance)
				}
				low, wantCalls := i >= tt.crossing, 0
				if low {
					wantCalls = 1
				}
				if log.calls != wantCalls {
					t.Fatalf("after order %d the hook was called %d times, want %d", i, log.calls, wantCalls)
				}
				// The wallet the partner is shown judges the balance by the same rule as the alert.
				if v.Wallet.LowBalance != low {
					t.Fatalf("after order %d the response's wallet says lowBalance %v, want %v", i, v.Wallet.LowBalance, low)
				}
			}
			want := []heard{{environment: string(tenancy.Production), currency: string(tt.topUp.Currency),
				balanceAfter: tt.balances[tt.crossing], threshold: tt.thresholdMinor, ordered: int64(tt.crossing + 1)}}
			if got := f.heard(t, acct); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("the hook committed %+v, want %+v (it sees the order it is called for)", got, want)
			}
		})
	}
}

// TestPlaceRollsBackWhenLowBalanceHookFails: the crossing's notifications are part of the
// placement, so a hook that fails leaves no order, no debit, no job and none of its own writes,
// and the partner is told fulfilment is unavailable rather than that the order was placed.
func TestPlaceRollsBackWhenLowBalanceHookFails(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.db.Pool.Exec(ctx, heardTable); err != nil {
		t.Fatal(err)
	}
	log := lowBalanceLog{fail: errors.New("notification queue unavailable")}
	f.service.OnLowBalance = log.hook
	acct := f.onboard(t, "acme", partner{threshold: "25", topUps: []v1alpha1.TopUp{eur("t1", "30.00")}})

	_, _, err := f.service.Place(ctx, acct, []byte(order("A", eurCredit, 1)))
	if !errors.Is(err, orders.ErrFulfilmentUnavailable) || !errors.Is(err, log.fail) {
		t.Fatalf("Place = %v, want %v wrapping the hook's error", err, orders.ErrFulfilmentUnavailable)
	}
	if log.calls != 1 {
		t.Errorf("hook called %d times, want 1", log.calls)
	}
	if got, want := f.stateOf(t, acct, "EUR"), (state{balance: 3000}); got != want {
		t.Errorf("database holds %+v, want %+v", got, want)
	}
	if got := f.heard(t, acct); len(got) != 0 {
		t.Errorf("the failed hook's writes were committed: %+v", got)
	}

	// The balance never went low, so the retried order crosses, and is heard of, again.
	log.fail = nil
	if _, _, err := f.service.Place(ctx, acct, []byte(order("A", eurCredit, 1))); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if got, want := f.stateOf(t, acct, "EUR"), (state{orders: 1, debits: 1, jobs: 1, balance: 1000}); got != want {
		t.Errorf("after the retry the database holds %+v, want %+v", got, want)
	}
	if len(f.heard(t, acct)) != 1 {
		t.Errorf("the retry's crossing was not recorded once: %+v", f.heard(t, acct))
	}
}

// placementPaths are the account policies that send a debited order down each placement path:
// pipelined, or in a transaction of the orders package (a daily spend limit is checked there).
var placementPaths = []struct {
	name     string
	ordering *v1alpha1.OrderingSpec
}{
	{name: "pipelined"},
	{name: "in a transaction", ordering: &v1alpha1.OrderingSpec{
		Limits: &v1alpha1.OrderLimits{DailySpend: map[string]int64{"EUR": 1_000_000}}}},
}

type placeResult struct {
	view     orders.View
	replayed bool
	err      error
}

// placeAtOnce places the bodies concurrently, released together, and returns their results.
func (f *fixture) placeAtOnce(acct *auth.Account, bodies []string) []placeResult {
	results := make([]placeResult, len(bodies))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, body := range bodies {
		wg.Go(func() {
			<-start
			v, replayed, err := f.service.Place(context.Background(), acct, []byte(body))
			results[i] = placeResult{v, replayed, err}
		})
	}
	close(start)
	wg.Wait()
	return results
}

// TestPlaceConcurrentSameCode: partners retry on timeouts, so the same order arrives several
// times at once. Exactly one placement writes and debits; every other caller gets that order
// as a replay.
func TestPlaceConcurrentSameCode(t *testing.T) {
	for _, path := range placementPaths {
		t.Run(path.name, func(t *testing.T) {
			f := newFixture(t)
			acct := f.onboard(t, "acme", partner{ordering: path.ordering, topUps: []v1alpha1.TopUp{eur("t1", "100.00")}})
			placed, ids := 0, map[uuid.UUID]bool{}
			for _, r := range f.placeAtOnce(acct, slices.Repeat([]string{order("A", eurCredit, 1)}, 12)) {
				if r.err != nil {
					t.Fatalf("Place: %v", r.err)
				}
				if !r.replayed {
					placed++
				}
				ids[r.view.OrderID] = true
			}
			if placed != 1 || len(ids) != 1 {
				t.Errorf("%d callers placed a new order and %d order ids were answered, want 1 and 1", placed, len(ids))
			}
			if got, want := f.stateOf(t, acct, "EUR"), (state{orders: 1, debits: 1, jobs: 1, balance: 8000}); got != want {
				t.Errorf("database holds %+v, want %+v", got, want)
			}
		})
	}
}

// TestPlaceConcurrentOrdersShareOneBalance: different orders racing for a balance that covers
// only some of them are debited one after another, never from a stale balance: as many are
// placed as the balance covers, the rest are refused, and the balance ends at what the ledger
// says.
func TestPlaceConcurrentOrdersShareOneBalance(t *testing.T) {
	for _, path := range placementPaths {
		t.Run(path.name, func(t *testing.T) {
			f := newFixture(t)
			acct := f.onboard(t, "acme", partner{ordering: path.ordering, topUps: []v1alpha1.TopUp{eur("t1", "100.00")}})
			bodies := make([]string, 12)
			for i := range bodies {
				bodies[i] = order(fmt.Sprint("order-", i), eurCredit, 1)
			}
			placed, refused := 0, 0
			for _, r := range f.placeAtOnce(acct, bodies) {
				switch {
				case r.err == nil && !r.replayed:
					placed++
				case reasonOf(r.err) == orders.InsufficientFunds:
					refused++
				default:
					t.Fatalf("Place = replayed %v, %v", r.replayed, r.err)
				}
			}
			// 100.00 EUR covers five orders of 20.00.
			if placed != 5 || refused != 7 {
				t.Errorf("%d placed and %d refused, want 5 and 7", placed, refused)
			}
			if got, want := f.stateOf(t, acct, "EUR"), (state{orders: 5, debits: 5, jobs: 5}); got != want {
				t.Errorf("database holds %+v, want %+v", got, want)
			}
		})
	}
}

// TestGet: an order is found by its orderId and by its externalOrderCode, and only by the
// account that placed it: another partner, or the same partner's other environment, gets
// NotFoundError for the same references.
func TestGet(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	owner := f.onboard(t, "acme", partner{topUps: []v1alpha1.TopUp{eur("t1", "50.00")}})
	other := f.onboard(t, "globex", partner{topUps: []v1alpha1.TopUp{eur("t1", "50.00")}})
	placed, _, err := f.service.Place(ctx, owner, []byte(order("shared-code", eurCredit, 1)))
	if err != nil {
		t.Fatal(err)
	}
	// The other partner has an order of the same external code: a lookup must not cross over.
	othersOrder, _, err := f.service.Place(ctx, other, []byte(order("shared-code", eurCredit, 2)))
	if err != nil {
		t.Fatal(err)
	}
	sandbox := f.account(t, "acme", string(tenancy.Sandbox))
	tests := []struct {
		name      string
		acct      *auth.Account
		reference string
		want      uuid.UUID // uuid.Nil: not found
	}{
		{"by orderId", owner, placed.OrderID.String(), placed.OrderID},
		{"by externalOrderCode", owner, "shared-code", placed.OrderID},
		// Placement trims the code it is sent, so " shared-code " placed, and replays, this order.
		{"externalOrderCode as sent, blanks and all", owner, " shared-code\t", placed.OrderID},
		{"same code, other partner", other, "shared-code", othersOrder.OrderID},
		{"orderId of another partner", other, placed.OrderID.String(), uuid.Nil},
		{"orderId from the other environment", sandbox, placed.OrderID.String(), uuid.Nil},
		{"code from the other environment", sandbox, "shared-code", uuid.Nil},
		{"unknown code", owner, "never-placed", uuid.Nil},
		{"unknown orderId", owner, uuid.NewString(), uuid.Nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := f.service.Get(ctx, tt.acct, tt.reference)
			if tt.want == uuid.Nil {
				var notFound *orders.NotFoundError
				if !errors.As(err, &notFound) || notFound.Reference != tt.reference {
					t.Fatalf("Get = %+v, %v; want NotFoundError of %s", v, err, tt.reference)
				}
				return
			}
			if err != nil || v.OrderID != tt.want || v.Status != store.OrderProcessing ||
				v.ExternalOrderCode != "shared-code" {
				t.Fatalf("Get = %+v, %v; want order %s", v, err, tt.want)
			}
		})
	}
}
