package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/provisioning"
)

// Finalizer guards the data-plane side of Partner, Catalog and ApiKey: revoking keys and
// suspending accounts must happen before the resource disappears.
const Finalizer = "codeport.dev/finalizer"

// eventRecorderName names the operator in the events it records.
const eventRecorderName = "codeport-operator"

// Options configure the reconcilers.
type Options struct {
	// Provisioner is the reconcilers' one way into the data plane's database. Built with the
	// codes key, it seals partners' webhook signing secrets before they are stored.
	Provisioner *provisioning.Provisioner
	// BaseURLs maps environment to the API base URL written into key Secrets (baseUrl).
	BaseURLs map[string]string
	// Resync is how often every resource is reconciled even without changes (wallet balances,
	// catalog validity windows).
	Resync time.Duration
	// NotReadyRetry is how soon a resource waiting on another one is looked at again.
	NotReadyRetry time.Duration
	// ConflictRetry is how soon an ApiKey whose secretName is taken by a Secret it does not own
	// is looked at again. It is a safety net: the Secret's deletion or hand-over wakes the ApiKey
	// at once through the watch of referenced Secrets.
	ConflictRetry time.Duration
	// Concurrency is how many resources of one kind reconcile at once.
	Concurrency int
	// NoSpecTopUps turns Wallet.spec.topUps off: only WalletTopUps credit wallets, so that RBAC
	// on Wallets grants their settings and never money (--wallet-spec-top-ups=false).
	NoSpecTopUps bool
	// WatchNamespaces, when set, are the only namespaces the operator reconciles (namespaced
	// mode); the manager's cache must be limited to the same ones (CacheOptions). Empty is
	// cluster-wide.
	WatchNamespaces []string
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
	if o.ConflictRetry == 0 {
		o.ConflictRetry = time.Minute
	}
	if o.Concurrency == 0 {
		o.Concurrency = 4
	}
}

// Setup registers the five reconcilers and the ledger listener with mgr. The manager should be
// built with CacheOptions, so that it caches only the Secrets and ConfigMaps the operator owns.
func Setup(mgr ctrl.Manager, opts Options) error {
	opts.defaults()
	prov := opts.Provisioner
	recorder := mgr.GetEventRecorder(eventRecorderName)
	refs, err := newReferenceCache(mgr, opts.WatchNamespaces)
	if err != nil {
		return err
	}
	reader := mgr.GetAPIReader()
	catalogs := &CatalogReconciler{
		Client: mgr.GetClient(), APIReader: reader, Provisioner: prov, Recorder: recorder, Options: opts,
	}
	if err := catalogs.SetupWithManager(mgr, refs); err != nil {
		return fmt.Errorf("catalog controller: %w", err)
	}
	partners := &PartnerReconciler{
		Client: mgr.GetClient(), APIReader: reader, Provisioner: prov, Recorder: recorder, Options: opts,
	}
	if err := partners.SetupWithManager(mgr, refs); err != nil {
		return fmt.Errorf("partner controller: %w", err)
	}
	keys := &ApiKeyReconciler{
		Client:      mgr.GetClient(),
		APIReader:   reader,
		Provisioner: prov,
		Recorder:    recorder,
		Options:     opts,
		keyEvents:   newKeyEvents(opts.Metrics),
	}
	if err := keys.SetupWithManager(mgr, refs); err != nil {
		return fmt.Errorf("apikey controller: %w", err)
	}
	ledger := make(chan event.GenericEvent, 256)
	if err := mgr.Add(newLedgerFollower(prov, mgr.GetClient(), ledger).watchOnly(opts.WatchNamespaces)); err != nil {
		return fmt.Errorf("ledger follower: %w", err)
	}
	wallets := &WalletReconciler{
		Client: mgr.GetClient(), APIReader: reader, Provisioner: prov, Recorder: recorder, Options: opts,
	}
	if err := wallets.SetupWithManager(mgr, ledger); err != nil {
		return fmt.Errorf("wallet controller: %w", err)
	}
	topUps := &WalletTopUpReconciler{Client: mgr.GetClient(), Provisioner: prov, Recorder: recorder, Options: opts}
	if err := topUps.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("wallettopup controller: %w", err)
	}
	return nil
}

