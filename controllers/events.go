package controllers

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/codeport/codeport/api/v1alpha1"
)

// Event reasons of Partner, Catalog and Wallet (ApiKey records its own, per key decision).
const (
	// eventApplied: a new generation of the resource is in the data plane.
	eventApplied = "Applied"
	// eventTopUpApplied: a top-up was credited to a wallet.
	eventTopUpApplied = "TopUpApplied"
	// eventProductsChanged: a catalog's products in the data plane changed, whether through the
	// Catalog, a ConfigMap or a CatalogShard (the latter two leave the Catalog's generation as
	// it was, so Applied does not tell).
	eventProductsChanged = "ProductsChanged"
)

// outcome is what a reconcile's events are judged against: the resource's Ready condition and
// observedGeneration as it was read.
type outcome struct {
	ready    *metav1.Condition
	observed int64
}

// outcomeOf notes obj's Ready condition and observedGeneration before a reconcile.
func outcomeOf(obj client.Object) outcome {
	var o outcome
	if conditions := conditionsOf(obj); conditions != nil {
		if c := meta.FindStatusCondition(*conditions, v1alpha1.ConditionReady); c != nil {
			o.ready = c.DeepCopy()
		}
	}
	o.observed = observedGenerationOf(obj)
	return o
}

// observedGenerationOf returns status.observedGeneration of one of the kinds.
func observedGenerationOf(obj client.Object) int64 {
	switch o := obj.(type) {
	case *v1alpha1.Partner:
		return o.Status.ObservedGeneration
	case *v1alpha1.Catalog:
		return o.Status.ObservedGeneration
	case *v1alpha1.ApiKey:
		return o.Status.ObservedGeneration
	case *v1alpha1.Wallet:
		return o.Status.ObservedGeneration
	case *v1alpha1.WalletTopUp:
		return o.Status.ObservedGeneration
	}
	return 0
}

// recordOutcome records what a reconcile changed, judged against before: Normal Applied when it
// applied a new generation in full, Warning (with Ready's reason) when Ready turned False or its
// reason or message changed while False. Events follow changes, not reconciles: a resync that
// changes nothing, or a retry that fails as the one before it, records nothing, so the events of
// a resource stay a readable history rather than one line per backoff step.
func recordOutcome(rec events.EventRecorder, before outcome, obj client.Object) {
	if rec == nil {
		return
	}
	conditions := conditionsOf(obj)
	if conditions == nil {
		return
	}
	ready := meta.FindStatusCondition(*conditions, v1alpha1.ConditionReady)
	if ready == nil {
		return
	}
	switch {
	case ready.Status == metav1.ConditionFalse:
		if before.ready != nil && before.ready.Status == metav1.ConditionFalse &&
			before.ready.Reason == ready.Reason && before.ready.Message == ready.Message {
			return
		}
		rec.Eventf(obj, nil, corev1.EventTypeWarning, ready.Reason, "Reconcile", "%s", ready.Message)
	case observedGenerationOf(obj) > before.observed:
		rec.Eventf(obj, nil, corev1.EventTypeNormal, eventApplied, "Reconcile",
			"%s", fmt.Sprintf("Generation %d applied: %s", obj.GetGeneration(), ready.Message))
	}
}
