package retention_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/apiserver/apierror"
	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/catalog"
	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/codes/codestest"
	"github.com/codeport/codeport/internal/fulfilment"
	"github.com/codeport/codeport/internal/orders"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/retention"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/tenancy"
	"github.com/codeport/codeport/internal/test/testfixture"
	"github.com/codeport/codeport/internal/wallet"
)

// These tests archive orders on a database of their own, with partners, a catalog, stock and
// wallets provisioned as the operator provisions them, orders placed through orders.Service and
// fulfilled by the fulfilment's own code, and judge the outcome by the contract's answers
// (apierror's words, as the HTTP layer sends them) and by the money audit.

const (
	credit    = "10000000000001" // 20.00 EUR
	unitPrice = 2000
	namespace = "partners"
	// backdated is how long ago the old orders of a test finished: past retention.Minimum.
	backdated = 40 * 24 * time.Hour
)

type fixture struct {
	db        *store.DB
	cipher    *codes.Cipher
	prov      *provisioning.Provisioner
	service   *orders.Service
	fulfiller *fulfilment.Fulfiller
}

func newFixture(t *testing.T, stock int) *fixture {
	t.Helper()
	ctx := context.Background()
	db := storetest.Open(t, store.Options{MaxConns: 24})
	cipher := testfixture.Cipher(t)
	prov := testfixture.Provisioner(t, db, cipher)
	c := testfixture.Catalog("main", testfixture.InNamespace(namespace), testfixture.WithDescription("Test", 1))
	res, err := prov.ApplyCatalog(ctx, c, []v1alpha1.CatalogProduct{
		testfixture.Product(credit, testfixture.WithName("Credit 20 EUR", "Acme"), func(p *v1alpha1.CatalogProduct) {
			p.MainCategory, p.Denomination = "Gaming", v1alpha1.Denomination{}
		}),
	})
	if err != nil || len(res.Invalid) > 0 {
		t.Fatalf("catalog: %v %v", err, res.Invalid)
	}
	codestest.Stock(t, db.Pool, cipher, credit, "CODE", stock)
	return &fixture{
		db: db, cipher: cipher, prov: prov,
		service: orders.NewService(db, catalog.NewCache(db, tenancy.Production), cipher, orders.DefaultEstimate(),
			slog.New(slog.DiscardHandler)),
		fulfiller: fulfilment.NewFulfiller(db, cipher, time.Second, slog.New(slog.DiscardHandler)),
	}
}

