package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/controllers"
	"github.com/codeport/codeport/internal/money"
	"github.com/codeport/codeport/internal/notify"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/tenancy"
)

// defaultOperatorMaxConns is the operator's pool: reconciles, the stock refresh and the leader's
// bookkeeping, far fewer at once than an API's requests and workers.
const defaultOperatorMaxConns = 10

//nolint:gocognit // a flat list of flags, one branch each
func newOperatorCommand() *cobra.Command {
	var (
		databaseURL, kubeconfig, sandboxBaseURL, productionBaseURL string
		codesKey                                                   codesKeyring
		specTopUps                                                 bool
		stockLowThreshold                                          int
		maxTopUp                                                   int64
		maxConns                                                   int32
		stockRefresh, databaseWait                                 time.Duration
		m                                                          managerFlags
	)
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Reconcile Partner, Catalog, ApiKey, Wallet and WalletTopUp resources into the data plane",
		Long: `Run the Kubernetes operator: it watches the codeport.dev custom resources and provisions
partners, accounts, keys (plaintext only in Secrets), catalogs and wallet top-ups into the
database the partner API serves from. Kubeconfig is found the usual way: --kubeconfig,
$KUBECONFIG, in-cluster, ~/.kube/config.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if databaseURL == "" {
				return errors.New("--database-url (or CODEPORT_DATABASE_URL) is required")
			}
			cipher, err := codesKey.load()
			if err != nil {
				return err
			}
			if err := checkNamespaces(m.watchNamespaces); err != nil {
				return err
			}
			if err := checkStockFlags(stockLowThreshold, stockRefresh); err != nil {
				return err
			}
			if maxTopUp < 1 {
				return errors.New("--max-top-up must be at least 1")
			}
			if maxConns < 1 {
				return errors.New("--database-max-conns must be at least 1")
			}
			log := routeLogs(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
			// The database comes first: an unmigrated schema is one clear line, before anything
			// else can fail on it.
			db, err := openDatabaseWaiting(cmd.Context(), databaseURL, store.Options{MaxConns: maxConns}, databaseWait, log)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := requireSchema(cmd.Context(), db, log); err != nil {
				return err
			}
			unregister, err := registerInstance(cmd.Context(), db, "operator", log)
			if err != nil {
				return err
			}
			defer unregister()
			if cipher, err = attachCodesKey(cmd.Context(), db, cipher, codesKeySource); err != nil {
				return err
			}
			restConfig, err := loadKubeconfig(kubeconfig)
			if err != nil {
				return err
			}
			if err := probeAPIServer(cmd.Context(), restConfig); err != nil {
				return err
			}
			mgr, err := newManager(restConfig, &m)
			if err != nil {
				return err
			}
			// The operator delivers nothing: the API processes work the notification queues its
			// catalog changes fill.
			prov, err := provisioning.New(db, cipher, notify.NewNotifier(false, notify.DefaultRetry()))
			if err != nil {
				return err
			}
			prov.WithStockLowThreshold(stockLowThreshold).WithMaxTopUp(maxTopUp)
			err = controllers.Setup(mgr, controllers.Options{
				Provisioner:     prov,
				StockRefresh:    stockRefresh,
				Metrics:         crmetrics.Registry,
				WatchNamespaces: m.watchNamespaces,
				NoSpecTopUps:    !specTopUps,
				BaseURLs: map[string]string{
					string(tenancy.Sandbox): sandboxBaseURL, string(tenancy.Production): productionBaseURL,
				},
			})
			if err != nil {
				return err
			}
			if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
				return err
			}
			if err := mgr.AddReadyzCheck("database", func(r *http.Request) error { return db.Ping(r.Context()) }); err != nil {
				return err
			}
			return mgr.Start(cmd.Context())
		},
	}
	f := cmd.Flags()
	databaseURLFlag(cmd, &databaseURL)
	f.Int32Var(&maxConns, "database-max-conns", defaultOperatorMaxConns, "database connections of this process")
	databaseWaitFlag(f, &databaseWait)
	codesKeyFlag(f, &codesKey)
	f.StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, in-cluster, ~/.kube/config)")
	f.BoolVar(&m.leaderElect, "leader-elect", false, "elect a leader so that only one replica reconciles")
	f.DurationVar(&m.leaseDuration, "leader-elect-lease-duration", 15*time.Second,
		"how long a leader's lease lasts without renewal: the longest a SIGKILLed leader delays its successor")
	f.DurationVar(&m.renewDeadline, "leader-elect-renew-deadline", 10*time.Second,
		"how long the leader keeps trying to renew before it gives up leadership (less than the lease duration)")
	f.DurationVar(&m.retryPeriod, "leader-elect-retry-period", 2*time.Second,
		"how often candidates try to acquire or renew the lease")
	f.BoolVar(&m.cacheAllSecrets, "cache-all-secrets", false,
		"benchmark baseline only: cache every Secret and ConfigMap of the cluster in full")
	_ = f.MarkHidden("cache-all-secrets")
	f.StringVar(&m.leaderElectionNamespace, "leader-election-namespace", "",
		"namespace of the leader-election Lease (default: the pod's own namespace; required outside a cluster)")
	f.BoolVar(&specTopUps, "wallet-spec-top-ups", true,
		"apply top-ups listed in Wallet.spec.topUps; false leaves money to WalletTopUp resources alone, "+
			"so that RBAC on Wallets grants their settings only")
	f.Int64Var(&maxTopUp, "max-top-up", money.DefaultMaxTopUp,
		"largest top-up credited (WalletTopUp, Wallet.spec.topUps), in major units of its currency; "+
			"a larger one is refused (InvalidTopUp) and never retried")
	f.IntVar(&stockLowThreshold, "stock-low-threshold", provisioning.DefaultStockLowThreshold,
		"available production codes under which a product is low (stock.low, Catalog status.stock), "+
			"for Catalogs without spec.stockLowThreshold; 0 turns it off")
	f.DurationVar(&stockRefresh, "stock-refresh", time.Minute,
		"how often each Catalog's stock is counted into its status.stock")
	f.StringSliceVar(&m.watchNamespaces, "watch-namespaces", nil,
		"comma-separated namespaces whose resources are reconciled (default: all); "+
			"the operator then needs RBAC in those namespaces only")
	f.StringVar(&m.metricsAddr, "metrics-bind-address", ":8443", "metrics endpoint address (\"0\" disables it)")
	f.BoolVar(&m.secureMetrics, "metrics-secure", true,
		"serve metrics over HTTPS, authenticated and authorised by the API server")
	f.StringVar(&m.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	f.StringVar(&sandboxBaseURL, "sandbox-base-url", "",
		"sandbox API base URL written into key Secrets (baseUrl), e.g. https://sandbox.api.example/v2")
	f.StringVar(&productionBaseURL, "production-base-url", "",
		"production API base URL written into key Secrets (baseUrl)")
	return cmd
}

// maxStockLowThreshold is the bound of Catalog spec.stockLowThreshold: each delivery counts
// up to the threshold of what is left.
const maxStockLowThreshold = 100000

// checkStockFlags rejects a threshold out of Catalog spec.stockLowThreshold's bounds and a
// refresh that would never come.
func checkStockFlags(threshold int, refresh time.Duration) error {
	if threshold < 0 || threshold > maxStockLowThreshold {
		return fmt.Errorf("--stock-low-threshold must be between 0 and %d", maxStockLowThreshold)
	}
	if refresh <= 0 {
		return errors.New("--stock-refresh must be positive")
	}
	return nil
}

// checkNamespaces rejects --watch-namespaces entries that cannot be namespaces, so that a typo
// fails at start instead of leaving a namespace silently unreconciled.
func checkNamespaces(namespaces []string) error {
	for _, ns := range namespaces {
		if problems := validation.IsDNS1123Label(ns); len(problems) > 0 {
			return fmt.Errorf("--watch-namespaces: %q is not a namespace name: %s", ns, strings.Join(problems, "; "))
		}
	}
	return nil
}

// leaderElectionID names the operator's leader-election Lease (docs/operator.md deletes it by
// name after an uninstall).
const leaderElectionID = "operator.codeport.dev"

// managerFlags are the operator's flags that shape its manager.
type managerFlags struct {
	metricsAddr, probeAddr, leaderElectionNamespace string
	leaderElect, secureMetrics, cacheAllSecrets     bool
	leaseDuration, renewDeadline, retryPeriod       time.Duration
	watchNamespaces                                 []string
}

// newManager builds the operator's manager: its scheme, metrics, probes, leader election and
// caches (limited to --watch-namespaces when given).
func newManager(restConfig *rest.Config, m *managerFlags) (ctrl.Manager, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	metrics := metricsserver.Options{BindAddress: m.metricsAddr, SecureServing: m.secureMetrics}
	if m.secureMetrics {
		// Scrapers authenticate with a token and need RBAC on /metrics.
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metrics,
		HealthProbeBindAddress:        m.probeAddr,
		Cache:                         controllers.CacheOptions(m.cacheAllSecrets, m.watchNamespaces...),
		LeaderElection:                m.leaderElect,
		LeaderElectionID:              leaderElectionID,
		LeaderElectionNamespace:       m.leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &m.leaseDuration,
		RenewDeadline:                 &m.renewDeadline,
		RetryPeriod:                   &m.retryPeriod,
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	return mgr, nil
}

// apiServerProbeTimeout bounds the operator's first call to the Kubernetes API server: an
// unreachable one is reported at start, not as the manager's later failures to list resources.
const apiServerProbeTimeout = 10 * time.Second

// loadKubeconfig finds the Kubernetes client configuration where controller-runtime looks for it
// (--kubeconfig, $KUBECONFIG, in-cluster, ~/.kube/config), and when there is none says which
// paths it tried and that the in-cluster configuration was not there either: client-go's own
// error advises a KUBERNETES_MASTER variable that nothing reads any more.
func loadKubeconfig(flag string) (*rest.Config, error) {
	var path, source string
	switch env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); {
	case flag != "":
		path, source = flag, "--kubeconfig"
	case env != "":
		path, source = env, "$KUBECONFIG"
	default:
		cfg, err := rest.InClusterConfig()
		if err == nil {
			return withClientDefaults(cfg), nil
		}
		if !errors.Is(err, rest.ErrNotInCluster) {
			return nil, fmt.Errorf("in-cluster Kubernetes configuration: %w", err)
		}
		path, source = clientcmd.RecommendedHomeFile, "the default"
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no Kubernetes configuration: not in a cluster (no in-cluster service account), "+
				"--kubeconfig and $KUBECONFIG unset, and %s does not exist; pass --kubeconfig PATH", path)
		}
	}
	paths := filepath.SplitList(path)
	found := slices.ContainsFunc(paths, func(p string) bool {
		_, err := os.Stat(p)
		return err == nil
	})
	if !found {
		return nil, fmt.Errorf("kubeconfig %s (%s) does not exist; without --kubeconfig and $KUBECONFIG "+
			"the operator uses the in-cluster configuration, else %s", path, source, clientcmd.RecommendedHomeFile)
	}
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: paths}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, fmt.Errorf("kubeconfig %s (%s) names no cluster for its current context", path, source)
	}
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s (%s): %w", path, source, err)
	}
	return withClientDefaults(cfg), nil
}

// withClientDefaults leaves request rates to the API server's priority and fairness, as
// controller-runtime's own configuration loading does.
func withClientDefaults(cfg *rest.Config) *rest.Config {
	if cfg.QPS == 0 {
		cfg.QPS = -1
	}
	return cfg
}

// probeAPIServer asks the API server of cfg for its version, within apiServerProbeTimeout.
func probeAPIServer(ctx context.Context, cfg *rest.Config) error {
	probe := rest.CopyConfig(cfg)
	probe.Timeout = apiServerProbeTimeout
	client, err := discovery.NewDiscoveryClientForConfig(probe)
	if err != nil {
		return fmt.Errorf("kubernetes client for %s: %w", cfg.Host, err)
	}
	ctx, cancel := context.WithTimeout(ctx, apiServerProbeTimeout)
	defer cancel()
	err = client.RESTClient().Get().AbsPath("/version").Do(ctx).Error()
	var status apierrors.APIStatus
	switch {
	case err == nil:
		return nil
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the Kubernetes API server at %s refused the kubeconfig's credentials (401 Unauthorized)", cfg.Host)
	case errors.As(err, &status):
		return fmt.Errorf("the Kubernetes API server at %s answered %d: %w", cfg.Host, status.Status().Code, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("cannot reach the Kubernetes API server at %s: no answer within %s",
			cfg.Host, apiServerProbeTimeout)
	}
	return fmt.Errorf("cannot reach the Kubernetes API server at %s: %s", cfg.Host, networkCause(err))
}
