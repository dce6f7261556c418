package v1alpha1_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/codeport/codeport/api/v1alpha1"
)

// k8s is a client of a real kube-apiserver with the generated CRDs installed, so these tests
// exercise exactly the OpenAPI and CEL validation a cluster applies.
var k8s client.Client

func TestMain(m *testing.M) {
	os.Exit(runWithEnvtest(m))
}

func runWithEnvtest(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr,
			"KUBEBUILDER_ASSETS is not set: run `make test`, or export KUBEBUILDER_ASSETS=\"$(hack/envtest.sh)\"")
		return 1
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		// envtest's 20 s per attempt is too short for a kube-apiserver on a busy machine.
		ControlPlaneStartTimeout: 2 * time.Minute,
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start envtest:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	return m.Run()
}

func createNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "validation-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

func decode(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return u
}

// TestSamplesAccepted applies every document of config/samples: what the README tells platform
// engineers to apply must be valid.
func TestSamplesAccepted(t *testing.T) {
	ns := createNamespace(t)
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples found: %v", err)
	}
	kinds := map[string]int{}
	for _, file := range files {
		if filepath.Base(file) == "kustomization.yaml" {
			continue
		}
		applySamples(t, ns, file, kinds)
	}
	for _, kind := range []string{"Partner", "Catalog", "ApiKey", "Wallet"} {
		if kinds[kind] == 0 {
			t.Errorf("samples contain no %s", kind)
		}
	}
	if kinds["ApiKey"] < 3 || kinds["Wallet"] < 2 {
		t.Errorf("samples: %d ApiKeys, %d Wallets; want sandbox, production and bearer keys and two wallets",
			kinds["ApiKey"], kinds["Wallet"])
	}

	// The typed client reads them back, so Go types and schema agree (e.g. 7.5 as a Percentage).
	var catalogs v1alpha1.CatalogList
	if err := k8s.List(context.Background(), &catalogs, client.InNamespace(ns)); err != nil {
		t.Fatalf("list catalogs: %v", err)
	}
	if len(catalogs.Items) != 1 || len(catalogs.Items[0].Spec.Products) < 10 {
		t.Fatalf("catalog sample: %+v", catalogs.Items)
	}
	var found bool
	for _, p := range catalogs.Items[0].Spec.Products {
		if p.DiscountPercentage != nil && *p.DiscountPercentage == "7.5" {
			found = true
		}
	}
	if !found {
		t.Error("discountPercentage 7.5 did not round-trip")
	}
}

// applySamples creates every document of file in namespace ns and counts them by kind.
func applySamples(t *testing.T, ns, file string, kinds map[string]int) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	reader := utilyaml.NewYAMLReader(bufioReader(data))
	for {
		doc, err := reader.Read()
		if err != nil {
			break
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj := decode(t, string(doc))
		obj.SetNamespace(ns)
		if err := k8s.Create(context.Background(), obj); err != nil {
			t.Errorf("%s %s/%s rejected: %v", filepath.Base(file), obj.GetKind(), obj.GetName(), err)
		}
		kinds[obj.GetKind()]++
	}
}

const validPartner = `
apiVersion: codeport.dev/v1alpha1
kind: Partner
metadata: {name: p}
spec:
  displayName: P
  contactEmail: ops@p.example
  ipWhitelist: ["127.0.0.1/32", "2001:db8::/32", "10.1.2.3"]
`

const validCatalog = `
apiVersion: codeport.dev/v1alpha1
kind: Catalog
metadata: {name: c}
spec:
  validFrom: "2026-01-01T00:00:00Z"
  products:
  - {productCode: "10000000000001", name: A, countryCode: DE, currencyCode: EUR, price: 100}
`

const validAPIKey = `
apiVersion: codeport.dev/v1alpha1
kind: ApiKey
metadata: {name: k}
spec: {partnerRef: {name: p}, environment: sandbox, secretName: k-secret, rotation: 2}
`

const validWallet = `
apiVersion: codeport.dev/v1alpha1
kind: Wallet
metadata: {name: w}
spec:
  partnerRef: {name: p}
  environment: production
  topUps:
  - {id: a, currency: EUR, amount: "10.00"}
`

const validWalletTopUp = `
apiVersion: codeport.dev/v1alpha1
kind: WalletTopUp
metadata: {name: t}
spec: {walletRef: {name: w}, id: wire-1, currency: EUR, amount: "10.00", note: wire ref 1}
`

// rejection is a change to a valid object (base, a manifest) that the API server must refuse as
// Invalid with an error mentioning message.
type rejection struct {
	name    string
	base    string
	mutate  func(u map[string]any)
	message string
}