// onboard provisions a partner with a production wallet of 10,000.00 EUR and a daily spend
// limit, and returns its production account as the API loads it for a key.
func (f *fixture) onboard(t *testing.T, name string, dailySpend int64) *auth.Account {
	t.Helper()
	production := string(tenancy.Production)
	limits := &v1alpha1.OrderLimits{DailySpend: v1alpha1.MinorUnitsByCurrency{"EUR": dailySpend}}
	ordering := &v1alpha1.OrderingSpec{Limits: limits}
	tn, err := testfixture.Onboard(context.Background(), f.prov, testfixture.Partner(name,
		testfixture.InNamespace(namespace), testfixture.WithCatalogRef("main"), testfixture.WithAllowlist("127.0.0.1"),
		testfixture.WithOrdering(ordering)), testfixture.WithKeys(testfixture.APIKeyIn(production)),
		testfixture.WithBalance(production, "", v1alpha1.TopUp{ID: "first", Currency: "EUR", Amount: "10000.00"}))
	if err != nil {
		t.Fatal(err)
	}
	principal, err := auth.NewDirectory(f.db, production).Lookup(context.Background(), tn.Keys[production], tenancy.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	return principal.Account
}

func body(code string, quantity int) string {
	return fmt.Sprintf(`{"externalOrderCode":%q,"currency":"EUR","orderProducts":[{"productCode":%q,"quantity":%d}]}`,
		code, credit, quantity)
}

// place places and fulfils an order and returns its id.
func (f *fixture) place(t testing.TB, acct *auth.Account, code string, quantity int) uuid.UUID {
	t.Helper()
	v, replayed, err := f.service.Place(context.Background(), acct, []byte(body(code, quantity)))
	if err != nil || replayed {
		t.Fatalf("place %s: replayed %v, %v", code, replayed, err)
	}
	id := v.OrderID
	if err := f.fulfiller.Fulfil(context.Background(), id, string(tenancy.Production)); err != nil {
		t.Fatalf("fulfil %s: %v", code, err)
	}
	return id
}

// backdate moves the orders' finish back by backdated, as if they had finished then.
func (f *fixture) backdate(t testing.TB, ids ...uuid.UUID) {
	t.Helper()
	if _, err := f.db.Pool.Exec(context.Background(),
		`UPDATE orders SET finished_at = finished_at - make_interval(secs => $2) WHERE id = ANY($1)`,
		ids, backdated.Seconds()); err != nil {
		t.Fatal(err)
	}
}

// spentToday is what the daily spend limit holds the account's next EUR order to, read as a
// placement reads it.
func (f *fixture) spentToday(t *testing.T, acct *auth.Account) int64 {
	t.Helper()
	var spent int64
	err := f.db.InTx(t.Context(), func(tx store.Tx) error {
		if err := store.LockDailySpend(t.Context(), tx, acct.ID, "EUR"); err != nil {
			return err
		}
		var err error
		spent, err = store.DailySpend(t.Context(), tx, acct.ID, "EUR", time.Now(), uuid.Nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return spent
}

func (f *fixture) archiver(batch int) *retention.Archiver {
	return retention.NewArchiver(f.db, retention.Policy{Environment: string(tenancy.Production),
		After: retention.Minimum, Batch: batch}, slog.New(slog.DiscardHandler))
}

// audit fails the test on any finding of the money audit.
func (f *fixture) audit(t *testing.T, when string) *storetest.Audit {
	t.Helper()
	a, err := storetest.AuditMoney(context.Background(), f.db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, finding := range a.Findings {
		t.Errorf("%s: %s", when, finding)
	}
	return a
}

// answer is what the contract answers for err: its status and message; 200 for none.
func answer(t *testing.T, err error) (int, string) {
	t.Helper()
	if err == nil {
		return 200, ""
	}
	e, ok := apierror.FromDomain(err)
	if !ok {
		t.Fatalf("%v is no answer of the contract", err)
	}
	return e.Status, e.Message
}

// statement reads the account's EUR ledger oldest first, from the statement's own query.
func (f *fixture) statement(t *testing.T, acct *auth.Account) []store.StatementEntry {
	t.Helper()
	var out []store.StatementEntry
	filter := store.StatementFilter{AccountID: acct.ID, Currency: "EUR"}
	err := store.StatementEntries(context.Background(), f.db.Pool, filter,
		func(e *store.StatementEntry) error {
			out = append(out, *e)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(out)
	return out
}

// walkStatement reads the account's EUR statement oldest first and checks that it sums: each
// entry's balanceAfter is the one before plus its amount. It returns the last balance and the
// number of carried entries, each of which must be an adjustment.
func (f *fixture) walkStatement(t *testing.T, acct *auth.Account) (balance int64, carried int) {
	t.Helper()
	for i, e := range f.statement(t, acct) {
		if balance+e.Amount != e.BalanceAfter {
			t.Errorf("entry %d (%s %s): %d + %d is not its balance %d", i, e.Kind, e.Reference, balance, e.Amount,
				e.BalanceAfter)
		}
		balance = e.BalanceAfter
		if e.Note == store.CarriedNote {
			carried++
			if e.Kind != store.EntryAdjustment {
				t.Errorf("carried entry of kind %s", e.Kind)
			}
		}
	}
	return balance, carried
}

// TestContractAfterArchival: an order past retention answers as an unknown order, a re-post of
// its code places nothing (400 with the same body, 409 with another), orders still online
// answer as before, the statement still sums across the archived stretch, and daily spend
// limits count archived orders as before.
func TestContractAfterArchival(t *testing.T) {
	f := newFixture(t, 50)
	ctx := context.Background()
	acct := f.onboard(t, "acme", 30*unitPrice)
	other := f.onboard(t, "globex", 30*unitPrice)

	// Old and recent orders interleaved with a top-up, so that the archived entries make two
	// runs of the ledger, one on each side of entries that stay.
	old1 := f.place(t, acct, "old-1", 2)
	if err := f.db.InTx(ctx, func(tx pgx.Tx) error {
		_, err := wallet.Credit(ctx, tx, acct.ID, "EUR", store.EntryTopUp, 5000, "mid", "between old orders")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	old2 := f.place(t, acct, "old-2", 1)
	recent := f.place(t, acct, "recent-1", 1)
	old3 := f.place(t, acct, "old-3", 3)
	otherOld := f.place(t, other, "old-1", 1)
	f.backdate(t, old1, old2, old3, otherOld)
	spentBefore := f.spentToday(t, acct)
	balanceBefore := f.statement(t, acct)

	done, err := f.archiver(2).RunOnce(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if done.Orders != 4 || done.Codes != 7 || done.Entries != 4 {
		t.Errorf("archived %+v; want 4 orders, 7 codes, 4 ledger entries", done)
	}
	f.audit(t, "after archival")

	for _, tc := range []struct {
		name    string
		do      func() error
		status  int
		message string
	}{
		{"GET an archived order by id", func() error {
			_, err := f.service.Get(ctx, acct, old1.String())
			return err
		}, 404, "Order " + old1.String() + " not found"},
		{"GET an archived order by code", func() error {
			_, err := f.service.Get(ctx, acct, "old-3")
			return err
		}, 404, "Order old-3 not found"},
		{"GET another partner's archived order by code", func() error {
			_, err := f.service.Get(ctx, other, "old-1")
			return err
		}, 404, "Order old-1 not found"},
		{"GET an order still online", func() error {
			v, err := f.service.Get(ctx, acct, "recent-1")
			if err == nil && (len(v.Products) != 1 || len(v.Products[0].Codes) != 1) {
				return fmt.Errorf("recent order without its code: %+v", v)
			}
			return err
		}, 200, ""},
		{"re-post an archived order, same body", func() error {
			_, _, err := f.service.Place(ctx, acct, []byte(body("old-2", 1)))
			return err
		}, 400, "This order has already been placed."},
		{"re-post an archived order, another body", func() error {
			_, _, err := f.service.Place(ctx, acct, []byte(body("old-2", 2)))
			return err
		}, 409, "An order with this external order code already exists."},
		{"re-post an order still online", func() error {
			_, replayed, err := f.service.Place(ctx, acct, []byte(body("recent-1", 1)))
			if err == nil && !replayed {
				return errors.New("not a replay")
			}
			return err
		}, 200, ""},
		{"a new order past the daily limit, archived orders counted", func() error {
			_, _, err := f.service.Place(ctx, acct, []byte(body("over-limit", 24)))
			return err
		}, 422, "Your account order limit has been exceeded. Contact support for assistance."},
		{"a new order within the daily limit", func() error {
			_, _, err := f.service.Place(ctx, acct, []byte(body("within-limit", 22)))
			return err
		}, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, message := answer(t, tc.do())
			if status != tc.status || message != tc.message {
				t.Errorf("answered %d %q; want %d %q", status, message, tc.status, tc.message)
			}
		})
	}

	f.checkOnlineAfterArchival(t, acct, recent, balanceBefore, spentBefore)
}

// checkOnlineAfterArchival checks what TestContractAfterArchival left online: the history, the
// statement, the daily spend, and a second archival that folds into the carried entries.
func (f *fixture) checkOnlineAfterArchival(t *testing.T, acct *auth.Account, recent uuid.UUID,
	balanceBefore []store.StatementEntry, spentBefore int64,
) {
	t.Helper()
	ctx := context.Background()
	t.Run("history lists only the orders online", func(t *testing.T) {
		list, err := store.HistoryOrders(ctx, f.db.Pool, store.OrderFilter{AccountID: acct.ID})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range list {
			got = append(got, o.ExternalOrderCode)
		}
		slices.Sort(got)
		if want := []string{"recent-1", "within-limit"}; !slices.Equal(got, want) {
			t.Errorf("history %v; want %v", got, want)
		}
	})
	t.Run("statement sums across the archived entries", func(t *testing.T) {
		balance, carried := f.walkStatement(t, acct)
		if carried != 3 {
			t.Errorf("%d carried entries; want 3: old-1 before the top-up, old-2 and old-3 either side of recent-1",
				carried)
		}
		last := balanceBefore[len(balanceBefore)-1].BalanceAfter - 22*unitPrice
		if balance != last {
			t.Errorf("statement ends at %d; want %d", balance, last)
		}
	})
	t.Run("daily spend unchanged", func(t *testing.T) {
		if spent, want := f.spentToday(t, acct), spentBefore+22*unitPrice; spent != want {
			t.Errorf("spent %d; want %d", spent, want)
		}
	})
	t.Run("a second archival merges into the carried entries", func(t *testing.T) {
		f.backdate(t, recent)
		done, err := f.archiver(10).RunOnce(ctx, time.Now())
		if err != nil || done.Orders != 1 {
			t.Fatalf("archived %+v, %v; want recent-1", done, err)
		}
		f.audit(t, "after the second archival")
		if _, carried := f.walkStatement(t, acct); carried != 2 {
			t.Errorf("%d carried entries; want 2: old-2, recent-1 and old-3 in one", carried)
		}
	})
}

// TestArchivalResumesAfterACrash: a batch cut off before its commit (its connection killed, as
// a crash or a failover would) leaves nothing behind, committed batches stay, and the next run
// archives the rest; the money audit holds at every step.
func TestArchivalResumesAfterACrash(t *testing.T) {
	f := newFixture(t, 20)
	ctx := context.Background()
	acct := f.onboard(t, "acme", 1000*unitPrice)
	var ids []uuid.UUID
	for i := range 6 {
		ids = append(ids, f.place(t, acct, fmt.Sprintf("old-%d", i), 2))
	}
	f.backdate(t, ids...)
	cutoff := time.Now().Add(-retention.Minimum)

	// One batch commits, the next is killed after its last statement, before its commit.
	if err := f.db.InTx(ctx, func(tx pgx.Tx) error {
		_, err := store.ArchiveOrders(ctx, tx, acct.ID, cutoff, 2)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, f.db.Pool.Config().ConnConfig.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done, err := store.ArchiveOrders(ctx, tx, acct.ID, cutoff, 3)
	if err != nil || done.Orders != 3 {
		t.Fatalf("second batch: %+v, %v", done, err)
	}
	// Waits until the backend is gone and its locks with it; the orders it held are skipped
	// (SKIP LOCKED) until then.
	if _, err := f.db.Pool.Exec(ctx, `SELECT pg_terminate_backend($1, 30000)`, conn.PgConn().PID()); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("the killed batch committed")
	}
	_ = conn.Close(ctx)

	count := func() (archived, lines, entries int) {
		t.Helper()
		if err := f.db.Pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM orders WHERE archived_at IS NOT NULL),
			(SELECT count(*) FROM order_lines_archive),
			(SELECT count(*) FROM wallet_entries_archive)`).Scan(&archived, &lines, &entries); err != nil {
			t.Fatal(err)
		}
		return archived, lines, entries
	}
	if archived, lines, entries := count(); archived != 2 || lines != 2 || entries != 2 {
		t.Errorf("after the crash: %d orders, %d lines, %d entries archived; want the first batch's 2 each",
			archived, lines, entries)
	}
	f.audit(t, "after the crash")
	for _, code := range []string{"old-2", "old-5"} {
		if _, err := f.service.Get(ctx, acct, code); err != nil {
			t.Errorf("GET %s, not archived yet: %v", code, err)
		}
	}

	done, err = f.archiver(3).RunOnce(ctx, time.Now())
	if err != nil || done.Orders != 4 {
		t.Fatalf("resumed run: %+v, %v; want the 4 left", done, err)
	}
	if archived, lines, entries := count(); archived != 6 || lines != 6 || entries != 6 {
		t.Errorf("after the resumed run: %d orders, %d lines, %d entries archived; want 6 each",
			archived, lines, entries)
	}
	f.audit(t, "after the resumed run")
	for _, id := range ids {
		if _, err := f.service.Get(ctx, acct, id.String()); !errors.As(err, new(*orders.NotFoundError)) {
			t.Errorf("GET %s after archival: %v; want not found", id, err)
		}
	}
}

// TestArchivalWaitsForOlderBinaries: while a process built for a schema without archived orders
// is registered, a run archives nothing.
func TestArchivalWaitsForOlderBinaries(t *testing.T) {
	f := newFixture(t, 2)
	ctx := context.Background()
	acct := f.onboard(t, "acme", 1000*unitPrice)
	f.backdate(t, f.place(t, acct, "old", 1))
	if _, err := f.db.Pool.Exec(ctx, `INSERT INTO codeport_instances
		(instance_id, component, version, schema_version, host) VALUES ($1, 'serve', 'previous', $2, 'test')`,
		uuid.New(), store.ArchiveSchemaVersion-1); err != nil {
		t.Fatal(err)
	}
	done, err := f.archiver(10).RunOnce(ctx, time.Now())
	if !errors.Is(err, retention.ErrOlderBinaries) || done.Orders != 0 {
		t.Errorf("run beside an older binary: %+v, %v; want nothing archived and ErrOlderBinaries", done, err)
	}
	if _, err := f.service.Get(ctx, acct, "old"); err != nil {
		t.Errorf("GET old: %v", err)
	}
}

// TestArchivalPrunesPastDailySpend: a run deletes the running totals of the days before its
// cutoff, which no limit reads again, and keeps the later ones.
func TestArchivalPrunesPastDailySpend(t *testing.T) {
	f := newFixture(t, 2)
	ctx := context.Background()
	acct := f.onboard(t, "acme", 1000*unitPrice)
	f.place(t, acct, "today", 1)
	now := time.Now()
	past, kept := now.Add(-retention.Minimum-2*retention.Day), now.Add(-retention.Minimum+retention.Day)
	for _, at := range []time.Time{past, kept} {
		if _, err := f.db.Pool.Exec(ctx, `INSERT INTO daily_spend (account_id, currency, day, spent)
			VALUES ($1, 'EUR', ($2::timestamptz AT TIME ZONE 'UTC')::date, 100)`, acct.ID, at); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.archiver(10).RunOnce(ctx, now); err != nil {
		t.Fatal(err)
	}
	var days []string
	rows, err := f.db.Pool.Query(ctx, `SELECT day::text FROM daily_spend WHERE account_id = $1 ORDER BY day`, acct.ID)
	if err == nil {
		days, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		t.Fatal(err)
	}
	want := []string{kept.UTC().Format(time.DateOnly), now.UTC().Format(time.DateOnly)}
	if !slices.Equal(days, want) {
		t.Errorf("daily spend rows of %v after the run; want %v", days, want)
	}
	if spent := f.spentToday(t, acct); spent != unitPrice {
		t.Errorf("spent today %d; want %d", spent, unitPrice)
	}
}

// TestArchivalUnderOrderLoad: partners keep placing orders, and fulfilment keeps finishing and
// refunding them, while archival rewrites their ledgers: every placement succeeds, every
// acknowledged order is stored once, and the money audit holds.
func TestArchivalUnderOrderLoad(t *testing.T) {
	const partners, old, placers, perPlacer = 2, 60, 4, 25
	f := newFixture(t, partners*old+placers*perPlacer/2)
	ctx := context.Background()
	var accts []*auth.Account
	for p := range partners {
		acct := f.onboard(t, fmt.Sprintf("partner-%d", p), 1_000_000*unitPrice)
		accts = append(accts, acct)
		var ids []uuid.UUID
		for i := range old {
			ids = append(ids, f.place(t, acct, fmt.Sprintf("old-%d", i), 1))
		}
		f.backdate(t, ids...)
	}

	errs := make(chan error, placers*perPlacer+1)
	stop := make(chan struct{})
	archived := f.archiveUntil(ctx, stop, errs)
	var wg sync.WaitGroup
	for w := range placers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.placeLoad(ctx, accts[w%partners], fmt.Sprintf("load-%d-", w), perPlacer, errs)
		}()
	}
	wg.Wait()
	close(stop)
	total := <-archived
	// Whatever the load left for archival is archived now, with the load stopped.
	rest, err := f.archiver(5).RunOnce(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	total.Add(rest)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if total.Orders != partners*old {
		t.Errorf("archived %d orders; want the %d old ones", total.Orders, partners*old)
	}
	a := f.audit(t, "after the load")
	stored := a.ByCode()
	for _, acct := range accts {
		list, err := store.HistoryOrders(ctx, f.db.Pool, store.OrderFilter{AccountID: acct.ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != placers/partners*perPlacer {
			t.Errorf("%d orders online; want the %d placed under load", len(list), placers/partners*perPlacer)
		}
	}
	for w := range placers {
		for i := range perPlacer {
			if _, ok := stored[fmt.Sprintf("load-%d-%d", w, i)]; !ok {
				t.Errorf("order load-%d-%d acknowledged, not stored", w, i)
			}
		}
	}
}

// archiveUntil runs the archiver over and over until stop closes, then sends what it archived.
// A batch that met a placement's lock past its lock_timeout gave up whole, and the next run
// takes it again; any other failure goes to errs.
func (f *fixture) archiveUntil(ctx context.Context, stop <-chan struct{}, errs chan<- error) <-chan store.Archived {
	archived := make(chan store.Archived, 1)
	go func() {
		var total store.Archived
		archiver := f.archiver(5)
		for {
			done, err := archiver.RunOnce(ctx, time.Now())
			total.Add(done)
			var pgErr *pgconn.PgError
			if err != nil && (!errors.As(err, &pgErr) || pgErr.Code != "55P03") {
				select {
				case errs <- fmt.Errorf("archival: %w", err):
				default: // the first failures are enough to report
				}
			}
			select {
			case <-stop:
				archived <- total
				return
			default:
			}
		}
	}()
	return archived
}

// placeLoad places and fulfils n orders of the account, codes prefix and a counter; half of
// them ask for two units, more than the stock left at the end, so that fulfilment refunds.
func (f *fixture) placeLoad(ctx context.Context, acct *auth.Account, prefix string, n int, errs chan<- error) {
	for i := range n {
		code := prefix + fmt.Sprint(i)
		v, replayed, err := f.service.Place(ctx, acct, []byte(body(code, 1+i%2)))
		if err != nil || replayed {
			errs <- fmt.Errorf("place %s: replayed %v, %w", code, replayed, err)
			continue
		}
		if err := f.fulfiller.Fulfil(ctx, v.OrderID, string(tenancy.Production)); err != nil {
			errs <- fmt.Errorf("fulfil %s: %w", code, err)
		}
	}
}
