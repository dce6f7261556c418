package kubectlplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/test/contracttest"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// tenant is a partner onboarded through the operator: acme with a catalog of two products
// (no stock), a sandbox API key, a sandbox bearer token and a sandbox wallet.
type tenant struct {
	ns          string
	key, bearer string
}

func onboard(t *testing.T, suffix string) tenant {
	t.Helper()
	ns := namespace(t, suffix)
	in := testfixture.InNamespace(ns)
	create(t, testfixture.Catalog("eu", in, testfixture.WithProducts(testfixture.Product("10000000000001"),
		testfixture.Product("10000000000002"))))
	create(t, testfixture.Partner("acme", in, testfixture.WithCatalogRef("eu"), testfixture.WithAllowlist("127.0.0.1/32")))
	create(t, testfixture.APIKey("acme", "sandbox", in))
	create(t, testfixture.APIKey("acme", "sandbox", in, testfixture.Named("acme-sandbox-v1"),
		testfixture.OfType(v1alpha1.ApiKeyTypeBearerToken)))
	create(t, testfixture.Wallet("acme", "sandbox", in))
	tn := tenant{ns: ns, key: secretKey(t, ns, "acme-sandbox-key"), bearer: secretKey(t, ns, "acme-sandbox-v1-key")}
	waitReady(t, ns, "acme-sandbox", &v1alpha1.Wallet{})
	return tn
}

// secretKey waits for the operator to write an ApiKey's Secret and returns the key in it.
func secretKey(t *testing.T, ns, name string) string {
	t.Helper()
	var s corev1.Secret
	poll.Until(t, timeout, "key Secret "+name, func() (bool, string) {
		err := suite.cluster.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s)
		return err == nil && len(s.Data["apiKey"]) > 0, fmt.Sprint(err)
	})
	return string(s.Data["apiKey"])
}

func conditionsOf(obj client.Object) []metav1.Condition {
	switch o := obj.(type) {
	case *v1alpha1.Wallet:
		return o.Status.Conditions
	case *v1alpha1.ApiKey:
		return o.Status.Conditions
	case *v1alpha1.Partner:
		return o.Status.Conditions
	case *v1alpha1.Catalog:
		return o.Status.Conditions
	case *v1alpha1.WalletTopUp:
		return o.Status.Conditions
	}
	return nil
}

func waitReady(t *testing.T, ns, name string, obj client.Object) {
	t.Helper()
	poll.Until(t, timeout, fmt.Sprintf("%T %s Ready", obj, name), func() (bool, string) {
		get(t, ns, name, obj)
		ready, reason, message := readiness(conditionsOf(obj), obj.GetGeneration())
		return ready == "True", reason + ": " + message
	})
}

// TestTopUpRefusals: a top-up the operator would refuse, of a wallet that does not exist, or
// under an id the wallet already has (applied, pending, or in its spec.topUps) is refused and
// creates nothing.
func TestTopUpRefusals(t *testing.T) {
	tn := onboard(t, "")
	in := testfixture.InNamespace(tn.ns)
	ctx := context.Background()
	// An applied top-up, and a pending one: the wallet of a partner that does not exist is never
	// in service, so its top-up waits.
	applied, err := CreateTopUp(ctx, suite.cluster.client, TopUpRequest{Namespace: tn.ns, Wallet: "acme-sandbox",
		ID: "wire-1", Currency: "EUR", Amount: "10.00", MaxTopUp: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if err := WaitTopUp(ctx, suite.cluster.client, applied, timeout); err != nil {
		t.Fatal(err)
	}
	create(t, testfixture.Wallet("ghost", "sandbox", in,
		testfixture.WithTopUps(testfixture.TopUp("in-spec", "EUR", "1.00"))))
	create(t, testfixture.WalletTopUp("ghost-sandbox", testfixture.TopUp("wire-2", "EUR", "5.00"), in))

	cases := []struct {
		name                                  string
		wallet, id, currency, amount, refusal string
	}{
		{"too many decimals", "acme-sandbox", "t1", "EUR", "1.005", "more than 2 decimal places"},
		{"zero", "acme-sandbox", "t2", "EUR", "0.00", "must be positive"},
		{"negative", "acme-sandbox", "t3", "EUR", "-5", "must be positive"},
		{"not a number", "acme-sandbox", "t4", "EUR", "ten", "invalid amount"},
		{"yen with decimals", "acme-sandbox", "t5", "JPY", "0.5", "more than 0 decimal places"},
		{"withdrawn currency", "acme-sandbox", "t6", "DEM", "10.00", "not an active ISO 4217"},
		{"lower-case currency", "acme-sandbox", "t7", "eur", "10.00", "not an active ISO 4217"},
		{"above the operator's limit", "acme-sandbox", "t8", "EUR", "1000.01", "above the largest top-up, 1000 EUR"},
		{"unknown wallet", "nobody-sandbox", "t9", "EUR", "10.00", "wallet " + tn.ns + "/nobody-sandbox not found"},
		{"id already applied", "acme-sandbox", "wire-1", "EUR", "10.00",
			"already taken by WalletTopUp acme-sandbox-wire-1 (10.00 EUR, applied)"},
		{"id pending", "ghost-sandbox", "wire-2", "EUR", "5.00",
			"already taken by WalletTopUp ghost-sandbox-wire-2 (5.00 EUR, pending, not applied yet)"},
		{"id in the wallet's spec", "ghost-sandbox", "in-spec", "EUR", "1.00",
			`top-up id "in-spec" is already in wallet ghost-sandbox's spec.topUps`},
		{"empty id", "acme-sandbox", "", "EUR", "1.00", "a top-up id is 1 to 128 characters"},
	}
	var before v1alpha1.WalletTopUpList
	if err := suite.cluster.client.List(ctx, &before, client.InNamespace(tn.ns)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CreateTopUp(ctx, suite.cluster.client, TopUpRequest{Namespace: tn.ns, Wallet: tc.wallet,
				ID: tc.id, Currency: tc.currency, Amount: tc.amount, MaxTopUp: 1000})
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.refusal) {
				t.Fatalf("got %v; want a refusal saying %q", err, tc.refusal)
			}
		})
	}
	var after v1alpha1.WalletTopUpList
	if err := suite.cluster.client.List(ctx, &after, client.InNamespace(tn.ns)); err != nil {
		t.Fatal(err)
	}
	if len(after.Items) != len(before.Items) {
		t.Fatalf("refusals created WalletTopUps: %d before, %d after", len(before.Items), len(after.Items))
	}
	// The command says the same, and exits with the refusal.
	out, err := kubectl(t, tn.ns, "topup", "acme-sandbox", "--currency", "EUR", "--amount", "1.005")
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "more than 2 decimal places") {
		t.Fatalf("topup 1.005 EUR: %v\n%s", err, out)
	}
}

