package testfixture

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/codeport/codeport/api/v1alpha1"
)

// DefaultNamespace is the namespace of an object built without InNamespace.
const DefaultNamespace = "default"

// MetaOption sets what every kind has; it is an option of each builder.
type MetaOption func(*metav1.ObjectMeta)

// InNamespace puts the object in namespace ns.
func InNamespace(ns string) MetaOption { return func(m *metav1.ObjectMeta) { m.Namespace = ns } }

// Named renames the object, for builders whose name is derived (APIKey, Wallet).
func Named(name string) MetaOption { return func(m *metav1.ObjectMeta) { m.Name = name } }

// WithLabels adds labels to the object.
func WithLabels(labels map[string]string) MetaOption {
	return func(m *metav1.ObjectMeta) {
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		for k, v := range labels {
			m.Labels[k] = v
		}
	}
}

func (o MetaOption) applyPartner(p *v1alpha1.Partner)         { o(&p.ObjectMeta) }
func (o MetaOption) applyCatalog(c *v1alpha1.Catalog)         { o(&c.ObjectMeta) }
func (o MetaOption) applyShard(s *v1alpha1.CatalogShard)      { o(&s.ObjectMeta) }
func (o MetaOption) applyAPIKey(k *v1alpha1.ApiKey)           { o(&k.ObjectMeta) }
func (o MetaOption) applyWallet(w *v1alpha1.Wallet)           { o(&w.ObjectMeta) }
func (o MetaOption) applyWalletTopUp(u *v1alpha1.WalletTopUp) { o(&u.ObjectMeta) }
func objectMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: DefaultNamespace, Name: name}
}
func ptr[T any](v T) *T { return &v }

// PartnerOption changes a Partner built by Partner.
type PartnerOption interface{ applyPartner(*v1alpha1.Partner) }

// PartnerWith is an option that changes the Partner as f does, for what no named option says.
type PartnerWith func(*v1alpha1.Partner)

func (f PartnerWith) applyPartner(p *v1alpha1.Partner) { f(p) }

// Partner is a partner named name with a display name and contact address derived from it, no
// catalog, no allowlist and the default rate limit.
func Partner(name string, opts ...PartnerOption) *v1alpha1.Partner {
	p := &v1alpha1.Partner{ObjectMeta: objectMeta(name),
		Spec: v1alpha1.PartnerSpec{DisplayName: name, ContactEmail: name + "@example.com"}}
	for _, o := range opts {
		o.applyPartner(p)
	}
	return p
}

// WithContact sets the partner's display name and contact address.
func WithContact(displayName, email string) PartnerWith {
	return func(p *v1alpha1.Partner) { p.Spec.DisplayName, p.Spec.ContactEmail = displayName, email }
}

// WithCatalogRef binds the partner to the catalog of its namespace named catalog.
func WithCatalogRef(catalog string) PartnerWith {
	return func(p *v1alpha1.Partner) { p.Spec.CatalogRef = &v1alpha1.LocalObjectReference{Name: catalog} }
}

// WithAllowlist sets the IP addresses and CIDRs the partner's keys are accepted from.
func WithAllowlist(entries ...string) PartnerWith {
	return func(p *v1alpha1.Partner) { p.Spec.IPWhitelist = entries }
}

// WithRateLimit limits the partner to perMinute requests a minute.
func WithRateLimit(perMinute int32) PartnerWith {
	return func(p *v1alpha1.Partner) { p.Spec.RateLimit = &v1alpha1.RateLimitSpec{RequestsPerMinute: perMinute} }
}

// WithOrdering sets the partner's ordering policy.
func WithOrdering(ordering *v1alpha1.OrderingSpec) PartnerWith {
	return func(p *v1alpha1.Partner) { p.Spec.Ordering = ordering }
}

// CatalogOption changes a Catalog built by Catalog.
type CatalogOption interface{ applyCatalog(*v1alpha1.Catalog) }

