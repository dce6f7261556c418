package controllers_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
	"github.com/codeport/codeport/internal/wallet"
)

func topUpObj(ns, name, wallet, id, currency, amount string) *v1alpha1.WalletTopUp {
	topUp := testfixture.TopUp(id, currency, amount)
	topUp.Note = "wire " + id
	return testfixture.WalletTopUp(wallet, topUp, testfixture.InNamespace(ns), testfixture.Named(name))
}

// waitTopUp waits until the WalletTopUp's Ready condition has reason and returns it.
func waitTopUp(t *testing.T, ns, name, reason string) *v1alpha1.WalletTopUp {
	t.Helper()
	var top v1alpha1.WalletTopUp
	poll.Until(t, timeout, "top-up "+name+" "+reason, func() (bool, string) {
		get(t, ns, name, &top)
		c := meta.FindStatusCondition(top.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == reason && c.ObservedGeneration == top.Generation, c.String()
	})
	return &top
}

func sandboxBalance(t *testing.T, key string) any {
	t.Helper()
	return getJSON(t, "sandbox", "/wallet", key)["balances"].(map[string]any)["EUR"]
}

// TestWalletTopUp: a WalletTopUp credits its Wallet once, by id, and says when; reconciles,
// restarts and re-creating it from the same manifest never credit again; an id already in the
// ledger for something else is refused, not taken for applied; an invalid amount is reported.
func TestWalletTopUp(t *testing.T) {
	ns := namespace(t)
	key, _ := onboard(t, ns)
	ctx := context.Background()
	w := walletObj(ns, "acme-sandbox", "sandbox", v1alpha1.TopUp{ID: "wire-1", Currency: "EUR", Amount: "100.00"})
	create(t, w)

	create(t, topUpObj(ns, "wire-2", "acme-sandbox", "wire-2", "EUR", "50.00"))
	top := waitTopUp(t, ns, "wire-2", v1alpha1.ReasonApplied)
	if !top.Status.Applied || top.Status.AppliedAt == nil || top.Status.ObservedGeneration != top.Generation {
		t.Fatalf("applied top-up status: %+v", top.Status)
	}
	if b := sandboxBalance(t, key); b != 150.0 {
		t.Fatalf("balance after the top-up: %v", b)
	}
	waitEvent(t, ns, "Wallet", "acme-sandbox",
		"Normal TopUpApplied: Top-up wire-2 credited 50.00 EUR (WalletTopUp wire-2)")
	waitEvent(t, ns, "WalletTopUp", "wire-2", "Normal Applied: Generation 1 applied: 50.00 EUR credited")
	poll.Until(t, timeout, "wallet status follows", func() (bool, string) {
		get(t, ns, "acme-sandbox", w)
		c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionTopUpsReconciled)
		// The WalletTopUp's entry is not one "removed from spec.topUps".
		return w.Status.Balances["EUR"] == "150.00" && c != nil && c.Status == metav1.ConditionTrue,
			fmt.Sprintf("%v %v", w.Status.Balances, c)
	})

	// Deleted and created again from the same manifest: the same top-up, applied, not credited
	// twice. Neither do reconciles of a second operator.
	if err := env.k8s.Delete(ctx, top); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, timeout, "top-up gone", func() (bool, string) { return !get(t, ns, "wire-2", top), "" })
	replicaCtx, stopReplica := context.WithCancel(ctx)
	defer stopReplica()
	if err := startManager(replicaCtx, nil); err != nil {
		t.Fatal(err)
	}
	create(t, topUpObj(ns, "wire-2", "acme-sandbox", "wire-2", "EUR", "50.00"))
	waitTopUp(t, ns, "wire-2", v1alpha1.ReasonApplied)
	stopReplica()
	time.Sleep(500 * time.Millisecond)
	if b := sandboxBalance(t, key); b != 150.0 {
		t.Fatalf("balance after re-creating the top-up: %v", b)
	}

	// Ids already in the ledger for something else: refused, with the reason.
	create(t, topUpObj(ns, "again-wire-1", "acme-sandbox", "wire-1", "EUR", "100.00"))
	c := meta.FindStatusCondition(waitTopUp(t, ns, "again-wire-1", v1alpha1.ReasonTopUpConflict).Status.Conditions,
		v1alpha1.ConditionReady)
	if !strings.Contains(c.Message, "applied by the Wallet's spec.topUps") {
		t.Fatalf("conflict with the Wallet's list: %s", c.Message)
	}
	create(t, topUpObj(ns, "other-wire-2", "acme-sandbox", "wire-2", "EUR", "70.00"))
	c = meta.FindStatusCondition(waitTopUp(t, ns, "other-wire-2", v1alpha1.ReasonTopUpConflict).Status.Conditions,
		v1alpha1.ConditionReady)
	if !strings.Contains(c.Message, "applied by WalletTopUp/wire-2") {
		t.Fatalf("conflict with another WalletTopUp: %s", c.Message)
	}
	waitEvent(t, ns, "WalletTopUp", "other-wire-2", "Warning TopUpConflict:")
	// ...and the Wallet's list cannot take a WalletTopUp's id either.
	update(t, ns, "acme-sandbox", w, func() {
		w.Spec.TopUps = append(w.Spec.TopUps, v1alpha1.TopUp{ID: "wire-2", Currency: "EUR", Amount: "50.00"})
	})
	poll.Until(t, timeout, "wallet list refuses a WalletTopUp's id", func() (bool, string) {
		get(t, ns, "acme-sandbox", w)
		c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionTopUpsReconciled)
		return c != nil && c.Reason == v1alpha1.ReasonInvalidTopUp && c.ObservedGeneration == w.Generation &&
			strings.Contains(c.Message, "wire-2: id already applied by WalletTopUp/wire-2"), c.String()
	})

	// More decimals than the currency has: never applicable, and said so.
	create(t, topUpObj(ns, "fractional", "acme-sandbox", "wire-3", "EUR", "1.005"))
	waitTopUp(t, ns, "fractional", v1alpha1.ReasonInvalidTopUp)
	if b := sandboxBalance(t, key); b != 150.0 {
		t.Fatalf("balance after refused top-ups: %v", b)
	}

	// A top-up waits for its Wallet, and for the Wallet to be the one in service.
	create(t, topUpObj(ns, "early", "acme-production", "wire-9", "EUR", "10.00"))
	waitTopUp(t, ns, "early", v1alpha1.ReasonWalletNotFound)
	create(t, walletObj(ns, "duplicate", "sandbox"))
	create(t, topUpObj(ns, "to-duplicate", "duplicate", "wire-10", "EUR", "10.00"))
	poll.Until(t, timeout, "top-up of a duplicate wallet waits", func() (bool, string) {
		var top v1alpha1.WalletTopUp
		get(t, ns, "to-duplicate", &top)
		c := meta.FindStatusCondition(top.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == v1alpha1.ReasonWalletNotReady &&
			strings.Contains(c.Message, v1alpha1.ReasonDuplicateWallet), c.String()
	})
	create(t, walletObj(ns, "acme-production", "production"))
	waitTopUp(t, ns, "early", v1alpha1.ReasonApplied)
}

