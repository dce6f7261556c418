package controllers_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
)

func walletObj(ns, name, environment string, topUps ...v1alpha1.TopUp) *v1alpha1.Wallet {
	return testfixture.Wallet("acme", environment, testfixture.InNamespace(ns), testfixture.Named(name),
		testfixture.WithTopUps(topUps...))
}

// TestDuplicateWalletIsRefused: a second Wallet for the same partner and environment is refused
// with a condition and an event, and its top-ups are not applied; once the first is deleted,
// the second takes the account over and applies them.
func TestDuplicateWalletIsRefused(t *testing.T) {
	ns := namespace(t)
	sandboxKey, _ := onboard(t, ns)
	first := walletObj(ns, "first", "sandbox", v1alpha1.TopUp{ID: "wire-1", Currency: "EUR", Amount: "100.00"})
	create(t, first)
	poll.Until(t, timeout, "first wallet applied", func() (bool, string) {
		get(t, ns, "first", first)
		ok, detail := ready(first.Status.Conditions, first.Generation)
		return ok && first.Status.Balances["EUR"] == "100.00", detail
	})
	second := walletObj(ns, "second", "sandbox", v1alpha1.TopUp{ID: "wire-2", Currency: "EUR", Amount: "50.00"})
	second.Spec.LowBalanceThreshold = "500.00"
	create(t, second)
	poll.Until(t, timeout, "second wallet refused", func() (bool, string) {
		get(t, ns, "second", second)
		c := meta.FindStatusCondition(second.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonDuplicateWallet &&
			c.ObservedGeneration == second.Generation, c.String()
	})
	waitEvent(t, ns, "Wallet", "second", "Warning DuplicateWallet: Wallet first already manages the sandbox wallet")
	if len(second.Status.Balances) != 0 || second.Status.ObservedGeneration != 0 {
		t.Fatalf("refused wallet status: %+v", second.Status)
	}
	// Neither its top-up nor its threshold reached the data plane.
	w := getJSON(t, "sandbox", "/wallet", sandboxKey)
	if b := w["balances"].(map[string]any)["EUR"]; b != 100.0 || w["threshold"] != 0.0 {
		t.Fatalf("wallet after a refused duplicate: %v", w)
	}
	// A production Wallet of the same partner is another account: accepted.
	production := walletObj(ns, "production", "production")
	create(t, production)
	poll.Until(t, timeout, "production wallet ready", func() (bool, string) {
		get(t, ns, "production", production)
		return ready(production.Status.Conditions, production.Generation)
	})

	if err := env.k8s.Delete(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, watchBound, "second wallet takes over", func() (bool, string) {
		get(t, ns, "second", second)
		ok, detail := ready(second.Status.Conditions, second.Generation)
		return ok && second.Status.Balances["EUR"] == "150.00", detail
	})
}
