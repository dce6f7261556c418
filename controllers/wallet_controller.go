package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"

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
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/provisioning"
)

// WalletReconciler applies each top-up exactly once (by id, through the append-only ledger),
// sets the low-balance threshold, and keeps status.balances current as orders spend money: the
// ledger listener wakes it on every ledger entry of the wallet's account. One partner
// environment has one Wallet: a second one is refused (DuplicateWallet), never merged.
type WalletReconciler struct {
	client.Client
	// APIReader confirms that the Wallet holding an account's claim is gone before another one
	// takes the account over: a lagging cache never hands a wallet to a second Wallet.
	APIReader   client.Reader
	Provisioner *provisioning.Provisioner
	Recorder    events.EventRecorder
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
	before := outcomeOf(&w)
	result, err := applyWithStatus(ctx, r.Client, &w,
		func(ctx context.Context) (ctrl.Result, error) { return r.apply(ctx, &w) },
		func() { w.Status.ObservedGeneration = w.Generation })
	recordOutcome(r.Recorder, before, &w)
	return result, err
}

func (r *WalletReconciler) apply(ctx context.Context, w *v1alpha1.Wallet) (ctrl.Result, error) {
	var partner v1alpha1.Partner
	err := r.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: w.Spec.PartnerRef.Name}, &partner)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if ok, reason, message := partnerReady(&partner, err == nil); !ok {
		if err := r.showHeldBalances(ctx, w); err != nil {
			return ctrl.Result{}, err
		}
		setCondition(&w.Status.Conditions, w.Generation, v1alpha1.ConditionReady, false, reason, message)
		return ctrl.Result{RequeueAfter: r.Options.NotReadyRetry}, nil
	}
	owner, mine, err := r.claim(ctx, w)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !mine {
		// Its balances are the other Wallet's: showing them here would suggest they are this one's.
		w.Status.Balances, w.Status.LowBalance, w.Status.AppliedTopUps = nil, false, 0
		meta.RemoveStatusCondition(&w.Status.Conditions, v1alpha1.ConditionTopUpsReconciled)
		setCondition(&w.Status.Conditions, w.Generation, v1alpha1.ConditionReady, false, v1alpha1.ReasonDuplicateWallet,
			fmt.Sprintf("Wallet %s already manages the %s wallet of Partner %s: this Wallet's threshold and top-ups "+
				"are not applied; delete one of the two", owner.Name, w.Spec.Environment, w.Spec.PartnerRef.Name))
		return ctrl.Result{RequeueAfter: r.Options.Resync}, nil
	}
	res, err := r.Provisioner.ApplyWalletWith(ctx, w, provisioning.WalletOptions{SpecTopUps: !r.Options.NoSpecTopUps})
	if err != nil {
		setCondition(&w.Status.Conditions, w.Generation, v1alpha1.ConditionReady, false,
			v1alpha1.ReasonReconcileError, err.Error())
		return ctrl.Result{}, err
	}
	r.recordTopUps(w, res.NewlyApplied)
	w.Status.Balances = res.Balances
	w.Status.LowBalance = res.LowBalance
	w.Status.AppliedTopUps = int32(min(res.Applied, 1<<30)) //nolint:gosec // bounded just above
	for _, c := range walletConditions(res) {
		c.ObservedGeneration = w.Generation
		meta.SetStatusCondition(&w.Status.Conditions, c)
	}
	return ctrl.Result{RequeueAfter: r.Options.Resync}, nil
}