// reconcileErrors is how many reconciles of the named controller have failed, in every operator
// of the suite: a failed reconcile is retried with backoff.
func reconcileErrors(t *testing.T, controller string) float64 {
	t.Helper()
	return controllerCounter(t, "controller_runtime_reconcile_errors_total", controller)
}

// TestTopUpBounds: a top-up above the largest one (--max-top-up) is refused, as a WalletTopUp
// (InvalidTopUp and a Warning) and as an entry of Wallet.spec.topUps (the Wallet names it); one
// that would take its balance past the most the ledger holds is refused as a rule of money
// (BalanceOverflow), where it failed as a database error retried forever. Neither is retried.
func TestTopUpBounds(t *testing.T) {
	ns := namespace(t)
	onboard(t, ns)
	ctx := context.Background()
	w := walletObj(ns, "acme-sandbox", "sandbox", v1alpha1.TopUp{ID: "wire-1", Currency: "EUR", Amount: "100.00"},
		v1alpha1.TopUp{ID: "wire-2", Currency: "EUR", Amount: "1000000.01"})
	create(t, w)
	walletRefuses := func(what string, entries ...string) {
		t.Helper()
		poll.Until(t, timeout, what, func() (bool, string) {
			get(t, ns, w.Name, w)
			c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady)
			ok := c != nil && c.Reason == v1alpha1.ReasonInvalidTopUp && c.ObservedGeneration == w.Generation
			for _, e := range entries {
				ok = ok && strings.Contains(c.Message, e)
			}
			return ok, c.String()
		})
	}
	walletRefuses("wallet refuses the entry above the largest top-up",
		"wire-2: amount 1000000.01 EUR is above the largest top-up, 1000000 EUR (the operator's --max-top-up)")
	walletErrors, topUpErrors := reconcileErrors(t, "wallet"), reconcileErrors(t, "wallettopup")

	create(t, topUpObj(ns, "absurd", w.Name, "absurd", "EUR", "92233720368547758.07"))
	c := meta.FindStatusCondition(waitTopUp(t, ns, "absurd", v1alpha1.ReasonInvalidTopUp).Status.Conditions,
		v1alpha1.ConditionReady)
	if !strings.Contains(c.Message, "above the largest top-up, 1000000 EUR") {
		t.Fatalf("absurd top-up: %s", c.Message)
	}
	waitEvent(t, ns, "WalletTopUp", "absurd", "Warning InvalidTopUp: amount 92233720368547758.07 EUR is above")
	create(t, topUpObj(ns, "largest", w.Name, "largest", "EUR", "1000000.00"))
	waitTopUp(t, ns, "largest", v1alpha1.ReasonApplied)

	// A balance 5.00 EUR short of the ledger's bound, credited before there was a largest top-up.
	acct, err := store.AccountOf(ctx, env.db.Pool, ns, "acme", "sandbox")
	if err != nil {
		t.Fatal(err)
	}
	err = env.db.InTx(ctx, func(tx pgx.Tx) error {
		_, err := wallet.Credit(ctx, tx, acct.ID, "EUR", store.EntryAdjustment, math.MaxInt64-100010000-500, "legacy", "")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	create(t, topUpObj(ns, "next", w.Name, "next", "EUR", "10.00"))
	c = meta.FindStatusCondition(waitTopUp(t, ns, "next", v1alpha1.ReasonBalanceOverflow).Status.Conditions,
		v1alpha1.ConditionReady)
	if !strings.Contains(c.Message, "the EUR balance (92233720368547753.07) would pass the largest balance") {
		t.Fatalf("overflowing top-up: %s", c.Message)
	}
	waitEvent(t, ns, "WalletTopUp", "next", "Warning BalanceOverflow:")
	update(t, ns, w.Name, w, func() {
		w.Spec.TopUps = append(w.Spec.TopUps, v1alpha1.TopUp{ID: "wire-3", Currency: "EUR", Amount: "10.00"})
	})
	walletRefuses("wallet refuses the entry that would overflow", "wire-2: amount 1000000.01 EUR",
		"wire-3: crediting 10.00 EUR: the EUR balance (92233720368547753.07) would pass the largest balance")
	if w.Status.Balances["EUR"] != "92233720368547753.07" {
		t.Fatalf("balance: %v", w.Status.Balances)
	}

	// Refusals are not failures: nothing was retried with backoff.
	time.Sleep(2 * time.Second)
	if n := reconcileErrors(t, "wallettopup") - topUpErrors; n != 0 {
		t.Errorf("%v failed WalletTopUp reconciles", n)
	}
	if n := reconcileErrors(t, "wallet") - walletErrors; n != 0 {
		t.Errorf("%v failed Wallet reconciles", n)
	}
}
