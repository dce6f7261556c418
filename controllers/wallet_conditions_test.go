package controllers

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/provisioning"
)

// TestWalletConditions: a Wallet is Ready only when every entry of its spec.topUps is credited;
// an entry that cannot be makes Ready False naming it, while removed entries are only reported.
// A Wallet refusing entries still takes WalletTopUps.
//
//nolint:gocognit // one table of conditions, each case checked field by field
func TestWalletConditions(t *testing.T) {
	many := map[string]string{}
	for i := range 12 {
		many[fmt.Sprintf("bad-%02d", i)] = "amount 1.005 EUR: more than 2 decimal places"
	}
	cases := []struct {
		name                      string
		res                       provisioning.WalletResult
		ready                     metav1.ConditionStatus
		readyReason, reconciled   string
		messageHas, messageHasNot []string
	}{
		{"all applied", provisioning.WalletResult{Applied: 2}, metav1.ConditionTrue,
			v1alpha1.ReasonReconciled, v1alpha1.ReasonReconciled, []string{"Wallet in service"}, nil},
		{"an invalid entry", provisioning.WalletResult{Applied: 1, Invalid: map[string]string{
			"wire-9": "amount 1.005 EUR: amount \"1.005\" has more than 2 decimal places"}},
			metav1.ConditionFalse, v1alpha1.ReasonInvalidTopUp, v1alpha1.ReasonInvalidTopUp,
			[]string{"1 of spec.topUps not applied (1 applied)", "wire-9: amount 1.005 EUR"}, nil},
		{"invalid entries named in order", provisioning.WalletResult{Invalid: map[string]string{
			"b": "currency \"DEM\" is not an active ISO 4217 currency code", "a": "amount 0.5 JPY: x"}},
			metav1.ConditionFalse, v1alpha1.ReasonInvalidTopUp, v1alpha1.ReasonInvalidTopUp,
			[]string{"a: amount 0.5 JPY: x; b: currency \"DEM\""}, nil},
		{"many invalid entries", provisioning.WalletResult{Invalid: many},
			metav1.ConditionFalse, v1alpha1.ReasonInvalidTopUp, v1alpha1.ReasonInvalidTopUp,
			[]string{"12 of spec.topUps not applied", "bad-09:", "and 2 more"}, []string{"bad-10", "bad-11"}},
		{"removed entries stay applied", provisioning.WalletResult{Applied: 1, Removed: []string{"wire-1"}},
			metav1.ConditionTrue, v1alpha1.ReasonReconciled, v1alpha1.ReasonTopUpRemoved, []string{"Wallet in service"}, nil},
		{"invalid outweighs removed", provisioning.WalletResult{Removed: []string{"wire-1"},
			Invalid: map[string]string{"wire-2": "x"}},
			metav1.ConditionFalse, v1alpha1.ReasonInvalidTopUp, v1alpha1.ReasonInvalidTopUp, []string{"wire-2: x"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ready, reconciled *metav1.Condition
			conditions := walletConditions(tc.res)
			for i := range conditions {
				switch conditions[i].Type {
				case v1alpha1.ConditionReady:
					ready = &conditions[i]
				case v1alpha1.ConditionTopUpsReconciled:
					reconciled = &conditions[i]
				}
			}
			if ready == nil || reconciled == nil {
				t.Fatalf("conditions: %+v", conditions)
			}
			if ready.Status != tc.ready || ready.Reason != tc.readyReason || reconciled.Reason != tc.reconciled {
				t.Fatalf("Ready %s/%s, TopUpsReconciled %s; want %s/%s, %s", ready.Status, ready.Reason,
					reconciled.Reason, tc.ready, tc.readyReason, tc.reconciled)
			}
			for _, s := range tc.messageHas {
				if !strings.Contains(ready.Message, s) {
					t.Errorf("Ready message %q lacks %q", ready.Message, s)
				}
			}
			for _, s := range tc.messageHasNot {
				if strings.Contains(ready.Message, s) {
					t.Errorf("Ready message %q names %q", ready.Message, s)
				}
			}
			w := &v1alpha1.Wallet{Status: v1alpha1.WalletStatus{Conditions: conditions}}
			if !walletInService(w) {
				t.Errorf("a Wallet with these conditions takes no WalletTopUps: %+v", conditions)
			}
		})
	}
	for _, reason := range []string{v1alpha1.ReasonDuplicateWallet, v1alpha1.ReasonPartnerNotFound,
		v1alpha1.ReasonPartnerNotReady, v1alpha1.ReasonDatabaseError} {
		w := &v1alpha1.Wallet{Status: v1alpha1.WalletStatus{Conditions: []metav1.Condition{
			{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason}}}}
		if walletInService(w) {
			t.Errorf("a Wallet not Ready for %s takes WalletTopUps", reason)
		}
	}
	if walletInService(&v1alpha1.Wallet{}) {
		t.Error("a Wallet not reconciled yet takes WalletTopUps")
	}
}