// TestTopUpCommand: a top-up with a fresh id is created, applied by the operator, and shows in
// the wallet's balance; a second one gets another id and adds up.
func TestTopUpCommand(t *testing.T) {
	tn := onboard(t, "")
	for range 2 {
		out, err := kubectl(t, tn.ns, "topup", "acme-sandbox", "--currency", "EUR", "--amount", "100.00",
			"--note", "wire from acme")
		if err != nil {
			t.Fatalf("topup: %v\n%s", err, out)
		}
		if !strings.Contains(out, "applied at") {
			t.Fatalf("topup did not report the credit applied:\n%s", out)
		}
	}
	var w v1alpha1.Wallet
	poll.Until(t, timeout, "balance", func() (bool, string) {
		get(t, tn.ns, "acme-sandbox", &w)
		return w.Status.Balances["EUR"] == "200.00", fmt.Sprint(w.Status.Balances)
	})
	var topUps v1alpha1.WalletTopUpList
	if err := suite.cluster.client.List(context.Background(), &topUps, client.InNamespace(tn.ns)); err != nil {
		t.Fatal(err)
	}
	if len(topUps.Items) != 2 || topUps.Items[0].Spec.ID == topUps.Items[1].Spec.ID ||
		topUps.Items[0].Spec.Note != "wire from acme" {
		t.Fatalf("want two top-ups with distinct ids and the note, got %+v", topUps.Items)
	}
}

// TestRotate: a rotation raises spec.rotation, sets the grace period, waits for the new key and
// prints its prefix; an ApiKey that does not exist is refused.
func TestRotate(t *testing.T) {
	tn := onboard(t, "")
	var k v1alpha1.ApiKey
	waitReady(t, tn.ns, "acme-sandbox", &k)
	oldPrefix := k.Status.KeyPrefix
	create(t, testfixture.Wallet("acme", "production", testfixture.InNamespace(tn.ns)))

	cases := []struct {
		name, apiKey, refusal string
	}{
		{"no such ApiKey", "nobody-sandbox", "apikey " + tn.ns + "/nobody-sandbox not found"},
		{"a Wallet, not an ApiKey", "acme-production", "apikey " + tn.ns + "/acme-production not found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := kubectl(t, tn.ns, "rotate", tc.apiKey)
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.refusal) {
				t.Fatalf("got %v; want a refusal saying %q\n%s", err, tc.refusal, out)
			}
		})
	}

	out, err := kubectl(t, tn.ns, "rotate", "acme-sandbox", "--grace", "10m")
	if err != nil {
		t.Fatalf("rotate: %v\n%s", err, out)
	}
	get(t, tn.ns, "acme-sandbox", &k)
	if k.Spec.Rotation != 1 || k.Status.Rotation != 1 || k.Spec.PreviousKeyGracePeriod == nil ||
		k.Spec.PreviousKeyGracePeriod.Duration != 10*time.Minute {
		t.Fatalf("spec %+v status %+v", k.Spec, k.Status)
	}
	if k.Status.KeyPrefix == oldPrefix || k.Status.PreviousKeyPrefix != oldPrefix {
		t.Fatalf("prefixes: was %s, now %s, previous %s", oldPrefix, k.Status.KeyPrefix, k.Status.PreviousKeyPrefix)
	}
	want := fmt.Sprintf("rotated: new key %s (rotation 1", k.Status.KeyPrefix)
	if !strings.Contains(out, want) || !strings.Contains(out, "previous key "+oldPrefix+" valid until") {
		t.Fatalf("rotate printed:\n%s\nwant %q and the previous key's end", out, want)
	}
	newKey := secretKey(t, tn.ns, "acme-sandbox-key")
	if newKey == tn.key || !strings.HasPrefix(newKey, k.Status.KeyPrefix) {
		t.Fatalf("the Secret holds %s, status says %s", newKey[:12], k.Status.KeyPrefix)
	}
}

