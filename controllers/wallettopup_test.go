package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/poll"
	"github.com/codeport/codeport/internal/testfixture"
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
		return c != nil && c.Reason == reason && c.ObservedGeneration == top.Generation, fmt.Sprint(c)
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
			strings.Contains(c.Message, "wire-2: id already applied by WalletTopUp/wire-2"), fmt.Sprint(c)
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
			strings.Contains(c.Message, v1alpha1.ReasonDuplicateWallet), fmt.Sprint(c)
	})
	create(t, walletObj(ns, "acme-production", "production"))
	waitTopUp(t, ns, "early", v1alpha1.ReasonApplied)
}