// walletConditions are the TopUpsReconciled and Ready conditions of a Wallet in service whose
// threshold and top-ups were applied with result res. An entry of spec.topUps that cannot be
// credited makes Ready False, naming every such entry with why: the money it stands for is not
// in the wallet, and kubectl wait must not say otherwise. The other entries are credited all the
// same, and the wallet keeps taking orders and WalletTopUps (walletInService). Entries removed
// from the list stay credited, which is only reported.
func walletConditions(res provisioning.WalletResult) []metav1.Condition {
	reconciled := metav1.Condition{Type: v1alpha1.ConditionTopUpsReconciled, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonReconciled, Message: fmt.Sprintf("%d top-ups applied", res.Applied)}
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonReconciled, Message: "Wallet in service"}
	switch {
	case len(res.Invalid) > 0:
		entries := make([]string, 0, len(res.Invalid))
		for id, why := range res.Invalid {
			entries = append(entries, id+": "+why)
		}
		sort.Strings(entries)
		reconciled.Status, reconciled.Reason = metav1.ConditionFalse, v1alpha1.ReasonInvalidTopUp
		reconciled.Message = "Top-ups not applied: " + listed(entries, maxListedTopUps)
		ready.Status, ready.Reason = metav1.ConditionFalse, v1alpha1.ReasonInvalidTopUp
		ready.Message = fmt.Sprintf("Wallet in service, but %d of spec.topUps not applied (%d applied): %s",
			len(entries), res.Applied, listed(entries, maxListedTopUps))
	case len(res.Removed) > 0:
		reconciled.Status, reconciled.Reason = metav1.ConditionFalse, v1alpha1.ReasonTopUpRemoved
		reconciled.Message = fmt.Sprintf("Top-ups %s were removed from spec but stay applied: "+
			"the ledger is append-only; correct a balance with a new top-up", strings.Join(res.Removed, ", "))
	}
	return []metav1.Condition{reconciled, ready}
}

// maxListedTopUps caps how many refused entries of spec.topUps a condition names.
const maxListedTopUps = 10

// walletInService reports whether obj is a Wallet that manages its account's wallet and has
// applied its settings: Ready, or not Ready only because entries of its spec.topUps cannot be
// credited, which leaves the wallet itself taking money.
func walletInService(obj client.Object) bool {
	w, ok := obj.(*v1alpha1.Wallet)
	if !ok {
		return false
	}
	ready := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady)
	return ready != nil && (ready.Status == metav1.ConditionTrue || ready.Reason == v1alpha1.ReasonInvalidTopUp)
}

// showHeldBalances sets w's balances to what the ledger holds while its Partner is being deleted
// or gone, if w manages the account's wallet: the ledger outlives the partner, the orders placed
// just before the deletion may not have been shown yet, and refunds of those in flight still
// land. The ledger follower wakes w on each of them, as before the deletion.
func (r *WalletReconciler) showHeldBalances(ctx context.Context, w *v1alpha1.Wallet) error {
	state, held, err := r.Provisioner.HeldWalletState(ctx, w.Namespace, w.Spec.PartnerRef.Name,
		string(w.Spec.Environment), provisioning.WalletOwner{UID: string(w.UID), Name: w.Name})
	if err != nil {
		return failed(v1alpha1.ReasonDatabaseError, fmt.Errorf("read the balances of a deleted partner: %w", err))
	}
	if held {
		w.Status.Balances, w.Status.LowBalance = state.Balances, state.LowBalance
	}
	return nil
}

// claim makes w the Wallet of its partner's environment, or returns the Wallet that is. The
// claim is kept in the database, so two operators never both apply two Wallets to one account.
// Wallets have no finalizer, so a deleted one leaves its claim behind: the next Wallet takes the
// account over once the API server confirms that the claimant is gone.
func (r *WalletReconciler) claim(ctx context.Context, w *v1alpha1.Wallet) (provisioning.WalletOwner, bool, error) {
	me := provisioning.WalletOwner{UID: string(w.UID), Name: w.Name}
	partner, env := w.Spec.PartnerRef.Name, string(w.Spec.Environment)
	owner, err := r.Provisioner.ClaimWallet(ctx, w.Namespace, partner, env, me)
	if err != nil {
		return owner, false, failed(v1alpha1.ReasonDatabaseError, fmt.Errorf("claim wallet: %w", err))
	}
	if owner.UID == me.UID {
		return owner, true, nil
	}
	alive, err := r.walletExists(ctx, w.Namespace, owner)
	if err != nil || alive {
		return owner, false, err
	}
	owner, err = r.Provisioner.ReplaceWalletOwner(ctx, w.Namespace, partner, env, owner, me)
	if err != nil {
		return owner, false, failed(v1alpha1.ReasonDatabaseError, fmt.Errorf("take over wallet: %w", err))
	}
	return owner, owner.UID == me.UID, nil
}

