package fulfilment_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/fulfilment"
	"github.com/codeport/codeport/internal/notify"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/tenancy"
	"github.com/codeport/codeport/internal/test/testfixture"
	"github.com/codeport/codeport/internal/wallet"
)

// These tests run Fulfil on orders written as placements write them, on a database of their
// own, without River: the outcome of each order is what the database holds afterwards, its
// status, its codes and its refund.

// Sandbox test products (catalog.TestProducts) and an ordinary product.
const (
	alwaysSucceeds = "99000000000001"
	alwaysFails    = "99000000000003"
	deliversHalf   = "99000000000004"
	slow           = "99000000000005"
	ordinary       = "10000000000001"
)

type fixture struct {
	db     *store.DB
	prov   *provisioning.Provisioner
	cipher *codes.Cipher
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db := storetest.Open(t, store.Options{MaxConns: 8})
	cipher := testfixture.Cipher(t)
	prov := testfixture.Provisioner(t, db, cipher)
	return &fixture{db: db, prov: prov, cipher: cipher}
}

// account provisions a partner whose environment's wallet holds 1000.00 EUR, and returns the
// account's id.
func (f *fixture) account(t *testing.T, partner, environment string) uuid.UUID {
	t.Helper()
	return f.accountWithWebhooks(t, partner, environment, nil)
}

// accountWithWebhooks is account for a partner with the webhooks given.
func (f *fixture) accountWithWebhooks(
	t *testing.T, partner, environment string, webhooks provisioning.Webhooks,
) uuid.UUID {
	t.Helper()
	tn, err := testfixture.Onboard(context.Background(), f.prov,
		testfixture.Partner(partner, testfixture.InNamespace("ns")), testfixture.WithWebhooks(webhooks),
		testfixture.WithKeys(),
		testfixture.WithBalance(environment, "", testfixture.TopUp("t1", "EUR", "1000.00")))
	if err != nil {
		t.Fatal(err)
	}
	return tn.Account(environment)
}

// line is an order line: quantity units of product at price (EUR cents).
type line struct {
	product         string
	quantity, price int
}

// place writes an order of lines, its job and, when debited, its debit, as a placement does.
func (f *fixture) place(
	t *testing.T, account uuid.UUID, environment string, lines []line, debited bool, createdAt time.Time,
) uuid.UUID {
	t.Helper()
	o := store.Order{ID: uuid.Must(uuid.NewV7()), AccountID: account, PayloadHash: []byte{1}, Currency: "EUR",
		Status: store.OrderProcessing, EstimatedReadyAt: createdAt, CreatedAt: createdAt}
	o.ExternalOrderCode = o.ID.String()
	for i, l := range lines {
		o.Lines = append(o.Lines, store.OrderLine{OrderID: o.ID, LineNo: i, ProductCode: l.product,
			UnitPrice: int64(l.price), Quantity: l.quantity, Currency: "EUR"})
		o.TotalPrice += int64(l.price * l.quantity)
		o.TotalQuantity += l.quantity
	}
	var debit *store.LedgerEntry
	if debited {
		o.DebitedAmount = o.TotalPrice
		entry, err := wallet.DebitEntry(account, "EUR", o.DebitedAmount, o.ID.String())
		if err != nil {
			t.Fatal(err)
		}
		debit = &entry
	}
	job, err := fulfilment.Job(o.ID, environment)
	if err != nil {
		t.Fatal(err)
	}
	if inserted, _, err := f.db.PlaceOrder(context.Background(), &o, job, debit); err != nil || !inserted {
		t.Fatalf("place: inserted %v, %v", inserted, err)
	}
	return o.ID
}

// outcome is what the database holds for a fulfilled order.
type outcome struct {
	status string
	// delivered counts the codes of each line.
	delivered []int
	// refunded is the order's refunded amount, refund the sum of its refund entries.
	refunded, refund int64
	reason           string
}

