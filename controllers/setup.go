package controllers

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/codeport/codeport/internal/provisioning"
)

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
	// StockRefresh is how often each Catalog's stock is counted into its status.
	StockRefresh time.Duration
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
	// Metrics receives the operator's own instruments (keys issued, rotated, revoked; resources
	// by Ready status); nil registers nothing. Reconcile errors by kind come with
	// controller-runtime's metrics.
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
	if o.StockRefresh == 0 {
		o.StockRefresh = time.Minute
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

// Setup registers the six reconcilers and the ledger listener with mgr. The manager should be
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
	stock := &CatalogStockReconciler{Client: mgr.GetClient(), Provisioner: prov, Options: opts}
	if err := stock.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("catalog stock controller: %w", err)
	}
	partners := &PartnerReconciler{
		Client: mgr.GetClient(), APIReader: reader, Provisioner: prov, Recorder: recorder, Options: opts,
	}
	if err := partners.SetupWithManager(mgr, refs); err != nil {
		return fmt.Errorf("partner controller: %w", err)
	}
	keys := &APIKeyReconciler{
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
	if opts.Metrics != nil {
		if err := opts.Metrics.Register(newReadinessCollector(mgr.GetCache(), "")); err != nil {
			return fmt.Errorf("readiness metrics: %w", err)
		}
	}
	return nil
}