// walletExists reports whether the Wallet holding a claim still exists: the cache may say yes;
// only the API server may say no.
func (r *WalletReconciler) walletExists(ctx context.Context, namespace string, owner provisioning.WalletOwner) (
	bool, error,
) {
	key := types.NamespacedName{Namespace: namespace, Name: owner.Name}
	var current v1alpha1.Wallet
	if err := r.Get(ctx, key, &current); err == nil && string(current.UID) == owner.UID {
		return true, nil
	}
	err := r.APIReader.Get(ctx, key, &current)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read Wallet %s: %w", owner.Name, err)
	}
	return string(current.UID) == owner.UID, nil
}

// recordTopUps records a Normal event per top-up this reconcile credited: money moved, and the
// Wallet's history should say when and how much.
func (r *WalletReconciler) recordTopUps(w *v1alpha1.Wallet, ids []string) {
	if r.Recorder == nil {
		return
	}
	for _, id := range ids {
		for _, t := range w.Spec.TopUps {
			if t.ID == id {
				r.Recorder.Eventf(w, nil, corev1.EventTypeNormal, eventTopUpApplied, "TopUp",
					"Top-up %s credited %s %s", t.ID, t.Amount, t.Currency)
			}
		}
	}
}

// SetupWithManager watches Wallets, their Partners, and ledger changes.
func (r *WalletReconciler) SetupWithManager(mgr ctrl.Manager, ledger <-chan event.GenericEvent) error {
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.Wallet{}, walletPartnerIndex,
		func(o client.Object) []string {
			return []string{o.(*v1alpha1.Wallet).Spec.PartnerRef.Name}
		})
	if err != nil {
		return fmt.Errorf("index wallets by partner: %w", err)
	}
	// A Wallet's own status writes do not wake it: they would make every refresh that finds new
	// orders trigger the next one, at reconcile speed instead of at the ledger's coalesced pace.
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Wallet{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.Partner{}, handler.EnqueueRequestsFromMapFunc(r.walletsOfPartner)).
		// A deleted Wallet frees its account for a Wallet refused as its duplicate.
		Watches(&v1alpha1.Wallet{}, handler.EnqueueRequestsFromMapFunc(r.siblings),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc:  func(event.CreateEvent) bool { return false },
				UpdateFunc:  func(event.UpdateEvent) bool { return false },
				DeleteFunc:  func(event.DeleteEvent) bool { return true },
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
		WatchesRawSource(source.Channel(ledger, &handler.EnqueueRequestForObject{})).
		Named("wallet").
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Options.Concurrency}).
		Complete(r)
}

// walletPartnerIndex is the cache index of Wallets by spec.partnerRef.name.
const walletPartnerIndex = "spec.partnerRef.name"

func (r *WalletReconciler) walletsOfPartner(ctx context.Context, obj client.Object) []reconcile.Request {
	var list v1alpha1.WalletList
	err := r.List(ctx, &list, client.InNamespace(obj.GetNamespace()),
		client.MatchingFields{walletPartnerIndex: obj.GetName()})
	if err != nil {
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		out[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
	}
	return out
}

// siblings are the other Wallets of a Wallet's partner and environment.
func (r *WalletReconciler) siblings(ctx context.Context, obj client.Object) []reconcile.Request {
	w, ok := obj.(*v1alpha1.Wallet)
	if !ok {
		return nil
	}
	var list v1alpha1.WalletList
	err := r.List(ctx, &list, client.InNamespace(w.Namespace),
		client.MatchingFields{walletPartnerIndex: w.Spec.PartnerRef.Name})
	if err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if other := &list.Items[i]; other.UID != w.UID && other.Spec.Environment == w.Spec.Environment {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(other)})
		}
	}
	return out
}