// outcomeOf reads the order's outcome and returns its codes, opened.
func (f *fixture) outcomeOf(t *testing.T, account, orderID uuid.UUID) (outcome, []string) {
	t.Helper()
	ctx := context.Background()
	o, err := store.FindOrder(ctx, f.db.Pool, account, orderID.String())
	if err != nil {
		t.Fatal(err)
	}
	out := outcome{status: o.Status, delivered: make([]int, len(o.Lines)), refunded: o.RefundedAmount}
	if o.Reason != nil {
		out.reason = *o.Reason
	}
	delivered, err := store.DeliveredCodesOf(ctx, f.db.Pool, orderID)
	if err != nil {
		t.Fatal(err)
	}
	var codesOut []string
	for _, d := range delivered {
		out.delivered[d.LineNo]++
		code, err := f.cipher.Open(d.KeyRef, d.Ciphertext, d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		codesOut = append(codesOut, code)
	}
	err = f.db.Pool.QueryRow(ctx, `SELECT COALESCE(sum(amount), 0)::bigint FROM wallet_entries
		WHERE account_id = $1 AND kind = 'refund' AND reference = $2`, account, orderID.String()).Scan(&out.refund)
	if err != nil {
		t.Fatal(err)
	}
	return out, codesOut
}

// sandboxCode is a minted sandbox code: four groups of four characters without the look-alikes
// 0, O, 1 and I.
var sandboxCode = regexp.MustCompile(`^SANDBOX-[A-HJ-NP-Z2-9]{4}(-[A-HJ-NP-Z2-9]{4}){3}$`)

// TestFulfilSandbox: the sandbox scripts its test products as the spec's scenario table says
// and mints SANDBOX- codes for every other product. Whatever was not delivered is refunded at
// its line's price, up to what the order debited, with the finish; running the job again
// changes nothing.
func TestFulfilSandbox(t *testing.T) {
	f := newFixture(t)
	fulfiller := fulfilment.NewFulfiller(f.db, f.cipher, time.Second, slog.New(slog.DiscardHandler))
	tests := []struct {
		name    string
		lines   []line
		debited bool
		want    outcome
	}{
		{"success", []line{{alwaysSucceeds, 2, 1000}}, true,
			outcome{status: store.OrderCompleted, delivered: []int{2}}},
		{"failure", []line{{alwaysFails, 1, 1000}}, true,
			outcome{status: store.OrderFailed, delivered: []int{0}, refunded: 1000, refund: 1000,
				reason: "Sandbox test product 99000000000003 always fails"}},
		{"half of four", []line{{deliversHalf, 4, 500}}, true,
			outcome{status: store.OrderPartiallyCompleted, delivered: []int{2}, refunded: 1000, refund: 1000}},
		{"half of three rounds down", []line{{deliversHalf, 3, 500}}, true,
			outcome{status: store.OrderPartiallyCompleted, delivered: []int{1}, refunded: 1000, refund: 1000}},
		{"half of one delivers it", []line{{deliversHalf, 1, 500}}, true,
			outcome{status: store.OrderCompleted, delivered: []int{1}}},
		{"success and failure refund the failed line's price",
			[]line{{alwaysSucceeds, 1, 700}, {alwaysFails, 2, 1300}}, true,
			outcome{status: store.OrderPartiallyCompleted, delivered: []int{1, 0}, refunded: 2600, refund: 2600}},
		{"ordinary product", []line{{ordinary, 3, 2000}}, true,
			outcome{status: store.OrderCompleted, delivered: []int{3}}},
		{"failure of an order that debited nothing refunds nothing", []line{{alwaysFails, 1, 1000}}, false,
			outcome{status: store.OrderFailed, delivered: []int{0},
				reason: "Sandbox test product 99000000000003 always fails"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			account := f.account(t, fmt.Sprint("sandbox-", i), string(tenancy.Sandbox))
			id := f.place(t, account, string(tenancy.Sandbox), tt.lines, tt.debited, time.Now())
			if err := fulfiller.Fulfil(ctx, id, string(tenancy.Sandbox)); err != nil {
				t.Fatal(err)
			}
			got, minted := f.outcomeOf(t, account, id)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("outcome %+v, want %+v", got, tt.want)
			}
			for _, code := range minted {
				if !sandboxCode.MatchString(code) {
					t.Errorf("minted code %q", code)
				}
			}
			// A retried or rescued job finds the order finished and leaves it alone.
			if err := fulfiller.Fulfil(ctx, id, string(tenancy.Sandbox)); err != nil {
				t.Fatal(err)
			}
			if again, _ := f.outcomeOf(t, account, id); fmt.Sprint(again) != fmt.Sprint(got) {
				t.Errorf("fulfilled again: %+v, was %+v", again, got)
			}
		})
	}
}