// wantInvalid fails the test unless err is an Invalid error mentioning message.
func wantInvalid(t *testing.T, err error, message string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want rejection mentioning %q", message)
	}
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), message) {
		t.Fatalf("err = %v; want Invalid mentioning %q", err, message)
	}
}

// TestCreateRejected: objects the API server must refuse, with a message naming the problem.
func TestCreateRejected(t *testing.T) {
	ns := createNamespace(t)
	cases := []rejection{
		{"13-digit productCode", validCatalog, func(u map[string]any) {
			product(u)["productCode"] = "1000000000001"
		}, "productCode"},
		{"open denomination min above max", validCatalog, func(u map[string]any) {
			p := product(u)
			delete(p, "price")
			p["denomination"] = map[string]any{"type": "open", "min": int64(500), "max": int64(100)}
		}, "denomination.min must not exceed denomination.max"},
		{"fixed product without price", validCatalog, func(u map[string]any) {
			delete(product(u), "price")
		}, "fixed-denomination products need a price"},
		{"unknown product status", validCatalog, func(u map[string]any) {
			product(u)["status"] = "discontinued"
		}, "Unsupported value"},
		{"discount above 100", validCatalog, func(u map[string]any) {
			spec(u)["defaultDiscountPercentage"] = 101
		}, "defaultDiscountPercentage"},
		{"bad CIDR", validPartner, func(u map[string]any) {
			spec(u)["ipWhitelist"] = []any{"10.0.0.0/33"}
		}, "must be an IP address or CIDR"},
		{"not an IP", validPartner, func(u map[string]any) {
			spec(u)["ipWhitelist"] = []any{"not-an-ip"}
		}, "must be an IP address or CIDR"},
		{"unknown environment", validAPIKey, func(u map[string]any) {
			spec(u)["environment"] = "staging"
		}, "Unsupported value"},
		{"unknown key type", validAPIKey, func(u map[string]any) {
			spec(u)["type"] = "password"
		}, "Unsupported value"},
		{"duplicate top-up ids", validWallet, func(u map[string]any) {
			spec(u)["topUps"] = []any{
				map[string]any{"id": "a", "currency": "EUR", "amount": "1.00"},
				map[string]any{"id": "a", "currency": "EUR", "amount": "2.00"},
			}
		}, "Duplicate value"},
		{"zero top-up", validWallet, func(u map[string]any) {
			spec(u)["topUps"] = []any{map[string]any{"id": "a", "currency": "EUR", "amount": "0.00"}}
		}, "amount must be positive"},
		{"negative grace period", validAPIKey, setSpec("previousKeyGracePeriod", "-1s"),
			"previousKeyGracePeriod must be between 0s and 168h"},
		{"grace period over a week", validAPIKey, setSpec("previousKeyGracePeriod", "169h"),
			"previousKeyGracePeriod must be between 0s and 168h"},
		{"grace period not a duration", validAPIKey, setSpec("previousKeyGracePeriod", "soon"),
			"previousKeyGracePeriod"},
		{"zero WalletTopUp", validWalletTopUp, setSpec("amount", "0.000"), "amount must be positive"},
		{"WalletTopUp without id", validWalletTopUp, func(u map[string]any) { delete(spec(u), "id") }, "id"},
		{"WalletTopUp negative amount", validWalletTopUp, setSpec("amount", "-5.00"), "amount"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := decode(t, tc.base)
			u.SetNamespace(ns)
			u.SetName(strings.ToLower(strings.ReplaceAll(strings.ReplaceAll(tc.name, " ", "-"), "_", "-")))
			tc.mutate(u.Object)
			wantInvalid(t, k8s.Create(context.Background(), u), tc.message)
		})
	}
}

const validCatalogShard = `
apiVersion: codeport.dev/v1alpha1
kind: CatalogShard
metadata: {name: s}
spec:
  catalogRef: {name: c}
  products:
  - {productCode: "10000000000001", name: A, countryCode: DE, currencyCode: EUR, price: 100}
`

