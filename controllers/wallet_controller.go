package controllers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/apiserver/provisioning"
	"github.com/codeport/codeport/apiserver/store"
)

// WalletReconciler applies each top-up exactly once (by id, through the append-only ledger),
// sets the low-balance threshold, and keeps status.balances current as orders spend money: the
// ledger listener wakes it on every ledger entry of the wallet's account.
type WalletReconciler struct {
	client.Client
	Provisioner *provisioning.Provisioner
	Options     Options
}

// +kubebuilder:rbac:groups=codeport.dev,resources=wallets,verbs=get;list;watch
// +kubebuilder:rbac:groups=codeport.dev,resources=wallets/status,verbs=get;update;patch

// Reconcile is the whole flow of a Wallet: fetch → partner → threshold and top-ups → status.
// There is no finalizer: the ledger is append-only, so deleting a Wallet undoes nothing.
func (r *WalletReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var w v1alpha1.Wallet
	if err := r.Get(ctx, req.NamespacedName, &w); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !w.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	return applyWithStatus(ctx, r.Client, &w,
		func(ctx context.Context) (ctrl.Result, error) { return r.apply(ctx, &w) },
		func() { w.Status.ObservedGeneration = w.Generation })
}

func (r *WalletReconciler) apply(ctx context.Context, w *v1alpha1.Wallet) (ctrl.Result, error) {
	var partner v1alpha1.Partner
	err := r.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: w.Spec.PartnerRef.Name}, &partner)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if ok, reason, message := partnerReady(&partner, err == nil); !ok {
		setCondition(&w.Status.Conditions, w.Generation, v1alpha1.ConditionReady, false, reason, message)
		return ctrl.Result{RequeueAfter: r.Options.NotReadyRetry}, nil
	}
	res, err := r.Provisioner.ApplyWallet(ctx, w)
	if err != nil {
		setCondition(&w.Status.Conditions, w.Generation, v1alpha1.ConditionReady, false, v1alpha1.ReasonReconcileError, err.Error())
		return ctrl.Result{}, err
	}
	w.Status.Balances = res.Balances
	w.Status.LowBalance = res.LowBalance
	w.Status.AppliedTopUps = int32(min(res.Applied, 1<<30)) //nolint:gosec // bounded just above
	switch {
	case len(res.Invalid) > 0:
		ids := make([]string, 0, len(res.Invalid))
		for id, why := range res.Invalid {
			ids = append(ids, id+": "+why)
		}
		sort.Strings(ids)
		setCondition(&w.Status.Conditions, w.Generation, v1alpha1.ConditionTopUpsReconciled, false, v1alpha1.ReasonInvalidTopUp,
			"Top-ups not applied: "+strings.Join(ids, "; "))
	case len(res.Removed) > 0:
		setCondition(&w.Status.Conditions, w.Generation, v1alpha1.ConditionTopUpsReconciled, false, v1alpha1.ReasonTopUpRemoved,
			fmt.Sprintf("Top-ups %s were removed from spec but stay applied: the ledger is append-only; correct a balance with a new top-up",
				strings.Join(res.Removed, ", ")))
	default:
		setCondition(&w.Status.Conditions, w.Generation, v1alpha1.ConditionTopUpsReconciled, true, v1alpha1.ReasonReconciled,
			fmt.Sprintf("%d top-ups applied", res.Applied))
	}
	setCondition(&w.Status.Conditions, w.Generation, v1alpha1.ConditionReady, true, v1alpha1.ReasonReconciled, "Wallet in service")
	return ctrl.Result{RequeueAfter: r.Options.Resync}, nil
}

// SetupWithManager watches Wallets, their Partners, and ledger changes.
func (r *WalletReconciler) SetupWithManager(mgr ctrl.Manager, ledger <-chan event.GenericEvent) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Wallet{}).
		Watches(&v1alpha1.Partner{}, handler.EnqueueRequestsFromMapFunc(r.walletsOfPartner)).
		WatchesRawSource(source.Channel(ledger, &handler.EnqueueRequestForObject{})).
		Named("wallet").
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Options.Concurrency}).
		Complete(r)
}

func (r *WalletReconciler) walletsOfPartner(ctx context.Context, obj client.Object) []reconcile.Request {
	return referring(ctx, r.Client, &v1alpha1.WalletList{}, obj, func(o client.Object) bool {
		return o.(*v1alpha1.Wallet).Spec.PartnerRef.Name == obj.GetName()
	})
}

// ledgerListener turns ledger notifications (payload: account id) into reconciles of the
// Wallets of that account, so balances in status follow orders within seconds.
type ledgerListener struct {
	db     *store.DB
	client client.Client
	events chan<- event.GenericEvent
}

// NeedLeaderElection: only the leader reconciles, so only the leader needs the events.
func (l *ledgerListener) NeedLeaderElection() bool { return true }

func (l *ledgerListener) Start(ctx context.Context) error {
	return store.Listen(ctx, l.db.Pool, []string{store.ChannelLedger}, func(_, payload string) {
		l.enqueue(ctx, payload)
	}, nil)
}

func (l *ledgerListener) enqueue(ctx context.Context, accountID string) {
	owner, err := store.AccountOwner(ctx, l.db.Gorm, accountID)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			slog.WarnContext(ctx, "ledger notification", slog.Any("err", err))
		}
		return
	}
	var list v1alpha1.WalletList
	if err := l.client.List(ctx, &list, client.InNamespace(owner.Namespace)); err != nil {
		return
	}
	for i := range list.Items {
		w := &list.Items[i]
		if w.Spec.PartnerRef.Name == owner.Partner && string(w.Spec.Environment) == owner.Environment {
			select {
			case l.events <- event.GenericEvent{Object: w}:
			case <-ctx.Done():
				return
			}
		}
	}
}