// TestFulfilFromStock: production delivers imported codes, oldest first; a short stock
// delivers what there is and refunds the rest, and no stock at all fails the order, naming the
// product.
func TestFulfilFromStock(t *testing.T) {
	f := newFixture(t)
	fulfiller := fulfilment.NewFulfiller(f.db, f.cipher, time.Second, slog.New(slog.DiscardHandler))
	tests := []struct {
		name     string
		stock    int
		quantity int
		want     outcome
	}{
		{"enough", 3, 2, outcome{status: store.OrderCompleted, delivered: []int{2}}},
		{"short", 2, 3, outcome{status: store.OrderPartiallyCompleted, delivered: []int{2}, refunded: 899, refund: 899}},
		{"none", 0, 1, outcome{status: store.OrderFailed, delivered: []int{0}, refunded: 899, refund: 899,
			reason: "Insufficient stock for product 20000000000002: 0 of 1 units delivered"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			// A product of its own per case: stock is shared by every partner.
			product := fmt.Sprintf("2000000000000%d", i)
			// One import per code, so that each is older than the next.
			var imported []string
			for u := range tt.stock {
				code := fmt.Sprintf("CODE-%s-%d", product, u)
				res, err := codes.Import(ctx, f.db.Pool, f.cipher, product, code, strings.NewReader("code\n"+code+"\n"), nil)
				if err != nil || res.Imported != 1 {
					t.Fatalf("import: %+v, %v", res, err)
				}
				imported = append(imported, code)
			}
			account := f.account(t, fmt.Sprint("stock-", i), string(tenancy.Production))
			id := f.place(t, account, string(tenancy.Production), []line{{product, tt.quantity, 899}}, true, time.Now())
			if err := fulfiller.Fulfil(ctx, id, string(tenancy.Production)); err != nil {
				t.Fatal(err)
			}
			got, delivered := f.outcomeOf(t, account, id)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("outcome %+v, want %+v", got, tt.want)
			}
			slices.Sort(delivered)
			if want := imported[:min(tt.stock, tt.quantity)]; fmt.Sprint(delivered) != fmt.Sprint(want) {
				t.Errorf("delivered %v, want the oldest imports %v", delivered, want)
			}
		})
	}
}

// TestFulfilSlowSnoozes: the sandbox Slow product stays processing until its delay after the
// order has passed: Fulfil asks to be run again when it will have, without delivering.
func TestFulfilSlowSnoozes(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	fulfiller := fulfilment.NewFulfiller(f.db, f.cipher, time.Hour, slog.New(slog.DiscardHandler))
	account := f.account(t, "acme", string(tenancy.Sandbox))

	recent := f.place(t, account, string(tenancy.Sandbox), []line{{slow, 1, 1000}}, true, time.Now())
	err := fulfiller.Fulfil(ctx, recent, string(tenancy.Sandbox))
	var snooze *fulfilment.SnoozeError
	if !errors.As(err, &snooze) || snooze.Delay <= 59*time.Minute || snooze.Delay > time.Hour {
		t.Fatalf("Fulfil of a recent slow order = %v, want a snooze of the hour's rest", err)
	}
	if got, _ := f.outcomeOf(t, account, recent); got.status != store.OrderProcessing || got.delivered[0] != 0 {
		t.Errorf("snoozed order %+v, want processing without codes", got)
	}

	old := f.place(t, account, string(tenancy.Sandbox), []line{{slow, 1, 1000}}, true, time.Now().Add(-2*time.Hour))
	if err := fulfiller.Fulfil(ctx, old, string(tenancy.Sandbox)); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.outcomeOf(t, account, old); got.status != store.OrderCompleted || got.delivered[0] != 1 {
		t.Errorf("slow order past its delay %+v, want completed", got)
	}
}

