// Package controllers reconciles the codeport custom resources into the data plane: each
// reconciler translates its kind into calls of apiserver/provisioning, the one write path for
// partner configuration.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/apiserver/provisioning"
	"github.com/codeport/codeport/apiserver/store"
)

// Finalizer guards the data-plane side of Partner, Catalog and ApiKey: revoking keys and
// suspending accounts must happen before the resource disappears.
const Finalizer = "codeport.dev/finalizer"

// eventRecorderName names the operator in the events it records.
const eventRecorderName = "codeport-operator"

// Options configure the reconcilers.
type Options struct {
	DB *store.DB
	// BaseURLs maps environment to the API base URL written into key Secrets (baseUrl).
	BaseURLs map[string]string
	// Resync is how often every resource is reconciled even without changes (wallet balances,
	// catalog validity windows).
	Resync time.Duration
	// NotReadyRetry is how soon a resource waiting on another one is looked at again.
	NotReadyRetry time.Duration
	// Concurrency is how many resources of one kind reconcile at once.
	Concurrency int
	// Metrics receives the operator's own instruments (keys issued, rotated, revoked); nil
	// registers nothing. Reconcile errors by kind come with controller-runtime's metrics.
	Metrics prometheus.Registerer
}

// keyEvents counts key lifecycle events by environment and event (issued, rotated, reissued,
// revoked).
func newKeyEvents(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "codeport_operator_key_events_total", Help: "API keys issued, rotated, reissued and revoked by the operator.",
	}, []string{"environment", "event"})
	if reg != nil {
		reg.MustRegister(c)
	}
	return c
}

func (o *Options) defaults() {
	if o.Resync == 0 {
		o.Resync = 5 * time.Minute
	}
	if o.NotReadyRetry == 0 {
		o.NotReadyRetry = 10 * time.Second
	}
	if o.Concurrency == 0 {
		o.Concurrency = 4
	}
}

// Setup registers the four reconcilers and the ledger listener with mgr.
func Setup(mgr ctrl.Manager, opts Options) error {
	opts.defaults()
	prov := provisioning.New(opts.DB)
	recorder := mgr.GetEventRecorder(eventRecorderName)
	if err := (&CatalogReconciler{Client: mgr.GetClient(), Provisioner: prov, Options: opts}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("catalog controller: %w", err)
	}
	if err := (&PartnerReconciler{Client: mgr.GetClient(), Provisioner: prov, Options: opts}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("partner controller: %w", err)
	}
	keys := &ApiKeyReconciler{Client: mgr.GetClient(), Provisioner: prov, Recorder: recorder, Options: opts, keyEvents: newKeyEvents(opts.Metrics)}
	if err := keys.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("apikey controller: %w", err)
	}
	ledger := make(chan event.GenericEvent, 256)
	if err := mgr.Add(newLedgerListener(opts.DB, mgr.GetClient(), ledger)); err != nil {
		return fmt.Errorf("ledger listener: %w", err)
	}
	if err := (&WalletReconciler{Client: mgr.GetClient(), Provisioner: prov, Options: opts}).SetupWithManager(mgr, ledger); err != nil {
		return fmt.Errorf("wallet controller: %w", err)
	}
	return nil
}

// setCondition records a condition for the resource's current generation.
func setCondition(conditions *[]metav1.Condition, generation int64, conditionType string, ok bool, reason, message string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(conditions, metav1.Condition{Type: conditionType, Status: status, Reason: reason,
		Message: message, ObservedGeneration: generation})
}

// partnerReady reports whether the Partner a resource refers to exists and is provisioned; the
// reason and message say what to fix otherwise.
func partnerReady(p *v1alpha1.Partner, found bool) (ok bool, reason, message string) {
	switch {
	case !found:
		return false, v1alpha1.ReasonPartnerNotFound, "Partner not found in this namespace"
	case !p.DeletionTimestamp.IsZero():
		return false, v1alpha1.ReasonPartnerNotReady, "Partner is being deleted"
	case p.Status.Accounts.Sandbox == "" || p.Status.Accounts.Production == "":
		return false, v1alpha1.ReasonPartnerNotReady, "Partner has not been provisioned yet"
	}
	return true, "", ""
}

// withFinalizer is the skeleton shared by the kinds that have a data-plane side to undo:
// deletion runs finalize and releases the finalizer; otherwise the finalizer is ensured and
// the resource applied with one status write.
func withFinalizer(ctx context.Context, c client.Client, obj client.Object, finalize func(context.Context) error,
	apply func(context.Context) (ctrl.Result, error), observe func()) (ctrl.Result, error) {
	if !obj.GetDeletionTimestamp().IsZero() {
		if err := finalize(ctx); err != nil {
			return ctrl.Result{}, err
		}
		if controllerutil.RemoveFinalizer(obj, Finalizer) {
			return ctrl.Result{}, c.Update(ctx, obj)
		}
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(obj, Finalizer) {
		if err := c.Update(ctx, obj); err != nil {
			return ctrl.Result{}, err
		}
	}
	return applyWithStatus(ctx, c, obj, apply, observe)
}

// applyWithStatus runs apply and writes the status it computed once, as a patch, whatever the
// outcome: conditions explain failures too.
func applyWithStatus(ctx context.Context, c client.Client, obj client.Object,
	apply func(context.Context) (ctrl.Result, error), observe func()) (ctrl.Result, error) {
	before, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return ctrl.Result{}, fmt.Errorf("%T does not copy into a client.Object", obj)
	}
	result, reconcileErr := apply(ctx)
	observe()
	if err := c.Status().Patch(ctx, obj, client.MergeFrom(before)); err != nil {
		return ctrl.Result{}, errors.Join(reconcileErr, fmt.Errorf("update status of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err))
	}
	return result, reconcileErr
}

// referring turns a change of obj into reconcile requests for the resources of list's kind in its
// namespace that refer to it (refers says which): how a Partner change reaches its ApiKeys and
// Wallets, a Catalog change its Partners, a ConfigMap change its Catalogs.
func referring(ctx context.Context, c client.Client, list client.ObjectList, obj client.Object, refers func(client.Object) bool) []reconcile.Request {
	if err := c.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, item := range items {
		if o, ok := item.(client.Object); ok && refers(o) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
		}
	}
	return out
}
