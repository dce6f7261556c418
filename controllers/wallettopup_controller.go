package controllers

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/provisioning"
)

// WalletTopUpReconciler credits each WalletTopUp once to the ledger of its Wallet's account. A
// top-up never changes (its spec is immutable) and the ledger is append-only, so once applied
// it is never looked at again, and deleting it undoes nothing (no finalizer).
type WalletTopUpReconciler struct {
	client.Client
	Provisioner *provisioning.Provisioner
	Recorder    events.EventRecorder
	Options     Options
}

// +kubebuilder:rbac:groups=codeport.dev,resources=wallettopups,verbs=get;list;watch
// +kubebuilder:rbac:groups=codeport.dev,resources=wallettopups/status,verbs=get;update;patch

// lostByRestore says whether the applied top-up t is missing from the ledger: the database was
// restored from a backup taken before the credit. It is then applied again, as a Wallet's
// spec.topUps are; the custom resources are the record of the money paid in. A top-up whose
// Wallet is gone keeps its status.
func (r *WalletTopUpReconciler) lostByRestore(ctx context.Context, t *v1alpha1.WalletTopUp) (bool, error) {
	var w v1alpha1.Wallet
	err := r.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: t.Spec.WalletRef.Name}, &w)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read Wallet %s: %w", t.Spec.WalletRef.Name, err)
	}
	recorded, err := r.Provisioner.TopUpRecorded(ctx, provisioning.TopUpOf(t, &w))
	if err != nil {
		return false, fmt.Errorf("look up top-up %s: %w", t.Spec.ID, err)
	}
	return !recorded, nil
}