// TestStatus: the screen shows the partner, its keys by prefix, the wallet's balance, the
// catalog's stock, and everything not Ready with its reason and message; -o json says the same.
func TestStatus(t *testing.T) {
	tn := onboard(t, "")
	in := testfixture.InNamespace(tn.ns)
	if _, err := kubectl(t, tn.ns, "topup", "acme-sandbox", "--currency", "EUR", "--amount", "42.50"); err != nil {
		t.Fatal(err)
	}
	// Not Ready: a wallet of a partner that does not exist, a top-up the operator refuses.
	create(t, testfixture.Wallet("ghost", "sandbox", in))
	create(t, testfixture.WalletTopUp("acme-sandbox", testfixture.TopUp("huge", "EUR", "2000000.00"), in))
	var k v1alpha1.ApiKey
	waitReady(t, tn.ns, "acme-sandbox", &k)

	var st *Status
	poll.Until(t, timeout, "status settled", func() (bool, string) {
		var err error
		st, err = collectStatus(context.Background(), suite.cluster.client, tn.ns)
		if err != nil {
			t.Fatal(err)
		}
		ns := st.Namespaces[0]
		counted := len(ns.Catalogs) == 1 && ns.Catalogs[0].Counted
		return counted && len(ns.NotReady) == 2 && len(ns.Wallets) == 2 && ns.Wallets[0].Balances["EUR"] == "42.50",
			fmt.Sprintf("%+v", ns)
	})
	out, err := kubectl(t, tn.ns, "status")
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	for _, want := range []string{
		"NAMESPACE " + tn.ns,
		"PARTNERS", "acme", "eu",
		"API KEYS", k.Status.KeyPrefix, "bearerToken",
		"WALLETS", "EUR 42.50",
		"CATALOGS", "2 (<", "10000000000001:0",
		"NOT READY",
		"Wallet       ghost-sandbox", "PartnerNotFound",
		"WalletTopUp  acme-sandbox-huge", "InvalidTopUp", "above the largest top-up",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	out, err = kubectl(t, tn.ns, "status", "-o", "json")
	if err != nil {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
	var decoded Status
	if err := json.Unmarshal([]byte(out), &decoded); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
	ns := decoded.Namespaces[0]
	if ns.Catalogs[0].OutOfStock != 2 || ns.APIKeys[0].Prefix != k.Status.KeyPrefix || len(ns.NotReady) != 2 {
		t.Fatalf("status -o json: %+v", ns)
	}
	_, err = kubectl(t, tn.ns, "status", "-o", "wide")
	if err == nil || !strings.Contains(err.Error(), "use json or yaml") {
		t.Fatalf("status -o wide: %v", err)
	}
}

// servedDocuments are the sandbox API's OpenAPI documents, parsed once for the package's tests.
var servedDocuments = contracttest.NewDocuments()

// order places a sandbox order with key and returns its codes once it completed.
func order(t *testing.T, key, reference string) []string {
	t.Helper()
	body := fmt.Sprintf(`{"externalOrderCode":%q,"currency":"EUR",`+
		`"orderProducts":[{"productCode":"10000000000001","quantity":2}]}`, reference)
	req, _ := http.NewRequest(http.MethodPost, suite.sandboxURL+"/orders", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", key)
	api := servedDocuments.Contracts().Wrap(t, &http.Client{Timeout: 30 * time.Second})
	resp, err := api.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("order: %d", resp.StatusCode)
	}
	var codes []string
	poll.Until(t, timeout, "order completed", func() (bool, string) {
		req, _ := http.NewRequest(http.MethodGet, suite.sandboxURL+"/orders/"+reference, http.NoBody)
		req.Header.Set("x-api-key", key)
		resp, err := api.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var o struct {
			Status   string `json:"status"`
			Products []struct {
				Codes []struct {
					Code string `json:"code"`
				} `json:"codes"`
			} `json:"products"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&o)
		codes = codes[:0]
		for _, p := range o.Products {
			for _, c := range p.Codes {
				codes = append(codes, c.Code)
			}
		}
		return o.Status == "completed" && len(codes) == 2, fmt.Sprintf("%+v", o)
	})
	return codes
}