// TestFulfilHookFailureRollsBackTheFinish: hooks (webhooks) are part of finishing an order, so a
// hook that fails leaves the order processing, with no codes and no refund, for the job's
// retry; the hook hears of the finish as committed.
func TestFulfilHookFailureRollsBackTheFinish(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	hookErr := errors.New("webhook queue unavailable")
	var heard []fulfilment.Finished
	fail := true
	hook := func(_ context.Context, _ store.Querier, finished []fulfilment.Finished) error {
		if fail {
			return hookErr
		}
		heard = append(heard, finished...)
		return nil
	}
	fulfiller := fulfilment.NewFulfiller(f.db, f.cipher, time.Second, slog.New(slog.DiscardHandler), hook)
	account := f.account(t, "acme", string(tenancy.Sandbox))
	id := f.place(t, account, string(tenancy.Sandbox), []line{{deliversHalf, 4, 500}}, true, time.Now())

	if err := fulfiller.Fulfil(ctx, id, string(tenancy.Sandbox)); !errors.Is(err, hookErr) {
		t.Fatalf("Fulfil = %v, want the hook's error", err)
	}
	if got, _ := f.outcomeOf(t, account, id); fmt.Sprint(got) != fmt.Sprint(outcome{status: store.OrderProcessing,
		delivered: []int{0}}) {
		t.Errorf("after the hook failed: %+v, want the order untouched", got)
	}

	fail = false
	if err := fulfiller.Fulfil(ctx, id, string(tenancy.Sandbox)); err != nil {
		t.Fatal(err)
	}
	if len(heard) != 1 || heard[0].Status != store.OrderPartiallyCompleted || heard[0].Order.ID != id ||
		heard[0].Order.Delivered != 2 || heard[0].Order.RefundedAmount != 1000 ||
		heard[0].Environment != string(tenancy.Sandbox) {
		t.Errorf("the hook heard %+v, want the partial finish of %s", heard, id)
	}
}

// TestOutcome: an order ends completed when every unit was delivered, partially completed when
// some were and failed when none were; the undelivered units are refunded at their line's price,
// never more than the order debited, and only a failed order shows a reason.
func TestOutcome(t *testing.T) {
	twoLines := []store.OrderLine{{LineNo: 0, UnitPrice: 500, Quantity: 2}, {LineNo: 1, UnitPrice: 300, Quantity: 1}}
	tests := []struct {
		name       string
		debited    int64
		delivered  map[int]int
		shortfall  string
		wantStatus string
		wantUnits  int
		wantRefund int64
		wantReason string
	}{
		{"everything", 1300, map[int]int{0: 2, 1: 1}, "", store.OrderCompleted, 3, 0, ""},
		{"one line short", 1300, map[int]int{0: 1, 1: 1}, "short", store.OrderPartiallyCompleted, 2, 500, ""},
		{"a line missing", 1300, map[int]int{0: 2}, "short", store.OrderPartiallyCompleted, 2, 300, ""},
		{"nothing", 1300, nil, "none left", store.OrderFailed, 0, 1300, "none left"},
		{"nothing, no reason given", 1300, map[int]int{}, "", store.OrderFailed, 0, 1300,
			"No codes could be delivered"},
		{"refund capped by the debit", 400, map[int]int{1: 1}, "short", store.OrderPartiallyCompleted, 1, 400, ""},
		{"nothing debited, nothing refunded", 0, nil, "none", store.OrderFailed, 0, 0, "none"},
		{"more than ordered counts as ordered", 1300, map[int]int{0: 3, 1: 1}, "", store.OrderCompleted, 3, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &store.Order{Lines: twoLines, TotalQuantity: 3, DebitedAmount: tt.debited}
			status, units, refund, reason := fulfilment.Outcome(o, tt.delivered, tt.shortfall)
			gotReason := ""
			if reason != nil {
				gotReason = *reason
			}
			if status != tt.wantStatus || units != tt.wantUnits || refund != tt.wantRefund || gotReason != tt.wantReason {
				t.Errorf("Outcome = %s, %d units, refund %d, reason %q; want %s, %d, %d, %q", status, units, refund,
					gotReason, tt.wantStatus, tt.wantUnits, tt.wantRefund, tt.wantReason)
			}
		})
	}
}