// Reconcile is the whole flow of a WalletTopUp: fetch → wallet → credit → status.
func (r *WalletTopUpReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var t v1alpha1.WalletTopUp
	if err := r.Get(ctx, req.NamespacedName, &t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !t.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	before := outcomeOf(&t)
	result, err := applyWithStatus(ctx, r.Client, &t,
		func(ctx context.Context) (ctrl.Result, error) { return r.apply(ctx, &t) },
		func() { t.Status.ObservedGeneration = t.Generation })
	recordOutcome(r.Recorder, before, &t)
	return result, err
}

func (r *WalletTopUpReconciler) apply(ctx context.Context, t *v1alpha1.WalletTopUp) (ctrl.Result, error) {
	if t.Status.Applied {
		lost, err := r.lostByRestore(ctx, t)
		switch {
		case errors.Is(err, provisioning.ErrPartnerNotProvisioned):
			// Restored from before the partner too: applied once the partner is provisioned.
			return ctrl.Result{RequeueAfter: r.Options.NotReadyRetry}, nil
		case err != nil || !lost:
			return ctrl.Result{}, err
		}
	}
	var w v1alpha1.Wallet
	err := r.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: t.Spec.WalletRef.Name}, &w)
	switch {
	case apierrors.IsNotFound(err):
		setCondition(&t.Status.Conditions, t.Generation, v1alpha1.ConditionReady, false, v1alpha1.ReasonWalletNotFound,
			fmt.Sprintf("Wallet %s not found in this namespace: the top-up is applied once it exists", t.Spec.WalletRef.Name))
		return ctrl.Result{RequeueAfter: r.Options.NotReadyRetry}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("read Wallet %s: %w", t.Spec.WalletRef.Name, err)
	}
	// A Wallet refused as a duplicate, or whose partner is not provisioned, takes no money.
	if !walletInService(&w) {
		why := "not reconciled yet"
		if ready := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady); ready != nil {
			why = ready.Reason + ": " + ready.Message
		}
		setCondition(&t.Status.Conditions, t.Generation, v1alpha1.ConditionReady, false, v1alpha1.ReasonWalletNotReady,
			fmt.Sprintf("Wallet %s is not Ready (%s); the top-up is applied once it is", w.Name, why))
		return ctrl.Result{RequeueAfter: r.Options.NotReadyRetry}, nil
	}
	res, err := r.Provisioner.ApplyTopUp(ctx, provisioning.TopUpOf(t, &w))
	var invalid *provisioning.InvalidTopUpError
	switch {
	case errors.As(err, &invalid):
		// The spec is immutable: it can never apply. Ready says so and the reconcile ends.
		setCondition(&t.Status.Conditions, t.Generation, v1alpha1.ConditionReady, false, v1alpha1.ReasonInvalidTopUp,
			invalid.Error()+": this top-up can never be applied; delete it and create a correct one")
		return ctrl.Result{}, nil
	case errors.Is(err, provisioning.ErrBalanceOverflow):
		// A rule of money, not a failure: the same credit would overflow again at every retry.
		setCondition(&t.Status.Conditions, t.Generation, v1alpha1.ConditionReady, false,
			v1alpha1.ReasonBalanceOverflow, err.Error()+"; this top-up is not applied")
		return ctrl.Result{}, nil
	case errors.Is(err, provisioning.ErrPartnerNotProvisioned):
		return ctrl.Result{}, failed(v1alpha1.ReasonPartnerNotReady, fmt.Errorf("apply top-up: %w", err))
	case err != nil:
		return ctrl.Result{}, failed(v1alpha1.ReasonDatabaseError, fmt.Errorf("apply top-up: %w", err))
	case res.Conflict != "":
		setCondition(&t.Status.Conditions, t.Generation, v1alpha1.ConditionReady, false, v1alpha1.ReasonTopUpConflict,
			res.Conflict)
		return ctrl.Result{}, nil
	}
	appliedAt := metav1.NewTime(res.AppliedAt.UTC())
	t.Status.Applied, t.Status.AppliedAt = true, &appliedAt
	credited := fmt.Sprintf("%s %s credited to Wallet %s", t.Spec.Amount, t.Spec.Currency, w.Name)
	setCondition(&t.Status.Conditions, t.Generation, v1alpha1.ConditionReady, true, v1alpha1.ReasonApplied, credited)
	if res.Newly && r.Recorder != nil {
		// The Wallet's history shows every credit, whichever kind recorded it.
		r.Recorder.Eventf(&w, t, corev1.EventTypeNormal, eventTopUpApplied, "TopUp",
			"Top-up %s credited %s %s (WalletTopUp %s)", t.Spec.ID, t.Spec.Amount, t.Spec.Currency, t.Name)
	}
	return ctrl.Result{}, nil
}

// indexWalletRef is the cache index of WalletTopUps by spec.walletRef.name.
const indexWalletRef = "spec.walletRef.name"

// SetupWithManager watches WalletTopUps and the Wallets they credit: a Wallet turning Ready
// releases the top-ups waiting for it.
func (r *WalletTopUpReconciler) SetupWithManager(mgr ctrl.Manager) error {
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.WalletTopUp{}, indexWalletRef,
		func(o client.Object) []string { return []string{o.(*v1alpha1.WalletTopUp).Spec.WalletRef.Name} })
	if err != nil {
		return fmt.Errorf("index WalletTopUps by walletRef: %w", err)
	}
	// Wallets' status changes with every balance refresh; only a change of service matters here.
	readiness := predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return walletInService(e.ObjectOld) != walletInService(e.ObjectNew)
		},
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.WalletTopUp{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.Wallet{}, handler.EnqueueRequestsFromMapFunc(r.pendingTopUps),
			builder.WithPredicates(readiness)).
		Named("wallettopup").
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Options.Concurrency}).
		Complete(r)
}

// pendingTopUps are the WalletTopUps of a Wallet that are not applied yet.
func (r *WalletTopUpReconciler) pendingTopUps(ctx context.Context, w client.Object) []reconcile.Request {
	var list v1alpha1.WalletTopUpList
	err := r.List(ctx, &list, client.InNamespace(w.GetNamespace()), client.MatchingFields{indexWalletRef: w.GetName()})
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list top-ups of a wallet", "wallet", w.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if !list.Items[i].Status.Applied {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}
