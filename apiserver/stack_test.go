package apiserver_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/apiserver"
	"github.com/codeport/codeport/apiserver/ratelimit"
	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/fulfilment"
	"github.com/codeport/codeport/internal/notify"
	"github.com/codeport/codeport/internal/orders"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/contracttest"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// testDatabase is this package's database, created by TestMain.
var testDatabase string

func TestMain(m *testing.M) {
	if url := os.Getenv(workerProcessEnv); url != "" {
		// Re-executed by the crash test as a fulfilment worker process that gets killed.
		os.Exit(runWorkerProcess(url))
	}
	os.Exit(storetest.Main(m, "apiserver", func(url string) { testDatabase = url }))
}

// stack is the data plane of both environments, served on real ports against the package's
// real PostgreSQL, with fulfilment workers running.
type stack struct {
	db      *store.DB
	prov    *provisioning.Provisioner
	cipher  *codes.Cipher
	baseURL map[string]string
	// metricsURL is the /metrics endpoint when stackOptions.metrics is set.
	metricsURL string
	logger     *slog.Logger
	// contracts hold every exchange of s.client with the servers to the documents they serve.
	contracts *contracttest.Contracts
}

type stackOptions struct {
	// databaseURL overrides the package's database.
	databaseURL string
	limiter     ratelimit.Limiter
	slow        time.Duration
	noWorker    bool
	// smtp, when set, turns low-balance e-mails on.
	smtp *notify.SMTP
	// publicWebhooksOnly delivers webhooks as production does: to public addresses only.
	publicWebhooksOnly bool
	// logs receives the JSON logs (default: warnings to stderr); metrics serves /metrics.
	logs    io.Writer
	metrics bool
	// tracing, when set, records the spans of requests, statements and fulfilment.
	tracing trace.TracerProvider
	// trustedProxies are the proxies whose X-Forwarded-For the APIs believe.
	trustedProxies []netip.Prefix
	// sandboxTimeout is the delay of the sandbox's timeout scenario (default 100 ms).
	sandboxTimeout time.Duration
	// v1Lifecycle, when set, replaces the default announcement of v1's retirement.
	v1Lifecycle *apiserver.Lifecycle
	// outageGrace, when set, replaces how long readiness outlasts the database's answers.
	outageGrace *time.Duration
}

// sharedCipher is the package's codes key: every stack must read codes sealed by the others'
// workers.
func sharedCipher(t testing.TB) *codes.Cipher {
	t.Helper()
	raw, err := codes.ParseKey(sharedCodesKey)
	if err != nil {
		t.Fatal(err)
	}
	cipher, err := codes.NewCipher(raw)
	if err != nil {
		t.Fatal(err)
	}
	return cipher
}