// CatalogWith is an option that changes the Catalog as f does.
type CatalogWith func(*v1alpha1.Catalog)

func (f CatalogWith) applyCatalog(c *v1alpha1.Catalog) { f(c) }

// Catalog is a catalog named name, valid since an hour ago, with no products and no discount.
func Catalog(name string, opts ...CatalogOption) *v1alpha1.Catalog {
	c := &v1alpha1.Catalog{ObjectMeta: objectMeta(name),
		Spec: v1alpha1.CatalogSpec{ValidFrom: metav1.NewTime(time.Now().Add(-time.Hour))}}
	for _, o := range opts {
		o.applyCatalog(c)
	}
	return c
}

// WithProducts sets the products listed in the catalog's spec.
func WithProducts(products ...v1alpha1.CatalogProduct) CatalogWith {
	return func(c *v1alpha1.Catalog) { c.Spec.Products = products }
}

// WithDiscount sets the catalog's default discount, a percentage such as "5".
func WithDiscount(percentage string) CatalogWith {
	return func(c *v1alpha1.Catalog) { c.Spec.DefaultDiscountPercentage = v1alpha1.Percentage(percentage) }
}

// WithDescription sets the catalog's description and its catalog type id.
func WithDescription(description string, typeID int32) CatalogWith {
	return func(c *v1alpha1.Catalog) { c.Spec.Description, c.Spec.CatalogTypeID = description, typeID }
}

// ProductOption changes a product built by Product.
type ProductOption func(*v1alpha1.CatalogProduct)

// Product is an active fixed-price product of code, 20.00 EUR sold in Germany.
func Product(code string, opts ...ProductOption) v1alpha1.CatalogProduct {
	p := v1alpha1.CatalogProduct{ProductCode: code, Name: "Product " + code, CountryCode: "DE", CurrencyCode: "EUR",
		Price: ptr(int64(2000)), Denomination: v1alpha1.Denomination{Type: v1alpha1.DenominationFixed}, Status: "active"}
	for _, o := range opts {
		o(&p)
	}
	return p
}

// WithPrice sets the product's price in minor units of its currency.
func WithPrice(minor int64) ProductOption {
	return func(p *v1alpha1.CatalogProduct) { p.Price = &minor }
}

// SoldIn sets the country the product is sold in and its currency.
func SoldIn(country, currency string) ProductOption {
	return func(p *v1alpha1.CatalogProduct) {
		p.CountryCode, p.CurrencyCode = country, v1alpha1.CurrencyCode(currency)
	}
}

// WithName sets the product's name and brand.
func WithName(name, brand string) ProductOption {
	return func(p *v1alpha1.CatalogProduct) { p.Name, p.Brand = name, brand }
}

// CatalogShardOption changes a CatalogShard built by CatalogShard.
type CatalogShardOption interface{ applyShard(*v1alpha1.CatalogShard) }

// CatalogShardWith is an option that changes the CatalogShard as f does.
type CatalogShardWith func(*v1alpha1.CatalogShard)

func (f CatalogShardWith) applyShard(s *v1alpha1.CatalogShard) { f(s) }

// CatalogShard is a shard named name of the catalog of its namespace named catalog, listing
// products.
func CatalogShard(
	name, catalog string, products []v1alpha1.CatalogProduct, opts ...CatalogShardOption,
) *v1alpha1.CatalogShard {
	s := &v1alpha1.CatalogShard{ObjectMeta: objectMeta(name), Spec: v1alpha1.CatalogShardSpec{
		CatalogRef: v1alpha1.LocalObjectReference{Name: catalog}, Products: products}}
	for _, o := range opts {
		o.applyShard(s)
	}
	return s
}

// APIKeyOption changes an ApiKey built by APIKey.
type APIKeyOption interface{ applyAPIKey(*v1alpha1.ApiKey) }