// TestFulfilManyConcurrently: fulfilments of overlapping sets of orders run at once, as jobs
// rescued while their first run goes on do, over a stock that cannot serve every order. Every
// order ends in exactly one terminal state, no code is delivered twice, exactly the stock is
// delivered, and each order short of codes is refunded exactly once, its undelivered value.
func TestFulfilManyConcurrently(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	fulfiller := fulfilment.NewFulfiller(f.db, f.cipher, time.Second, slog.New(slog.DiscardHandler))
	const product, stock, price = "30000000000001", 50, 100
	var codesIn strings.Builder
	codesIn.WriteString("code\n")
	for i := range stock {
		fmt.Fprintf(&codesIn, "CODE-%d\n", i)
	}
	res, err := codes.Import(ctx, f.db.Pool, f.cipher, product, "b", strings.NewReader(codesIn.String()), nil)
	if err != nil || res.Imported != stock {
		t.Fatalf("import: %+v, %v", res, err)
	}
	accounts := []uuid.UUID{f.account(t, "many-0", string(tenancy.Production)),
		f.account(t, "many-1", string(tenancy.Production)), f.account(t, "many-2", string(tenancy.Production))}
	// 40 orders of 1 to 3 units: 80 units wanted of 50 in stock.
	var ids []uuid.UUID
	owner := map[uuid.UUID]uuid.UUID{}
	for i := range 40 {
		account := accounts[i%len(accounts)]
		id := f.place(t, account, string(tenancy.Production), []line{{product, 1 + i%3, price}}, true, time.Now())
		ids, owner[id] = append(ids, id), account
	}
	// Eight fulfilments of ten orders each: every order is in two of them.
	errs := make(chan error, 8)
	for w := range 8 {
		batch := make([]uuid.UUID, 0, 10)
		for k := range 10 {
			batch = append(batch, ids[(w*5+k)%len(ids)])
		}
		go func() {
			errs <- errors.Join(fulfiller.FulfilMany(ctx, string(tenancy.Production), batch)...)
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}

	if delivered := f.checkDeliveries(t, ids, owner); delivered != stock {
		t.Errorf("%d codes delivered, want the whole stock of %d", delivered, stock)
	}
	for _, account := range accounts {
		sums, err := store.LedgerSum(ctx, f.db.Pool, account)
		if err != nil {
			t.Fatal(err)
		}
		balances, err := store.Balances(ctx, f.db.Pool, account)
		if err != nil || len(balances) != 1 || balances[0].Balance != sums["EUR"] {
			t.Errorf("account %s: balances %+v (%v), ledger %v", account, balances, err, sums)
		}
	}
}

// checkDeliveries checks that each order of ids (whose accounts owner gives) is terminal, with
// at most one refund entry, of its refunded amount, and that no code went to two of them. It
// returns the number of codes delivered.
func (f *fixture) checkDeliveries(t *testing.T, ids []uuid.UUID, owner map[uuid.UUID]uuid.UUID) int {
	t.Helper()
	seen := map[string]uuid.UUID{}
	delivered := 0
	for _, id := range ids {
		got, opened := f.outcomeOf(t, owner[id], id)
		if got.status == store.OrderProcessing {
			t.Errorf("order %s still processing", id)
		}
		var entries int64
		if err := f.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM wallet_entries
			WHERE reference = $1 AND kind = 'refund'`, id.String()).Scan(&entries); err != nil {
			t.Fatal(err)
		}
		if got.refund != got.refunded || entries != min(got.refunded, 1) {
			t.Errorf("order %s: %d refund entries of %d for a refund of %d", id, entries, got.refund, got.refunded)
		}
		for _, code := range opened {
			if other, ok := seen[code]; ok {
				t.Errorf("code %s delivered to %s and %s", code, other, id)
			}
			seen[code] = id
		}
		delivered += len(opened)
	}
	return delivered
}

// TestFulfilManyIsolatesAFailingOrder: when one order's finish fails (here its webhook hook),
// the orders fulfilled together with it are finished all the same; only the failing order's
// job fails, and its order stays processing for the retry.
func TestFulfilManyIsolatesAFailingOrder(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	account := f.account(t, "acme", string(tenancy.Sandbox))
	var ids []uuid.UUID
	for range 3 {
		ids = append(ids, f.place(t, account, string(tenancy.Sandbox), []line{{alwaysSucceeds, 1, 1000}}, true, time.Now()))
	}
	bad := ids[1]
	hookErr := errors.New("webhook queue unavailable")
	hook := func(_ context.Context, _ store.Querier, finished []fulfilment.Finished) error {
		for _, fin := range finished {
			if fin.Order.ID == bad {
				return hookErr
			}
		}
		return nil
	}
	fulfiller := fulfilment.NewFulfiller(f.db, f.cipher, time.Second, slog.New(slog.DiscardHandler), hook)
	errs := fulfiller.FulfilMany(ctx, string(tenancy.Sandbox), ids)
	for i, id := range ids {
		got, _ := f.outcomeOf(t, account, id)
		if id == bad {
			if !errors.Is(errs[i], hookErr) || got.status != store.OrderProcessing {
				t.Errorf("failing order: %v, %+v; want the hook's error and the order processing", errs[i], got)
			}
			continue
		}
		if errs[i] != nil || got.status != store.OrderCompleted {
			t.Errorf("order %d: %v, %+v; want completed", i, errs[i], got)
		}
	}
}

// TestFulfilManyRaisesEachOrdersEvent: orders of several accounts finished together each raise
// their own event for their own account's webhook, when it has one that wants the event, and
// none otherwise.
func TestFulfilManyRaisesEachOrdersEvent(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	hook := func(url string, events ...string) provisioning.Webhooks {
		return provisioning.Webhooks{string(tenancy.Sandbox): {URL: url, Secret: []byte("whsec_test"), Events: events}}
	}
	everything := f.accountWithWebhooks(t, "everything", string(tenancy.Sandbox), hook("https://a.example/hook"))
	failures := f.accountWithWebhooks(t, "failures", string(tenancy.Sandbox),
		hook("https://b.example/hook", notify.EventOrderFailed))
	none := f.account(t, "none", string(tenancy.Sandbox))
	type placed struct {
		account uuid.UUID
		product string
		want    string
	}
	orders := []placed{
		{everything, alwaysSucceeds, notify.EventOrderCompleted},
		{everything, alwaysFails, notify.EventOrderFailed},
		{failures, alwaysSucceeds, ""},
		{failures, alwaysFails, notify.EventOrderFailed},
		{none, alwaysSucceeds, ""},
		{none, alwaysFails, ""},
	}
	var ids []uuid.UUID
	for _, o := range orders {
		ids = append(ids, f.place(t, o.account, string(tenancy.Sandbox), []line{{o.product, 1, 1000}}, true, time.Now()))
	}
	notifier := notify.NewNotifier(false, notify.DefaultRetry())
	fulfiller := fulfilment.NewFulfiller(f.db, f.cipher, time.Second, slog.New(slog.DiscardHandler),
		notifier.OrderFinished)
	if err := errors.Join(fulfiller.FulfilMany(ctx, string(tenancy.Sandbox), ids)...); err != nil {
		t.Fatal(err)
	}
	for i, o := range orders {
		var types []string
		err := f.db.Pool.QueryRow(ctx, `SELECT COALESCE(array_agg(type), '{}') FROM webhook_events
			WHERE account_id = $1 AND payload->'data'->>'orderId' = $2`, o.account, ids[i].String()).Scan(&types)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{}
		if o.want != "" {
			want = []string{o.want}
		}
		if !slices.Equal(types, want) {
			t.Errorf("order %d (%s): events %v, want %v", i, o.product, types, want)
		}
	}
}