// setCondition records a condition for the resource's current generation.
func setCondition(
	conditions *[]metav1.Condition, generation int64, conditionType string, ok bool, reason, message string,
) {
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

// reasonError is a reconcile error with the reason its Ready=False condition reports.
type reasonError struct {
	reason string
	err    error
}

func (e *reasonError) Error() string { return e.err.Error() }
func (e *reasonError) Unwrap() error { return e.err }

// failed gives err the reason its Ready=False condition reports (a v1alpha1.Reason*).
func failed(reason string, err error) error {
	if err == nil {
		return nil
	}
	return &reasonError{reason: reason, err: err}
}

// failureReason is the Ready reason of a failed reconcile: the one given with failed, else
// DatabaseError for an error the database returned or a failed connection to it, else
// ReconcileError.
func failureReason(err error) string {
	var re *reasonError
	if errors.As(err, &re) {
		return re.reason
	}
	var pgErr *pgconn.PgError
	var connectErr *pgconn.ConnectError
	if errors.As(err, &pgErr) || errors.As(err, &connectErr) {
		return v1alpha1.ReasonDatabaseError
	}
	return v1alpha1.ReasonReconcileError
}

// superseded reports whether err only says that the object read was not the latest (a write
// conflict, or a create racing another): the reconcile is retried with the newer object and
// nothing failed, so Ready is left as it is.
func superseded(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }

// maxMessage bounds a condition message that carries an error.
const maxMessage = 1024

func errorMessage(err error) string {
	msg := err.Error()
	if len(msg) > maxMessage {
		msg = msg[:maxMessage-3] + "..."
	}
	return msg
}

// conditionsOf returns the conditions of one of the kinds (nil for any other object).
func conditionsOf(obj client.Object) *[]metav1.Condition {
	switch o := obj.(type) {
	case *v1alpha1.Partner:
		return &o.Status.Conditions
	case *v1alpha1.Catalog:
		return &o.Status.Conditions
	case *v1alpha1.ApiKey:
		return &o.Status.Conditions
	case *v1alpha1.Wallet:
		return &o.Status.Conditions
	case *v1alpha1.WalletTopUp:
		return &o.Status.Conditions
	}
	return nil
}

// withFinalizer is the skeleton shared by the kinds that have a data-plane side to undo:
// deletion runs finalize and releases the finalizer; otherwise the finalizer is ensured and
// the resource applied with one status write.
func withFinalizer(ctx context.Context, c client.Client, obj client.Object, finalize func(context.Context) error,
	apply func(context.Context) (ctrl.Result, error), observe func()) (ctrl.Result, error) {
	if !obj.GetDeletionTimestamp().IsZero() {
		if err := finalize(ctx); err != nil {
			return reportFailure(ctx, c, obj, failed(v1alpha1.ReasonDeleting,
				fmt.Errorf("deletion waits until the data plane is updated: %w", err)))
		}
		if controllerutil.RemoveFinalizer(obj, Finalizer) {
			return ctrl.Result{}, c.Update(ctx, obj)
		}
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(obj, Finalizer) {
		if err := c.Update(ctx, obj); err != nil {
			return reportFailure(ctx, c, obj, fmt.Errorf("add finalizer: %w", err))
		}
	}
	return applyWithStatus(ctx, c, obj, apply, observe)
}

// reportFailure records a failure outside apply (finalizer, finalize) in the status.
func reportFailure(ctx context.Context, c client.Client, obj client.Object, err error) (ctrl.Result, error) {
	fail := func(context.Context) (ctrl.Result, error) { return ctrl.Result{}, err }
	return applyWithStatus(ctx, c, obj, fail, func() {})
}

// applyWithStatus runs apply and writes the status it computed, once, as a patch, and only when
// something in it changed: a reconcile with nothing to change writes nothing.
//
// The status tells the truth: when apply fails, Ready is False for the current generation, with
// the failure's reason (see failed) and its error as the message; observe (which advances
// status.observedGeneration) runs only when apply succeeded and left Ready True for the current
// generation, so observedGeneration is the last generation applied in full. Each condition
// carries the generation it speaks of.
func applyWithStatus(ctx context.Context, c client.Client, obj client.Object,
	apply func(context.Context) (ctrl.Result, error), observe func()) (ctrl.Result, error) {
	before, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return ctrl.Result{}, fmt.Errorf("%T does not copy into a client.Object", obj)
	}
	result, reconcileErr := apply(ctx)
	conditions, generation := conditionsOf(obj), obj.GetGeneration()
	switch {
	case reconcileErr != nil && superseded(reconcileErr):
	case reconcileErr != nil:
		if conditions != nil {
			setCondition(conditions, generation, v1alpha1.ConditionReady, false,
				failureReason(reconcileErr), errorMessage(reconcileErr))
		}
	case conditions != nil:
		ready := meta.FindStatusCondition(*conditions, v1alpha1.ConditionReady)
		if ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == generation {
			observe()
		}
	}
	if err := patchStatus(ctx, c, before, obj); err != nil {
		return ctrl.Result{}, errors.Join(reconcileErr, err)
	}
	if reconcileErr != nil && superseded(reconcileErr) {
		// Not a failure: the newer object's watch event queues the next reconcile, and the
		// requeue is the backstop. Returning the error would log a stale read as an error.
		return ctrl.Result{RequeueAfter: supersededRetry}, nil
	}
	return result, reconcileErr
}

// supersededRetry is how soon a reconcile that read a stale object runs again.
const supersededRetry = 200 * time.Millisecond

// patchStatus writes obj's status as a merge patch against before, unless nothing changed.
func patchStatus(ctx context.Context, c client.Client, before, obj client.Object) error {
	patch := client.MergeFrom(before)
	data, err := patch.Data(obj)
	if err != nil {
		return fmt.Errorf("status patch of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	if string(data) == "{}" {
		return nil
	}
	if err := c.Status().Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("update status of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}
