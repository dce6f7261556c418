package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/notify"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
	"github.com/codeport/codeport/internal/test/testprocess"
)

// ruleMetricNames is every metric name the chart's alert expressions read, as bin/promrules
// (hack/promrules, Prometheus's own rule and PromQL parsers) finds them in
// charts/codeport/files/prometheus-rules.yaml. The file's threshold placeholders are filled
// with a number first: they stand only where numbers do.
func ruleMetricNames(t *testing.T) []string {
	t.Helper()
	tool := os.Getenv("PROMRULES")
	if tool == "" {
		tool = filepath.Join("bin", "promrules")
	}
	if _, err := os.Stat(tool); err != nil {
		t.Fatalf("promrules: %v: run `make promtool` (make test does), or set PROMRULES", err)
	}
	src, err := os.ReadFile(filepath.Join("charts", "codeport", "files", "prometheus-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	filled := regexp.MustCompile(`\$\{[A-Za-z0-9]+\}`).ReplaceAll(src, []byte("1"))
	if err := os.WriteFile(rules, filled, 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(tool, rules)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("promrules: %v\n%s", err, stderr.String())
	}
	names := strings.Fields(string(out))
	if len(names) == 0 {
		t.Fatal("promrules found no metric in the rules")
	}
	return names
}

// exported scrapes a /metrics endpoint and returns the names of the series it serves (a
// histogram's _bucket, _sum and _count).
func exported(url string) (map[string]bool, error) {
	resp, err := http.Get(url) //contract:unchecked /metrics, which no document describes
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for name, f := range families {
		if len(f.GetMetric()) == 0 {
			continue
		}
		names[name] = true
		if f.GetMetric()[0].Histogram != nil || f.GetMetric()[0].Summary != nil {
			names[name+"_sum"], names[name+"_count"] = true, true
			if f.GetMetric()[0].Histogram != nil {
				names[name+"_bucket"] = true
			}
		}
	}
	return names, nil
}

// TestAlertsReadExportedMetrics: every metric an alert of the chart reads is served by the
// binaries as deployed: `codeport serve` (sandbox, with its workers) and `codeport operator`
// (against a kube-apiserver), each a process of its own, taken through what makes each series
// appear: a request, stock, wallets, and an order whose webhook the partner's endpoint refuses.
// A renamed metric, in the code or in a rule, fails it.
func TestAlertsReadExportedMetrics(t *testing.T) {
	want := ruleMetricNames(t)
	ctx := context.Background()
	db := storetest.New(t)
	codesKey := strings.Repeat("ab", 32)

	// The partner, provisioned as the operator would: its endpoint refuses every delivery.
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer refusing.Close()
	conn, err := store.Open(ctx, db.URL, store.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw, err := codes.ParseKey(codesKey)
	if err != nil {
		t.Fatal(err)
	}
	cipher, err := codes.NewCipher(raw)
	if err != nil {
		t.Fatal(err)
	}
	prov, err := provisioning.New(conn, cipher, notify.NewNotifier(false, notify.DefaultRetry()))
	if err != nil {
		t.Fatal(err)
	}
	ns := "alerts"
	tenant, err := testfixture.Onboard(ctx, prov,
		testfixture.Partner("acme", testfixture.InNamespace(ns), testfixture.WithAllowlist("127.0.0.1", "::1")),
		testfixture.WithCatalog(testfixture.Catalog("eu", testfixture.InNamespace(ns)),
			testfixture.Product("10000000000001")),
		testfixture.WithWebhooks(provisioning.Webhooks{"sandbox": {URL: refusing.URL,
			Secret: []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")}}),
		testfixture.WithBalance("sandbox", "5000.00", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := codes.Import(ctx, conn.Pool, cipher, "10000000000001", "alerts",
		strings.NewReader("ALERTS-1\nALERTS-2\n"), nil); err != nil {
		t.Fatal(err)
	}

	kubeconfig, _ := startKubeAPIServer(t)
	operatorMetrics := testprocess.Addr(t)
	startComponent(t, db.URL, "operator", "--kubeconfig", kubeconfig,
		"--metrics-bind-address", operatorMetrics, "--metrics-secure=false", "--health-probe-bind-address", "0")
	serveMetrics := testprocess.Addr(t)
	serve := startComponent(t, db.URL, "serve", "--environment", "sandbox", "--addr", "127.0.0.1:0",
		"--metrics-addr", serveMetrics, "--redis-url", "", "--webhook-allow-private-networks")
	addr := servingAddr(t, serve.Log)
	order := `{"externalOrderCode": "alerts-1", "currency": "EUR",
		"orderProducts": [{"productCode": "99000000000001", "quantity": 1}]}`
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v2/orders", strings.NewReader(order))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", tenant.Keys["sandbox"])
	resp, err := apiClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("order: %s", resp.Status)
	}

	var missing []string
	poll.Until(t, 3*time.Minute, "every metric of the alerts served", func() (bool, string) {
		served := map[string]bool{}
		for _, url := range []string{"http://" + serveMetrics + "/metrics", "http://" + operatorMetrics + "/metrics"} {
			names, err := exported(url)
			if err != nil {
				return false, err.Error()
			}
			for n := range names {
				served[n] = true
			}
		}
		missing = slices.DeleteFunc(slices.Clone(want), func(n string) bool { return served[n] })
		return len(missing) == 0, "not served: " + strings.Join(missing, ", ")
	})
}