// APIKeyWith is an option that changes the ApiKey as f does.
type APIKeyWith func(*v1alpha1.ApiKey)

func (f APIKeyWith) applyAPIKey(k *v1alpha1.ApiKey) { f(k) }

// APIKey is an API key (x-api-key) of partner in environment, named partner-environment, whose
// Secret is named after it with the suffix -key.
func APIKey(partner, environment string, opts ...APIKeyOption) *v1alpha1.ApiKey {
	k := &v1alpha1.ApiKey{ObjectMeta: objectMeta(partner + "-" + environment), Spec: v1alpha1.ApiKeySpec{
		PartnerRef: v1alpha1.LocalObjectReference{Name: partner}, Environment: v1alpha1.Environment(environment),
		Type: v1alpha1.ApiKeyTypeAPIKey}}
	for _, o := range opts {
		o.applyAPIKey(k)
	}
	if k.Spec.SecretName == "" {
		k.Spec.SecretName = k.Name + "-key"
	}
	return k
}

// OfType sets the kind of key: an API key or a bearer token.
func OfType(kind v1alpha1.ApiKeyType) APIKeyWith {
	return func(k *v1alpha1.ApiKey) { k.Spec.Type = kind }
}

// WithSecretName names the Secret the key is written to.
func WithSecretName(name string) APIKeyWith {
	return func(k *v1alpha1.ApiKey) { k.Spec.SecretName = name }
}

// WalletOption changes a Wallet built by Wallet.
type WalletOption interface{ applyWallet(*v1alpha1.Wallet) }

// WalletWith is an option that changes the Wallet as f does.
type WalletWith func(*v1alpha1.Wallet)

func (f WalletWith) applyWallet(w *v1alpha1.Wallet) { f(w) }

// Wallet is the empty wallet of partner in environment, named partner-environment.
func Wallet(partner, environment string, opts ...WalletOption) *v1alpha1.Wallet {
	w := &v1alpha1.Wallet{ObjectMeta: objectMeta(partner + "-" + environment), Spec: v1alpha1.WalletSpec{
		PartnerRef: v1alpha1.LocalObjectReference{Name: partner}, Environment: v1alpha1.Environment(environment)}}
	for _, o := range opts {
		o.applyWallet(w)
	}
	return w
}

// WithTopUps lists top-ups in the wallet's spec.
func WithTopUps(topUps ...v1alpha1.TopUp) WalletWith {
	return func(w *v1alpha1.Wallet) { w.Spec.TopUps = topUps }
}

// WithThreshold sets the balance below which the wallet is low, in major units ("10.00").
func WithThreshold(threshold string) WalletWith {
	return func(w *v1alpha1.Wallet) { w.Spec.LowBalanceThreshold = threshold }
}

// TopUp is a top-up of amount (major units, "100.00") in currency, identified by id.
func TopUp(id, currency, amount string) v1alpha1.TopUp {
	return v1alpha1.TopUp{ID: id, Currency: v1alpha1.CurrencyCode(currency), Amount: amount}
}

// WalletTopUpOption changes a WalletTopUp built by WalletTopUp.
type WalletTopUpOption interface{ applyWalletTopUp(*v1alpha1.WalletTopUp) }

// WalletTopUp is a top-up object of wallet, named after wallet and id.
func WalletTopUp(wallet string, topUp v1alpha1.TopUp, opts ...WalletTopUpOption) *v1alpha1.WalletTopUp {
	u := &v1alpha1.WalletTopUp{ObjectMeta: objectMeta(wallet + "-" + topUp.ID), Spec: v1alpha1.WalletTopUpSpec{
		WalletRef: v1alpha1.LocalObjectReference{Name: wallet}, ID: topUp.ID, Currency: topUp.Currency,
		Amount: topUp.Amount, Note: topUp.Note}}
	for _, o := range opts {
		o.applyWalletTopUp(u)
	}
	return u
}
