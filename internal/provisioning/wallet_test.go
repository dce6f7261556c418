package provisioning_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/tenancy"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// rowVersions are the (xmin, xmax) of an account's rows and its ledger size: a write changes
// xmin, a row lock (FOR UPDATE, FOR NO KEY UPDATE) sets xmax.
func rowVersions(t *testing.T, db *store.DB, account string) string {
	t.Helper()
	var v string
	err := db.Pool.QueryRow(context.Background(), `SELECT
		(SELECT xmin::text || '/' || xmax::text FROM accounts WHERE id = $1) || ' ' ||
		COALESCE((SELECT string_agg(currency || ':' || xmin::text || '/' || xmax::text, ',' ORDER BY currency)
		          FROM wallet_balances WHERE account_id = $1), '') || ' ' ||
		(SELECT count(*)::text FROM wallet_entries WHERE account_id = $1)`, account).Scan(&v)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestApplyWalletOfAppliedSpecWritesNothing: a Wallet whose threshold and top-ups are already
// in the database (a resync, a status refresh after orders) neither writes nor locks a row;
// a changed threshold or a new top-up does.
func TestApplyWalletOfAppliedSpecWritesNothing(t *testing.T) {
	ctx := context.Background()
	db, prov, res := onboardAcme(t, 4)
	account := res.Accounts[string(tenancy.Production)].String()
	w := testfixture.Wallet("acme", "production", testfixture.InNamespace("ns"), testfixture.Named("acme"),
		testfixture.WithThreshold("100.00"),
		testfixture.WithTopUps(testfixture.TopUp("t1", "EUR", "500.00"), testfixture.TopUp("t2", "JPY", "9000")))
	apply := func() provisioning.WalletResult {
		t.Helper()
		r, err := prov.ApplyWallet(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := apply()
	if first.Applied != 2 || len(first.NewlyApplied) != 2 || first.Balances["EUR"] != "500.00" {
		t.Fatalf("first apply: %+v", first)
	}
	before := rowVersions(t, db, account)
	again := apply()
	if after := rowVersions(t, db, account); after != before {
		t.Fatalf("re-applying an applied Wallet wrote or locked rows: %s -> %s", before, after)
	}
	if again.Applied != 2 || len(again.NewlyApplied) != 0 || again.Balances["EUR"] != "500.00" ||
		again.Balances["JPY"] != "9000" {
		t.Fatalf("re-apply: %+v", again)
	}

	w.Spec.LowBalanceThreshold = "600"
	changed := apply()
	if after := rowVersions(t, db, account); after == before {
		t.Fatal("a new threshold was not written")
	}
	if !changed.LowBalance {
		t.Fatalf("500 EUR under a threshold of 600: %+v", changed)
	}
	w.Spec.TopUps = append(w.Spec.TopUps, v1alpha1.TopUp{ID: "t3", Currency: "EUR", Amount: "1.00"})
	if r := apply(); len(r.NewlyApplied) != 1 || r.Balances["EUR"] != "501.00" {
		t.Fatalf("new top-up: %+v", r)
	}
}

// TestApplyTopUpOnceUnderConcurrency: a WalletTopUp applied by several reconciles at once is
// credited once, every call reports it applied and one reports having written it; once applied,
// applying it again neither writes nor locks a row.
func TestApplyTopUpOnceUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	db, prov, res := onboardAcme(t, 12)
	account := res.Accounts[string(tenancy.Production)].String()
	top := provisioning.TopUp{Namespace: "ns", Partner: "acme", Environment: "production", ID: "wire-1",
		Currency: "EUR", Amount: "250.00", Source: provisioning.TopUpSource("wire-1")}
	const callers = 8
	results := make(chan provisioning.TopUpResult, callers)
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := prov.ApplyTopUp(ctx, top)
			results <- r
			errs <- err
		}()
	}
	wg.Wait()
	close(results)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	newly := 0
	for r := range results {
		if !r.Applied || r.Conflict != "" || r.AppliedAt.IsZero() {
			t.Fatalf("concurrent apply: %+v", r)
		}
		if r.Newly {
			newly++
		}
	}
	state, err := prov.WalletState(ctx, "ns", "acme", "production")
	if err != nil || newly != 1 || state.Balances["EUR"] != "250.00" {
		t.Fatalf("%d calls wrote the top-up; balances %v, %v", newly, state.Balances, err)
	}
	before := rowVersions(t, db, account)
	if r, err := prov.ApplyTopUp(ctx, top); err != nil || !r.Applied || r.Newly {
		t.Fatalf("re-apply: %+v, %v", r, err)
	}
	if after := rowVersions(t, db, account); after != before {
		t.Fatalf("re-applying an applied top-up wrote or locked rows: %s -> %s", before, after)
	}
	// The same id from another WalletTopUp, or with another amount: refused.
	other := top
	other.Source = provisioning.TopUpSource("other")
	if r, err := prov.ApplyTopUp(ctx, other); err != nil || r.Applied || r.Conflict == "" {
		t.Fatalf("same id from another top-up: %+v, %v", r, err)
	}
	changed := top
	changed.Amount = "300.00"
	if r, err := prov.ApplyTopUp(ctx, changed); err != nil || r.Applied || r.Conflict == "" {
		t.Fatalf("same id with another amount: %+v, %v", r, err)
	}
	var invalid *provisioning.InvalidTopUpError
	fractional := top
	fractional.ID, fractional.Amount = "wire-2", "1.005"
	if _, err := prov.ApplyTopUp(ctx, fractional); !errors.As(err, &invalid) {
		t.Fatalf("1.005 EUR: %v", err)
	}
}

// TestSpecTopUpsTurnedOff: with Wallet.spec.topUps turned off, a Wallet's settings still apply
// and its earlier top-ups stay applied, but a new entry of the list credits nothing and is
// reported: only WalletTopUps move money.
func TestSpecTopUpsTurnedOff(t *testing.T) {
	ctx := context.Background()
	_, prov, _ := onboardAcme(t, 4)
	w := testfixture.Wallet("acme", "production", testfixture.InNamespace("ns"), testfixture.Named("acme"),
		testfixture.WithTopUps(testfixture.TopUp("t1", "EUR", "500.00")))
	if _, err := prov.ApplyWallet(ctx, w); err != nil {
		t.Fatal(err)
	}
	w.Spec.LowBalanceThreshold = "600"
	w.Spec.TopUps = append(w.Spec.TopUps, v1alpha1.TopUp{ID: "t2", Currency: "EUR", Amount: "100.00"})
	res, err := prov.ApplyWalletWith(ctx, w, provisioning.WalletOptions{SpecTopUps: false})
	if err != nil {
		t.Fatal(err)
	}
	if res.Applied != 1 || len(res.NewlyApplied) != 0 || res.Invalid["t2"] == "" || len(res.Removed) != 0 ||
		res.Balances["EUR"] != "500.00" || !res.LowBalance {
		t.Fatalf("wallet with spec top-ups off: %+v", res)
	}
}

// onboardAcme provisions partner ns/acme in a fresh database of a test's own, opened with
// conns connections, and returns the database, its provisioner and the partner's accounts.
func onboardAcme(t *testing.T, conns int32) (*store.DB, *provisioning.Provisioner, provisioning.PartnerResult) {
	t.Helper()
	db := storetest.Open(t, store.Options{MaxConns: conns})
	prov := testfixture.Provisioner(t, db, nil)
	p := testfixture.Partner("acme", testfixture.InNamespace("ns"), testfixture.WithContact("Acme", "ops@acme.example"))
	res, err := prov.ApplyPartner(context.Background(), p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return db, prov, res
}