func newStack(t testing.TB, opts stackOptions) *stack {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	url := testDatabase
	if opts.databaseURL != "" {
		url = opts.databaseURL
	}
	db, err := store.Open(ctx, url, store.Options{MaxConns: 40, Tracing: opts.tracing})
	if err != nil {
		t.Fatal(err)
	}
	cipher := sharedCipher(t)
	if opts.slow == 0 {
		opts.slow = 3 * time.Second
	}
	prov := testfixture.Provisioner(t, db, cipher)
	s := &stack{db: db, prov: prov, cipher: cipher, baseURL: map[string]string{}, contracts: servedDocuments.Contracts()}
	limiter := opts.limiter
	if limiter == nil {
		limiter = ratelimit.NewMemory()
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if opts.logs != nil {
		logger = slog.New(slog.NewJSONHandler(opts.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s.logger = logger
	plane := &apiserver.DataPlane{
		Deps: apiserver.Deps{DB: db, Limiter: limiter, Cipher: cipher, Logger: logger, Tracing: opts.tracing,
			RequestLog: opts.logs},
		// The tests' receivers listen on loopback.
		Delivery: notify.Delivery{SMTP: opts.smtp, Retry: notify.Retry{Base: 50 * time.Millisecond, Max: time.Second},
			AllowPrivateNetworks: !opts.publicWebhooksOnly},
	}
	for _, env := range provisioning.Environments() {
		cfg := apiserver.DefaultConfig(env)
		cfg.Estimate = orders.Estimate{Base: 100 * time.Millisecond, PerUnit: time.Millisecond, Slow: opts.slow}
		cfg.TrustedProxies = opts.trustedProxies
		cfg.SandboxTimeoutDelay = cmp.Or(opts.sandboxTimeout, 100*time.Millisecond)
		if opts.v1Lifecycle != nil {
			cfg.V1Lifecycle = *opts.v1Lifecycle
		}
		if opts.outageGrace != nil {
			cfg.DatabaseOutageGrace = *opts.outageGrace
		}
		plane.Listeners = append(plane.Listeners, apiserver.Listener{Config: cfg, Addr: "127.0.0.1:0"})
	}
	if opts.metrics {
		plane.MetricsAddr = "127.0.0.1:0"
	}
	if !opts.noWorker {
		wcfg := fulfilment.DefaultWorkerConfig(provisioning.Environments()...)
		plane.Workers = &wcfg
	}
	ready := make(chan map[string]string, 1)
	done := make(chan error, 1)
	go func() { done <- plane.Run(ctx, func(addrs map[string]string) { ready <- addrs }) }()
	select {
	case addrs := <-ready:
		for env, addr := range addrs {
			s.baseURL[env] = "http://" + addr
		}
		s.metricsURL = s.baseURL["metrics"] + "/metrics"
	case err := <-done:
		t.Fatalf("data plane: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("data plane: %v", err)
		}
		db.Close()
	})
	for _, env := range provisioning.Environments() {
		// Fetched now, the documents cost nothing to the first request a test times.
		if err := s.contracts.Load(s.baseURL[env]); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

const sharedCodesKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

func ptr[T any](v T) *T { return &v }

// testCatalog is a small catalog exercising every product shape.
func testCatalog(namespace string) (*v1alpha1.Catalog, []v1alpha1.CatalogProduct) {
	c := testfixture.Catalog("eu", testfixture.InNamespace(namespace), testfixture.WithDescription("EU", 1),
		testfixture.WithDiscount("5"))
	en := []v1alpha1.ProductLanguage{{LanguageCode: "en", Name: "English"}, {LanguageCode: "de", Name: "Deutsch"}}
	products := []v1alpha1.CatalogProduct{
		{ProductCode: "10000000000001", EAN: "5901234123457", Name: "Game Credit 20 EUR", ShortName: "Credit 20",
			Brand: "Acme Credit", Publisher: "Acme", CountryCode: "DE", CurrencyCode: "EUR", Price: ptr(int64(2000)),
			MainCategory: "Gaming", SubCategory: "Wallet", ProductCategory: "Credit", ProductType: "Digital Code",
			Platform: "PC", Tags: []string{"gaming", "credit"}, Languages: en, Status: "active"},
		{ProductCode: "10000000000002", Name: "Acme Gift Card", Brand: "Acme Gift", CountryCode: "DE", CurrencyCode: "EUR",
			Denomination: v1alpha1.Denomination{Type: v1alpha1.DenominationOpen, Min: ptr(int64(500)), Max: ptr(int64(10000)),
				Step: ptr(int64(100)), Default: ptr(int64(2500))},
			MainCategory: "Gift Cards", Tags: []string{"gift"}, Languages: en[:1], Status: "active",
			DiscountPercentage: ptr(v1alpha1.Percentage("7.5"))},
		{ProductCode: "10000000000003", Name: "Retired Pass", Brand: "Acme Credit", CountryCode: "DE", CurrencyCode: "EUR",
			Price: ptr(int64(999)), MainCategory: "Gaming", Status: "inactive"},
		{ProductCode: "10000000000004", Name: "Streaming 1 Month UK", Brand: "StreamCo", CountryCode: "GB",
			CurrencyCode: "GBP", Price: ptr(int64(899)), MainCategory: "Entertainment", Tags: []string{"video"},
			Languages: en[:1], Status: "active"},
		{ProductCode: "10000000000005", Name: "Space Saga Deluxe", Brand: "Nebula", CountryCode: "DE", CurrencyCode: "EUR",
			Price: ptr(int64(6999)), MainCategory: "Gaming", Tags: []string{"gaming", "preorder"}, Status: "preorder",
			FirstSale:  "2027-03-01",
			Promotion:  &v1alpha1.Promotion{Type: "Discount", Details: "10%", StartDate: "2026-01-01", EndDate: "2099-12-31"},
			ServiceFee: &v1alpha1.ServiceFee{Type: "Percentage", Value: "2.5"}},
	}
	return c, products
}

// tenant is an onboarded partner with its keys.
type tenant struct {
	namespace, name string
	keys            map[string]string // "sandbox", "production", "bearer:production"
}

// onboard provisions a partner (with the test catalog, both keys, a production bearer token and
// wallets) through the provisioning package, as the operator would; mutate, when set, changes
// the partner first.
func (s *stack) onboard(t testing.TB, name string, mutate func(*v1alpha1.Partner)) *tenant {
	t.Helper()
	ns := "t-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	c, products := testCatalog(ns)
	var opts []testfixture.PartnerOption
	if mutate != nil {
		opts = append(opts, testfixture.PartnerWith(mutate))
	}
	tn, err := testfixture.Onboard(context.Background(), s.prov, partnerOf(ns, name, opts...),
		testfixture.WithCatalog(c, products...), testfixture.WithKeys(testfixture.APIKeyIn("sandbox"),
			testfixture.APIKeyIn("production"), testfixture.BearerTokenIn("production")))
	if err != nil {
		t.Fatal(err)
	}
	return &tenant{namespace: ns, name: name, keys: tn.Keys}
}

// partnerOf is a tenant's Partner as onboard declares it (loopback allowed, a rate limit no test
// reaches unless it sets its own), changed by opts.
func partnerOf(ns, name string, opts ...testfixture.PartnerOption) *v1alpha1.Partner {
	return testfixture.Partner(name, append([]testfixture.PartnerOption{testfixture.InNamespace(ns),
		testfixture.WithAllowlist("127.0.0.1", "::1"), testfixture.WithRateLimit(100000)}, opts...)...)
}

// topUp credits a wallet through provisioning.
func (s *stack) topUp(
	t testing.TB, tn *tenant, env string, threshold string, topUps ...v1alpha1.TopUp,
) provisioning.WalletResult {
	t.Helper()
	res, err := s.prov.ApplyWallet(context.Background(), testfixture.Wallet(tn.name, env,
		testfixture.InNamespace(tn.namespace), testfixture.WithThreshold(threshold), testfixture.WithTopUps(topUps...)))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// response is a decoded API response.
type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

func (r response) str(key string) string { s, _ := r.body[key].(string); return s }

// call performs one request; key goes into x-api-key unless it starts with "Bearer ".
func (s *stack) call(t *testing.T, env, method, path, key string, body any) response {
	t.Helper()
	return s.callWith(t, env, method, path, key, body, nil)
}

// callWith performs one request with extra request headers.
func (s *stack) callWith(t *testing.T, env, method, path, key string, body any, header http.Header) response {
	t.Helper()
	var sent []byte
	switch b := body.(type) {
	case nil:
	case string:
		sent = []byte(b)
	case []byte:
		sent = b
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		sent = raw
	}
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(sent)
	}
	req, err := http.NewRequest(method, s.baseURL[env]+path, reader)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for name, values := range header {
		req.Header[name] = values
	}
	if strings.HasPrefix(key, "Bearer ") {
		req.Header.Set("Authorization", key)
	} else if key != "" {
		req.Header.Set("x-api-key", key)
	}
	resp, err := s.client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	checkCaching(t, req, resp)
	out := response{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &out.body); err != nil {
			t.Fatalf("%s %s: body is not JSON: %v: %s", method, path, err, raw)
		}
	}
	return out
}

// expectError checks the contract's error body.
func expectError(t *testing.T, r response, status int, message string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	if got := r.str("message"); got != message {
		t.Fatalf("message %q, want %q", got, message)
	}
	if code, _ := r.body["statusCode"].(float64); int(code) != status {
		t.Fatalf("statusCode %v, want %d", r.body["statusCode"], status)
	}
	if r.str("error") == "" && status != 500 {
		t.Fatalf("error label missing: %s", r.raw)
	}
}

// waitOrder polls an order until it leaves processing.
func (s *stack) waitOrder(t *testing.T, env, key, reference string) response {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r := s.call(t, env, "GET", "/v2/orders/"+reference, key, nil)
		if r.status != 200 {
			t.Fatalf("poll order: %d %s", r.status, r.raw)
		}
		if r.str("status") != "processing" {
			return r
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("order %s still processing after 30s", reference)
	return response{}
}

// account returns a tenant's account of env.
func (s *stack) account(t *testing.T, tn *tenant, env string) store.Account {
	t.Helper()
	acct, err := store.AccountOf(context.Background(), s.db.Pool, tn.namespace, tn.name, env)
	if err != nil {
		t.Fatal(err)
	}
	return acct
}
