package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/apiserver/provisioning"
	"github.com/codeport/codeport/apiserver/store"
	"github.com/codeport/codeport/controllers"
)

func newOperatorCommand() *cobra.Command {
	var (
		databaseURL, codesKey, metricsAddr, probeAddr, kubeconfig  string
		sandboxBaseURL, productionBaseURL, leaderElectionNamespace string
		leaderElect, secureMetrics, cacheAllSecrets                bool
		leaseDuration, renewDeadline, retryPeriod                  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Reconcile Partner, Catalog, ApiKey and Wallet resources into the data plane",
		Long: `Run the Kubernetes operator: it watches the codeport.dev custom resources and provisions
partners, accounts, keys (plaintext only in Secrets), catalogs and wallet top-ups into the
database the partner API serves from. Kubeconfig is found the usual way: --kubeconfig,
$KUBECONFIG, in-cluster, ~/.kube/config.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if databaseURL == "" {
				return errors.New("--database-url (or CODEPORT_DATABASE_URL) is required")
			}
			cipher, err := loadCipher(codesKey)
			if err != nil {
				return err
			}
			if kubeconfig != "" {
				if err := os.Setenv("KUBECONFIG", kubeconfig); err != nil {
					return fmt.Errorf("kubeconfig: %w", err)
				}
			}
			handler := slog.NewJSONHandler(os.Stderr, nil)
			ctrl.SetLogger(logr.FromSlogHandler(handler))
			// The database comes first: an unmigrated schema is one clear line, before anything
			// else can fail on it.
			db, err := store.Open(cmd.Context(), databaseURL, store.Options{MaxConns: 10})
			if err != nil {
				return err
			}
			defer db.Close()
			if err := requireSchema(cmd.Context(), db, slog.New(handler)); err != nil {
				return err
			}
			restConfig, err := ctrl.GetConfig()
			if err != nil {
				return fmt.Errorf("kubeconfig: %w", err)
			}
			scheme := runtime.NewScheme()
			if err := clientgoscheme.AddToScheme(scheme); err != nil {
				return err
			}
			if err := v1alpha1.AddToScheme(scheme); err != nil {
				return err
			}
			metrics := metricsserver.Options{BindAddress: metricsAddr, SecureServing: secureMetrics}
			if secureMetrics {
				// Scrapers authenticate with a token and need RBAC on /metrics.
				metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
			}
			mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
				Scheme:                        scheme,
				Metrics:                       metrics,
				HealthProbeBindAddress:        probeAddr,
				Cache:                         controllers.CacheOptions(cacheAllSecrets),
				LeaderElection:                leaderElect,
				LeaderElectionID:              "operator.codeport.dev",
				LeaderElectionNamespace:       leaderElectionNamespace,
				LeaderElectionReleaseOnCancel: true,
				LeaseDuration:                 &leaseDuration,
				RenewDeadline:                 &renewDeadline,
				RetryPeriod:                   &retryPeriod,
			})
			if err != nil {
				return fmt.Errorf("create manager: %w", err)
			}
			err = controllers.Setup(mgr, controllers.Options{
				Provisioner: provisioning.New(db, cipher),
				Metrics:     crmetrics.Registry,
				BaseURLs: map[string]string{
					store.EnvironmentSandbox: sandboxBaseURL, store.EnvironmentProduction: productionBaseURL,
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
	codesKeyFlag(f, &codesKey)
	f.StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, in-cluster, ~/.kube/config)")
	f.BoolVar(&leaderElect, "leader-elect", false, "elect a leader so that only one replica reconciles")
	f.DurationVar(&leaseDuration, "leader-elect-lease-duration", 15*time.Second,
		"how long a leader's lease lasts without renewal: the longest a SIGKILLed leader delays its successor")
	f.DurationVar(&renewDeadline, "leader-elect-renew-deadline", 10*time.Second,
		"how long the leader keeps trying to renew before it gives up leadership (less than the lease duration)")
	f.DurationVar(&retryPeriod, "leader-elect-retry-period", 2*time.Second,
		"how often candidates try to acquire or renew the lease")
	f.BoolVar(&cacheAllSecrets, "cache-all-secrets", false,
		"benchmark baseline only: cache every Secret and ConfigMap of the cluster in full")
	_ = f.MarkHidden("cache-all-secrets")
	f.StringVar(&leaderElectionNamespace, "leader-election-namespace", "",
		"namespace of the leader-election Lease (default: the pod's own namespace; required outside a cluster)")
	f.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "metrics endpoint address (\"0\" disables it)")
	f.BoolVar(&secureMetrics, "metrics-secure", true,
		"serve metrics over HTTPS, authenticated and authorised by the API server")
	f.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	f.StringVar(&sandboxBaseURL, "sandbox-base-url", "",
		"sandbox API base URL written into key Secrets (baseUrl), e.g. https://sandbox.api.example/v2")
	f.StringVar(&productionBaseURL, "production-base-url", "",
		"production API base URL written into key Secrets (baseUrl)")
	return cmd
}