// TestCurrencyCodes: wherever a resource names a currency, the API server admits the active ISO
// 4217 codes and refuses, naming the field and the code, what the partner API would refuse:
// three capitals ISO never assigned (ERU), placeholders (XXX, XTS), withdrawn codes (DEM) and
// other spellings (eur).
func TestCurrencyCodes(t *testing.T) {
	ns := createNamespace(t)
	dailySpend := func(code string) map[string]any {
		return map[string]any{"limits": map[string]any{"dailySpend": map[string]any{code: int64(5)}}}
	}
	fields := []struct {
		name, base, path string
		set              func(u map[string]any, code string)
	}{
		{"catalog", validCatalog, "spec.products[0].currencyCode",
			func(u map[string]any, code string) { product(u)["currencyCode"] = code }},
		{"shard", validCatalogShard, "spec.products[0].currencyCode",
			func(u map[string]any, code string) { product(u)["currencyCode"] = code }},
		{"partner", validPartner, "spec.ordering.limits.dailySpend",
			func(u map[string]any, code string) { spec(u)["ordering"] = dailySpend(code) }},
		{"partner-production", validPartner, "spec.environments.production.ordering.limits.dailySpend",
			func(u map[string]any, code string) {
				spec(u)["environments"] = map[string]any{"production": map[string]any{"ordering": dailySpend(code)}}
			}},
		{"wallet", validWallet, "spec.topUps[0].currency", func(u map[string]any, code string) {
			spec(u)["topUps"] = []any{map[string]any{"id": "a", "currency": code, "amount": "1.00"}}
		}},
		{"topup", validWalletTopUp, "spec.currency", func(u map[string]any, code string) { spec(u)["currency"] = code }},
	}
	codes := []struct {
		code     string
		accepted bool
	}{
		{"EUR", true}, {"JPY", true}, {"KWD", true}, {"VES", true},
		{"ERU", false}, {"XXX", false}, {"XTS", false}, {"DEM", false}, {"eur", false},
	}
	for _, f := range fields {
		for _, c := range codes {
			t.Run(f.name+"/"+c.code, func(t *testing.T) {
				u := decode(t, f.base)
				u.SetNamespace(ns)
				u.SetName(strings.ToLower(f.name + "-" + c.code))
				f.set(u.Object, c.code)
				err := k8s.Create(context.Background(), u)
				if c.accepted {
					if err != nil {
						t.Fatalf("%s %s refused: %v", f.path, c.code, err)
					}
					return
				}
				wantInvalid(t, err, f.path)
				wantInvalid(t, err, c.code)
				wantInvalid(t, err, "active ISO 4217 currency code")
			})
		}
	}
}

// TestUpdateRejected: transitions the API server must refuse on existing objects.
func TestUpdateRejected(t *testing.T) {
	ns := createNamespace(t)
	cases := []rejection{
		{"ApiKey environment changed", validAPIKey, setSpec("environment", "production"), "environment is immutable"},
		{"ApiKey partnerRef changed", validAPIKey, setSpec("partnerRef", map[string]any{"name": "other"}),
			"partnerRef is immutable"},
		{"ApiKey rotation lowered", validAPIKey, setSpec("rotation", int64(1)), "rotation may only increase"},
		{"Wallet environment changed", validWallet, setSpec("environment", "sandbox"), "environment is immutable"},
		{"Wallet partnerRef changed", validWallet, setSpec("partnerRef", map[string]any{"name": "other"}),
			"partnerRef is immutable"},
		// An applied top-up can never be edited: the ledger entry it became stays as written.
		{"WalletTopUp amount changed", validWalletTopUp, setSpec("amount", "100.00"), "amount is immutable"},
		{"WalletTopUp currency changed", validWalletTopUp, setSpec("currency", "USD"), "currency is immutable"},
		{"WalletTopUp id changed", validWalletTopUp, setSpec("id", "wire-2"), "id is immutable"},
		{"WalletTopUp walletRef changed", validWalletTopUp, setSpec("walletRef", map[string]any{"name": "other"}),
			"walletRef is immutable"},
		{"WalletTopUp note changed", validWalletTopUp, setSpec("note", "another"), "note is immutable"},
		{"WalletTopUp note removed", validWalletTopUp, func(u map[string]any) { delete(spec(u), "note") },
			"note is immutable"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			u := decode(t, tc.base)
			u.SetNamespace(ns)
			u.SetName(fmt.Sprintf("update-%d", i))
			if err := k8s.Create(ctx, u); err != nil {
				t.Fatalf("create: %v", err)
			}
			tc.mutate(u.Object)
			wantInvalid(t, k8s.Update(ctx, u), tc.message)
		})
	}

	// Raising rotation is the supported way to rotate and must be accepted.
	ctx := context.Background()
	u := decode(t, validAPIKey)
	u.SetNamespace(ns)
	u.SetName("rotate-up")
	if err := k8s.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	spec(u.Object)["rotation"] = int64(3)
	if err := k8s.Update(ctx, u); err != nil {
		t.Fatalf("raising rotation rejected: %v", err)
	}
}

func spec(u map[string]any) map[string]any { return u["spec"].(map[string]any) }

// setSpec returns a mutation that sets spec.field to value.
func setSpec(field string, value any) func(u map[string]any) {
	return func(u map[string]any) { spec(u)[field] = value }
}

func product(u map[string]any) map[string]any {
	return spec(u)["products"].([]any)[0].(map[string]any)
}
