package controllers

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// followerFixture provisions partners acme and globex with a sandbox Wallet each and returns a
// follower over them, its refresh (one read, the names of the Wallets it refreshed) and the
// accounts by partner. The first read, which refreshes every Wallet, is done.
func followerFixture(t *testing.T, database string) (*ledgerFollower, func() []string, map[string]string, *store.DB) {
	t.Helper()
	ctx := context.Background()
	db := openTestStore(t, database, 4)
	prov := testfixture.Provisioner(t, db, nil)
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)

	const ns = "ledger"
	var wallets []client.Object
	accounts := map[string]string{}
	for _, name := range []string{"acme", "globex"} {
		p := testfixture.Partner(name, testfixture.InNamespace(ns), testfixture.WithContact(name, "ops@"+name+".example"))
		if _, err := prov.ApplyPartner(ctx, p, nil, nil); err != nil {
			t.Fatal(err)
		}
		w := testfixture.Wallet(name, "sandbox", testfixture.InNamespace(ns),
			testfixture.WithTopUps(testfixture.TopUp("t1", "EUR", "10.00")))
		if _, err := prov.ApplyWallet(ctx, w); err != nil {
			t.Fatal(err)
		}
		wallets = append(wallets, w)
		var id string
		if err := db.Pool.QueryRow(ctx, `SELECT a.id::text FROM accounts a JOIN partners p ON p.id = a.partner_id
			WHERE p.namespace = $1 AND p.name = $2 AND a.environment = 'sandbox'`, ns, name).
			Scan(&id); err != nil || id == "" {
			t.Fatalf("account of %s: %q %v", name, id, err)
		}
		accounts[name] = id
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(wallets...).
		WithIndex(&v1alpha1.Wallet{}, walletPartnerIndex, func(o client.Object) []string {
			return []string{o.(*v1alpha1.Wallet).Spec.PartnerRef.Name}
		}).Build()
	events := make(chan event.GenericEvent, 16)
	f := newLedgerFollower(prov, c, events)
	refreshed := func() []string {
		t.Helper()
		if err := f.read(ctx); err != nil {
			t.Fatal(err)
		}
		var names []string
		for len(events) > 0 {
			names = append(names, (<-events).Object.GetName())
		}
		slices.Sort(names)
		return names
	}
	if got := refreshed(); !slices.Equal(got, []string{"acme-sandbox", "globex-sandbox"}) {
		t.Fatalf("first read refreshed %v, want every Wallet", got)
	}
	return f, refreshed, accounts, db
}

// ledgerEntry is an entry of account, as any writer of the ledger makes one.
const ledgerEntry = `INSERT INTO wallet_entries (account_id, currency, kind, reference, amount, balance_after)
	VALUES ($1, 'EUR', 'adjustment', $2, 1, 1)`

// TestLedgerFollowerSeesLateCommits: ledger entry ids are taken at insert, so an entry can commit
// after one with a higher id was read. The follower still refreshes its Wallet, and stops
// refreshing an account once its entries are older than the commit lag.
func TestLedgerFollowerSeesLateCommits(t *testing.T) {
	_, refreshed, accounts, db := followerFixture(t, "controllers_ledger")
	ctx := context.Background()
	late, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = late.Rollback(ctx) }()
	if _, err := late.Exec(ctx, ledgerEntry, accounts["acme"], "late"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, ledgerEntry, accounts["globex"], "early"); err != nil {
		t.Fatal(err)
	}
	if got := refreshed(); !slices.Contains(got, "globex-sandbox") {
		t.Fatalf("refreshed %v, want the committed entry's Wallet", got)
	}
	if err := late.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := refreshed(); !slices.Contains(got, "acme-sandbox") {
		t.Fatalf("refreshed %v: the entry committed after a higher id was read is missed", got)
	}
	for range ledgerCommitLag {
		refreshed()
	}
	if got := refreshed(); len(got) != 0 {
		t.Errorf("with no new entries, %v are still refreshed after the commit lag", got)
	}
}

// TestLedgerFollowerDefersBusyWallets: a Wallet is refreshed on its account's first entry, then,
// while entries keep landing, at most once per walletRefreshMaxWait, and at the first read after
// they stop.
func TestLedgerFollowerDefersBusyWallets(t *testing.T) {
	f, refreshed, accounts, db := followerFixture(t, "controllers_ledger_busy")
	now := time.Now()
	f.now = func() time.Time { return now }
	order := func(i int) {
		t.Helper()
		_, err := db.Pool.Exec(context.Background(), ledgerEntry, accounts["acme"], fmt.Sprintf("order-%d", i))
		if err != nil {
			t.Fatal(err)
		}
	}
	var got [][]string
	for i := range 8 {
		order(i)
		got = append(got, refreshed())
		now = now.Add(walletRefreshInterval)
	}
	want := [][]string{{"acme-sandbox"}, nil, nil, nil, nil, {"acme-sandbox"}, nil, nil}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("refreshes while an entry lands every interval: %v, want %v", got, want)
	}
	if quiet := refreshed(); !slices.Equal(quiet, []string{"acme-sandbox"}) {
		t.Fatalf("first read without new entries refreshed %v, want the busy Wallet", quiet)
	}
}

// TestLedgerFollowerSkipsUnwatchedNamespaces: in namespaced mode, entries of accounts whose
// partner lives in a namespace the operator does not watch wake nothing (that namespace's
// Wallets are another operator's and outside this one's cache).
func TestLedgerFollowerSkipsUnwatchedNamespaces(t *testing.T) {
	f, refreshed, accounts, db := followerFixture(t, "controllers_ledger_scoped")
	f.watchOnly([]string{"elsewhere"})
	if _, err := db.Pool.Exec(context.Background(), ledgerEntry, accounts["acme"], "scoped"); err != nil {
		t.Fatal(err)
	}
	if got := refreshed(); len(got) != 0 {
		t.Fatalf("refreshed %v of a namespace that is not watched", got)
	}
	f.watchOnly([]string{"ledger"})
	if _, err := db.Pool.Exec(context.Background(), ledgerEntry, accounts["globex"], "watched"); err != nil {
		t.Fatal(err)
	}
	if got := refreshed(); !slices.Contains(got, "globex-sandbox") {
		t.Fatalf("refreshed %v, want the watched namespace's Wallet", got)
	}
}
