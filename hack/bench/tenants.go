package main

import (
	"context"
	"fmt"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/tenancy"
	"github.com/codeport/codeport/internal/test/testfixture"
)

const (
	namespace = "bench"
	// orderProduct is ordered by B3; its unit price is 20.00 EUR less the catalog's 5% discount.
	orderProduct   = "10000000000042"
	orderUnitPrice = 1900
)

// tenants is a provisioned tenant set in its own database.
type tenants struct {
	database *storetest.Database
	db       *store.DB
	prov     *provisioning.Provisioner
	// keys are the production keys of every partner, in partner order.
	keys []string
}

func (t *tenants) close() {
	t.db.Close()
	_ = t.database.Drop(context.Background())
}

// newTenants creates a database and provisions, the way the operator would, a catalog of
// products and partners on it, each with a production key; the first funded partners also get
// a production wallet.
func newTenants(ctx context.Context, partners, products, funded int) (*tenants, error) {
	database, err := storetest.Create(ctx, "bench", true)
	if err != nil {
		return nil, fmt.Errorf("bench database: %w", err)
	}
	db, err := store.Open(ctx, database.URL, store.Options{})
	if err != nil {
		_ = database.Drop(ctx)
		return nil, err
	}
	prov, err := testfixture.NewProvisioner(db, nil)
	if err != nil {
		db.Close()
		_ = database.Drop(ctx)
		return nil, err
	}
	t := &tenants{database: database, db: db, prov: prov}
	if err := t.provision(ctx, partners, products, funded); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

func (t *tenants) provision(ctx context.Context, partners, products, funded int) error {
	items := make([]v1alpha1.CatalogProduct, products)
	for i := range items {
		items[i] = benchProduct(i)
	}
	cat := testfixture.Catalog("main", testfixture.InNamespace(namespace), testfixture.WithDiscount("5"))
	res, err := t.prov.ApplyCatalog(ctx, cat, items)
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	if len(res.Invalid) > 0 {
		return fmt.Errorf("catalog: invalid products %v", res.Invalid)
	}
	production := string(tenancy.Production)
	t.keys = make([]string, 0, partners)
	for i := range partners {
		opts := []testfixture.OnboardOption{testfixture.WithKeys(testfixture.APIKeyIn(production))}
		if i < funded {
			opts = append(opts, fund(production))
		}
		tn, err := testfixture.Onboard(ctx, t.prov, testfixture.Partner(partnerName(i), testfixture.InNamespace(namespace),
			testfixture.WithContact("Bench", "bench@example.com"), testfixture.WithCatalogRef("main"),
			testfixture.WithAllowlist("127.0.0.1"), testfixture.WithRateLimit(100_000_000)), opts...)
		if err != nil {
			return err
		}
		t.keys = append(t.keys, tn.Keys[production])
	}
	return nil
}

// benchProduct is the i-th product of the bench catalogs: productCode 1 followed by i in 13
// digits, 20.00 EUR, one of 20 brands, 3 countries and 7 tags (what B1's filters select).
func benchProduct(i int) v1alpha1.CatalogProduct {
	price := int64(2000)
	return v1alpha1.CatalogProduct{
		ProductCode:  fmt.Sprintf("1%013d", i),
		Name:         fmt.Sprintf("Product %d", i),
		Brand:        fmt.Sprintf("brand-%d", i%20),
		CountryCode:  []string{"DE", "GB", "FR"}[i%3],
		CurrencyCode: "EUR",
		Price:        &price,
		Denomination: v1alpha1.Denomination{Type: v1alpha1.DenominationFixed},
		MainCategory: "Gaming",
		Tags:         []string{"gaming", fmt.Sprintf("t%d", i%7)},
		Status:       "active",
		Languages:    []v1alpha1.ProductLanguage{{LanguageCode: "en", Name: "English"}},
	}
}

// realisticProduct is benchProduct with what a distributor's feed carries besides: barcode,
// short name, image, publisher, RRP, the category path, platform, two localisations with a
// description and redemption instructions, and an expiry policy, as config/samples' products.
func realisticProduct(i int) v1alpha1.CatalogProduct {
	p := benchProduct(i)
	rrp := *p.Price + 100
	p.EAN = fmt.Sprintf("59%011d", i)
	p.Name = fmt.Sprintf("Acme Game Credit %d EUR (edition %d)", 5+i%20*5, i)
	p.ShortName = fmt.Sprintf("Credit %d", 5+i%20*5)
	p.Image = fmt.Sprintf("https://img.acme.example/products/%d/credit-%d.png", i, 5+i%20*5)
	p.Publisher = "Acme Interactive"
	p.RRP = &rrp
	p.SubCategory, p.ProductCategory, p.ProductType, p.Platform = "Wallet", "Credit", "Digital Code", "PC"
	p.Languages = []v1alpha1.ProductLanguage{
		{LanguageCode: "de", Name: "Deutsch", Description: "Guthaben für den Acme Store, für Spiele, Erweiterungen " +
			"und In-Game-Inhalte.", RedemptionInstructions: "Code unter acme.example/redeem einlösen."},
		{LanguageCode: "en", Name: "English", Description: "Credit for the Acme store, for games, expansions and " +
			"in-game content.", RedemptionInstructions: "Redeem at acme.example/redeem."},
	}
	p.ExpiryPolicy = "Does not expire"
	return p
}

func partnerName(i int) string { return fmt.Sprintf("p%05d", i) }

// addKey registers a new key of a partner's account in environment and returns its plaintext.
func (t *tenants) addKey(ctx context.Context, partner, environment string) (string, error) {
	return testfixture.IssueKey(ctx, t.prov, namespace, partner, testfixture.APIKeyIn(environment))
}

// benchTopUp credits a wallet with more than any run spends.
func benchTopUp() v1alpha1.TopUp { return testfixture.TopUp("bench", "EUR", "1000000.00") }

// fund is the onboarding of a funded wallet of environment.
func fund(environment string) testfixture.OnboardOption {
	return testfixture.WithBalance(environment, "", benchTopUp())
}

// fund tops a partner's wallet in environment up with more than any run spends.
func (t *tenants) fund(ctx context.Context, partner, environment string) error {
	w := testfixture.Wallet(partner, environment, testfixture.InNamespace(namespace), testfixture.WithTopUps(benchTopUp()))
	if _, err := t.prov.ApplyWallet(ctx, w); err != nil {
		return fmt.Errorf("wallet of %s: %w", partner, err)
	}
	return nil
}
