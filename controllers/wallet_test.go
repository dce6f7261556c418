package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/controllers"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
	"github.com/codeport/codeport/internal/wallet"
)

// TestLedgerRefreshesAreCoalesced: while orders land continuously, the Wallet's status is
// rewritten at most about once per WalletRefreshMaxWait, not once per order, and it shows the
// final balance within seconds of the last order.
func TestLedgerRefreshesAreCoalesced(t *testing.T) {
	ns := namespace(t)
	sandboxKey, _ := onboard(t, ns)
	ctx := context.Background()
	w := testfixture.Wallet("acme", "sandbox", testfixture.InNamespace(ns),
		testfixture.WithTopUps(testfixture.TopUp("wire-1", "EUR", "100000.00")))
	create(t, w)
	poll.Until(t, timeout, "top-up applied", func() (bool, string) {
		get(t, ns, w.Name, w)
		return w.Status.Balances["EUR"] == "100000.00", fmt.Sprintf("%+v", w.Status)
	})

	watcher, err := client.NewWithWatch(env.cfg, client.Options{Scheme: env.scheme})
	if err != nil {
		t.Fatal(err)
	}
	updates, err := watcher.Watch(ctx, &v1alpha1.WalletList{}, client.InNamespace(ns),
		client.MatchingFields{"metadata.name": w.Name})
	if err != nil {
		t.Fatal(err)
	}
	defer updates.Stop()
	var writes atomic.Int32
	go func() {
		for e := range updates.ResultChan() {
			if e.Type == watch.Modified {
				writes.Add(1)
			}
		}
	}()

	// Orders of 20.00 EUR from four clients for four seconds, paced to stay within the
	// partner's rate limit, and for as long as it takes to place 20 on a machine too busy for
	// that in four seconds.
	const clients, maxOrders, minOrders = 4, 400, 20
	var placed atomic.Int32
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		wg.Go(func() {
			for i := 0; (time.Since(start) < 4*time.Second || placed.Load() < minOrders) && i < maxOrders/clients; i++ {
				req, _ := newRequest("POST", env.apiURL["sandbox"]+"/orders", fmt.Sprintf(
					`{"externalOrderCode":"burst-%d-%d","currency":"EUR",`+
						`"orderProducts":[{"productCode":"10000000000001","quantity":1}]}`, c, i))
				req.Header.Set("x-api-key", sandboxKey)
				resp, err := apiClient(t).Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 202 {
					t.Errorf("order: %d", resp.StatusCode)
					return
				}
				placed.Add(1)
				time.Sleep(40 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	want := fmt.Sprintf("%.2f", 100000-20*float64(placed.Load()))
	// The follower reads the last orders' entries within an interval and the Wallet is
	// reconciled: seconds, more on a busy machine, and far below the five-minute resync.
	poll.Until(t, timeout, "status shows the balance after the last order", func() (bool, string) {
		get(t, ns, w.Name, w)
		return w.Status.Balances["EUR"] == want, fmt.Sprintf("%s, want %s", w.Status.Balances["EUR"], want)
	})
	// One refresh for the first order, one per WalletRefreshMaxWait while orders land, one after
	// the last of them, and one of slack (the read right after the last is due again).
	limit := 1 + int32(elapsed/controllers.WalletRefreshMaxWait) + 2
	if n := writes.Load(); n > limit || placed.Load() < minOrders {
		t.Fatalf("%d orders in %s rewrote the Wallet %d times; at most %d",
			placed.Load(), elapsed.Round(time.Millisecond), n, limit)
	}
	t.Logf("%d orders in %s: %d status writes", placed.Load(), elapsed.Round(time.Millisecond), writes.Load())
}

// TestWalletWithInvalidTopUpsIsNotReady: a Wallet whose spec.topUps has entries that cannot be
// credited is Ready=False naming them, with a Warning event, so that kubectl wait never passes
// it; its valid entries are credited exactly once, and it takes WalletTopUps all the same.
// Corrected, it is Ready.
func TestWalletWithInvalidTopUpsIsNotReady(t *testing.T) {
	ns := namespace(t)
	key, _ := onboard(t, ns)
	ctx := context.Background()
	w := walletObj(ns, "acme-sandbox", "sandbox",
		v1alpha1.TopUp{ID: "wire-1", Currency: "EUR", Amount: "100.00"},
		v1alpha1.TopUp{ID: "wire-2", Currency: "EUR", Amount: "1.005"},
		v1alpha1.TopUp{ID: "wire-3", Currency: "JPY", Amount: "0.5"},
		v1alpha1.TopUp{ID: "wire-4", Currency: "EUR", Amount: "20.00"})
	create(t, w)
	poll.Until(t, timeout, "invalid entries reported", func() (bool, string) {
		get(t, ns, w.Name, w)
		c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonInvalidTopUp &&
				c.ObservedGeneration == w.Generation && strings.Contains(c.Message, "wire-2: amount 1.005 EUR") &&
				strings.Contains(c.Message, "wire-3: amount 0.5 JPY") && !strings.Contains(c.Message, "wire-1") &&
				w.Status.Balances["EUR"] == "120.00" && w.Status.AppliedTopUps == 2,
			fmt.Sprintf("%v %v %d", c, w.Status.Balances, w.Status.AppliedTopUps)
	})
	waitEvent(t, ns, "Wallet", w.Name, "Warning InvalidTopUp: Wallet in service, but 2 of spec.topUps not applied")
	for _, e := range eventsOf(t, ns, "Wallet", w.Name) {
		if strings.HasPrefix(e, "Normal Applied") {
			t.Fatalf("a Wallet refusing top-ups recorded %q", e)
		}
	}

	// Reconciles, of a second operator too, credit the valid entries once.
	replicaCtx, stopReplica := context.WithCancel(ctx)
	defer stopReplica()
	if err := startManager(replicaCtx, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		update(t, ns, w.Name, w, func() { w.Annotations = map[string]string{"n": fmt.Sprint(i)} })
	}
	stopReplica()
	if b := sandboxBalance(t, key); b != 120.0 {
		t.Fatalf("balance after repeated reconciles: %v", b)
	}

	create(t, topUpObj(ns, "wire-5", w.Name, "wire-5", "EUR", "5.00"))
	waitTopUp(t, ns, "wire-5", v1alpha1.ReasonApplied)

	update(t, ns, w.Name, w, func() {
		w.Spec.TopUps = []v1alpha1.TopUp{w.Spec.TopUps[0], {ID: "wire-2", Currency: "EUR", Amount: "1.00"},
			w.Spec.TopUps[3]}
	})
	poll.Until(t, timeout, "corrected wallet ready", func() (bool, string) {
		get(t, ns, w.Name, w)
		ok, detail := ready(w.Status.Conditions, w.Generation)
		return ok && w.Status.Balances["EUR"] == "126.00", detail + " " + fmt.Sprint(w.Status.Balances)
	})
}

// TestWalletShowsLedgerAfterPartnerDeletion: once its Partner is deleted, a Wallet's status
// still shows what the ledger holds: the orders placed just before the deletion, and what lands
// after it (the refund of an order in flight). A Wallet refused as a duplicate shows nothing.
func TestWalletShowsLedgerAfterPartnerDeletion(t *testing.T) {
	ns := namespace(t)
	key, _ := onboard(t, ns)
	ctx := context.Background()
	w := walletObj(ns, "acme-sandbox", "sandbox", v1alpha1.TopUp{ID: "wire-1", Currency: "EUR", Amount: "100.00"})
	create(t, w)
	poll.Until(t, timeout, "top-up applied", func() (bool, string) {
		get(t, ns, w.Name, w)
		return w.Status.Balances["EUR"] == "100.00", fmt.Sprint(w.Status.Balances)
	})
	dup := walletObj(ns, "duplicate", "sandbox")
	create(t, dup)
	poll.Until(t, timeout, "duplicate refused", func() (bool, string) {
		get(t, ns, dup.Name, dup)
		c := meta.FindStatusCondition(dup.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == v1alpha1.ReasonDuplicateWallet, c.String()
	})

	// An order of 20.00 EUR, and the Partner deleted at once.
	if code := postOrder(t, "sandbox", key); code != 202 {
		t.Fatalf("order: %d", code)
	}
	partner := &v1alpha1.Partner{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acme"}}
	if err := env.k8s.Delete(ctx, partner); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, timeout, "partner gone", func() (bool, string) { return !get(t, ns, "acme", &v1alpha1.Partner{}), "" })
	showsLedger := func(want string) {
		t.Helper()
		poll.Until(t, timeout, "wallet shows "+want, func() (bool, string) {
			get(t, ns, w.Name, w)
			c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady)
			return c != nil && c.Reason == v1alpha1.ReasonPartnerNotFound && w.Status.Balances["EUR"] == want,
				fmt.Sprintf("%v %v", c, w.Status.Balances)
		})
	}
	showsLedger("80.00")

	// The refund of an order in flight lands after the deletion.
	acct, err := store.RetainedAccountOf(ctx, env.db.Pool, ns, "acme", "sandbox")
	if err != nil {
		t.Fatal(err)
	}
	err = env.db.InTx(ctx, func(tx pgx.Tx) error {
		_, err := wallet.Credit(ctx, tx, acct.ID, "EUR", store.EntryRefund, 1000, "late-refund", "")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	showsLedger("90.00")
	if sum, err := store.LedgerSum(ctx, env.db.Pool, acct.ID); err != nil || sum["EUR"] != 9000 {
		t.Fatalf("ledger: %v, %v", sum, err)
	}
	get(t, ns, dup.Name, dup)
	if dup.Status.Balances != nil {
		t.Fatalf("the duplicate Wallet shows balances: %v", dup.Status.Balances)
	}
}
