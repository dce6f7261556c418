package testfixture_test

import (
	"context"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/config/crd"
	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/crdvalidation"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/tenancy"
	fx "github.com/codeport/codeport/internal/test/testfixture"
)

// TestBuiltObjectsPassValidation: what the builders return, with their defaults and with each
// option, is admitted as a cluster serving the CRDs admits a create.
func TestBuiltObjectsPassValidation(t *testing.T) {
	crds, err := crd.Definitions()
	if err != nil {
		t.Fatal(err)
	}
	v, err := crdvalidation.New(crds)
	if err != nil {
		t.Fatal(err)
	}
	products := []v1alpha1.CatalogProduct{fx.Product("10000000000001"),
		fx.Product("10000000000002", fx.WithPrice(500), fx.SoldIn("JP", "JPY"), fx.WithName("Credit", "Acme"))}
	objects := map[string]client.Object{
		"Partner": fx.Partner("acme"),
		"Partner with options": fx.Partner("acme", fx.InNamespace("partners"), fx.WithCatalogRef("eu"),
			fx.WithAllowlist("127.0.0.1", "10.0.0.0/8"), fx.WithRateLimit(60), fx.WithContact("Acme", "ops@acme.example"),
			fx.WithOrdering(&v1alpha1.OrderingSpec{Enabled: new(bool)}), fx.WithLabels(map[string]string{"team": "a"})),
		"Catalog": fx.Catalog("eu"),
		"Catalog with options": fx.Catalog("eu", fx.WithProducts(products...), fx.WithDiscount("5"),
			fx.WithDescription("EU", 1)),
		"CatalogShard":  fx.CatalogShard("eu-1", "eu", products),
		"ApiKey":        fx.APIKey("acme", "sandbox"),
		"ApiKey bearer": fx.APIKey("acme", "production", fx.OfType(v1alpha1.ApiKeyTypeBearerToken), fx.Named("tok")),
		"Wallet":        fx.Wallet("acme", "production"),
		"Wallet with top-ups": fx.Wallet("acme", "sandbox", fx.WithThreshold("10.00"),
			fx.WithTopUps(fx.TopUp("t1", "EUR", "100.00"))),
		"WalletTopUp": fx.WalletTopUp("acme-production", fx.TopUp("t2", "USD", "5")),
	}
	for name, obj := range objects {
		t.Run(name, func(t *testing.T) {
			kind := obj.GetObjectKind()
			kind.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(kindOf(obj)))
			// Through JSON, as a client sends it: the types' own encodings (Percentage) apply.
			data, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(data); err != nil {
				t.Fatal(err)
			}
			if _, err := v.Create(context.Background(), u); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
}

func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *v1alpha1.Partner:
		return "Partner"
	case *v1alpha1.Catalog:
		return "Catalog"
	case *v1alpha1.CatalogShard:
		return "CatalogShard"
	case *v1alpha1.ApiKey:
		return "ApiKey"
	case *v1alpha1.Wallet:
		return "Wallet"
	case *v1alpha1.WalletTopUp:
		return "WalletTopUp"
	}
	panic("unknown kind")
}

// TestOnboard: the keys Onboard returns are accepted in their environments for the accounts it
// returns, the catalog is bound and the wallet holds its top-ups.
func TestOnboard(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t, store.Options{MaxConns: 4})
	prov := fx.Provisioner(t, db, nil)
	tn, err := fx.Onboard(ctx, prov, fx.Partner("acme", fx.InNamespace("partners")),
		fx.WithCatalog(fx.Catalog("eu", fx.InNamespace("partners")), fx.Product("10000000000001")),
		fx.WithKeys(fx.APIKeyIn("sandbox"), fx.BearerTokenIn("production")),
		fx.WithBalance("production", "1.00", fx.TopUp("t1", "EUR", "100.00")))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		slot, env string
		kind      tenancy.KeyKind
	}{
		{"sandbox", "sandbox", "apiKey"}, {"bearer:production", "production", "bearerToken"},
	} {
		p, err := auth.NewDirectory(db, c.env).Lookup(ctx, tn.Keys[c.slot], c.kind)
		if err != nil {
			t.Fatalf("%s key: %v", c.slot, err)
		}
		if p.Account.ID != tn.Account(c.env) || p.Account.CatalogID == nil || *p.Account.CatalogID != *tn.Catalog {
			t.Fatalf("%s key resolves to %+v, want account %s with catalog %s", c.slot, p.Account, tn.Account(c.env), tn.Catalog)
		}
	}
	if len(tn.Keys) != 2 {
		t.Fatalf("keys: %v", tn.Keys)
	}
	state, err := prov.WalletState(ctx, "partners", "acme", "production")
	if err != nil || state.Balances["EUR"] != "100.00" {
		t.Fatalf("wallet: %+v %v", state, err)
	}

	// A second partner bound by catalogRef to the catalog already there, with the default keys.
	other, err := fx.Onboard(ctx, prov, fx.Partner("other", fx.InNamespace("partners"), fx.WithCatalogRef("eu")))
	if err != nil {
		t.Fatal(err)
	}
	if *other.Catalog != *tn.Catalog || other.Keys["sandbox"] == "" || other.Keys["production"] == "" {
		t.Fatalf("second partner: %+v", other)
	}
}
