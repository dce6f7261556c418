package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/tenancy"
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
	t := &tenants{database: database, db: db, prov: provisioning.New(db, nil)}
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
	cat := &v1alpha1.Catalog{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "main"},
		Spec: v1alpha1.CatalogSpec{ValidFrom: metav1.NewTime(time.Now().Add(-time.Hour)), DefaultDiscountPercentage: "5"}}
	res, err := t.prov.ApplyCatalog(ctx, cat, items)
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	if len(res.Invalid) > 0 {
		return fmt.Errorf("catalog: invalid products %v", res.Invalid)
	}
	t.keys = make([]string, 0, partners)
	for i := range partners {
		name := partnerName(i)
		p := &v1alpha1.Partner{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec: v1alpha1.PartnerSpec{
				DisplayName:  "Bench",
				ContactEmail: "bench@example.com",
				CatalogRef:   &v1alpha1.LocalObjectReference{Name: "main"},
				AccessPolicy: v1alpha1.AccessPolicy{
					IPWhitelist: []string{"127.0.0.1"},
					RateLimit:   &v1alpha1.RateLimitSpec{RequestsPerMinute: 100_000_000},
				},
			},
		}
		if _, err := t.prov.ApplyPartner(ctx, p, &res.ID, nil); err != nil {
			return fmt.Errorf("partner %s: %w", name, err)
		}
		key, err := t.addKey(ctx, name, string(tenancy.Production))
		if err != nil {
			return err
		}
		t.keys = append(t.keys, key)
		if i < funded {
			if err := t.fund(ctx, name, string(tenancy.Production)); err != nil {
				return err
			}
		}
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
	key, err := auth.GenerateKey(environment)
	if err != nil {
		return "", fmt.Errorf("generate key: %w", err)
	}
	if _, err := t.prov.RegisterKey(ctx, provisioning.Key{Namespace: namespace, Partner: partner, Environment: environment,
		Kind: "apiKey", Source: namespace + "/" + partner + "-" + environment, Plaintext: key}); err != nil {
		return "", fmt.Errorf("key of %s: %w", partner, err)
	}
	return key, nil
}

// fund tops a partner's wallet in environment up with more than any run spends.
func (t *tenants) fund(ctx context.Context, partner, environment string) error {
	w := &v1alpha1.Wallet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: partner + "-" + environment},
		Spec: v1alpha1.WalletSpec{
			PartnerRef:  v1alpha1.LocalObjectReference{Name: partner},
			Environment: v1alpha1.Environment(environment),
			TopUps:      []v1alpha1.TopUp{{ID: "bench", Currency: "EUR", Amount: "100000000.00"}},
		},
	}
	if _, err := t.prov.ApplyWallet(ctx, w); err != nil {
		return fmt.Errorf("wallet of %s: %w", partner, err)
	}
	return nil
}
