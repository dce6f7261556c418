package testfixture

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/tenancy"
)

// Key is a key Onboard issues: its environment and kind.
type Key struct {
	Environment string
	Kind        tenancy.KeyKind
}

// Slot is where Tenant.Keys holds the key: the environment for an API key, "bearer:" and the
// environment for a bearer token.
func (k Key) Slot() string {
	if k.Kind == tenancy.BearerToken {
		return "bearer:" + k.Environment
	}
	return k.Environment
}

// APIKeyIn is an API key (x-api-key) of environment.
func APIKeyIn(environment string) Key { return Key{Environment: environment, Kind: tenancy.APIKey} }

// BearerTokenIn is a bearer token of environment.
func BearerTokenIn(environment string) Key {
	return Key{Environment: environment, Kind: tenancy.BearerToken}
}

// Tenant is an onboarded partner: its accounts and the plaintext of its keys.
type Tenant struct {
	Namespace, Name string
	// PartnerID is the partner's row; Accounts its account of each environment.
	PartnerID uuid.UUID
	Accounts  map[string]uuid.UUID
	// Catalog is the partner's catalog, nil without one.
	Catalog *uuid.UUID
	// Keys holds each key by Key.Slot.
	Keys map[string]string
	// Wallets are the results of the wallets onboarding applied, by environment.
	Wallets map[string]provisioning.WalletResult
}

// Account is the tenant's account of environment.
func (t *Tenant) Account(environment string) uuid.UUID { return t.Accounts[environment] }

type onboarding struct {
	catalog  *v1alpha1.Catalog
	products []v1alpha1.CatalogProduct
	webhooks provisioning.Webhooks
	keys     []Key
	wallets  []balance
}

// balance is a wallet Onboard applies.
type balance struct {
	environment, threshold string
	topUps                 []v1alpha1.TopUp
}

// OnboardOption says what Onboard provisions besides the partner.
type OnboardOption func(*onboarding)

// WithCatalog provisions catalog (of the partner's namespace) with products first and binds the
// partner to it unless its catalogRef names another; without it the partner's catalogRef, if
// any, names a catalog already provisioned.
func WithCatalog(catalog *v1alpha1.Catalog, products ...v1alpha1.CatalogProduct) OnboardOption {
	return func(o *onboarding) { o.catalog, o.products = catalog, products }
}

// WithWebhooks gives the partner webhook endpoints, as the reconciler resolves them.
func WithWebhooks(webhooks provisioning.Webhooks) OnboardOption {
	return func(o *onboarding) { o.webhooks = webhooks }
}

// WithKeys issues keys instead of the default API key of each environment; with none, no key.
func WithKeys(keys ...Key) OnboardOption {
	return func(o *onboarding) { o.keys = keys }
}

// WithBalance applies the partner's wallet of environment with topUps, low below threshold
// ("" for none).
func WithBalance(environment, threshold string, topUps ...v1alpha1.TopUp) OnboardOption {
	return func(o *onboarding) { o.wallets = append(o.wallets, balance{environment, threshold, topUps}) }
}

// Onboard provisions partner through prov as the operator's reconcilers do (its catalog, the
// partner, its keys and its wallets, as the options say) and returns its accounts and the
// plaintext of its keys. Without WithKeys it issues an API key in each environment.
func Onboard(
	ctx context.Context, prov *provisioning.Provisioner, partner *v1alpha1.Partner, opts ...OnboardOption,
) (*Tenant, error) {
	o := onboarding{}
	for _, env := range provisioning.Environments() {
		o.keys = append(o.keys, APIKeyIn(env))
	}
	for _, opt := range opts {
		opt(&o)
	}
	ns, name := partner.Namespace, partner.Name
	t := &Tenant{Namespace: ns, Name: name, Keys: map[string]string{}, Wallets: map[string]provisioning.WalletResult{}}
	switch {
	case o.catalog != nil:
		res, err := prov.ApplyCatalog(ctx, o.catalog, o.products)
		if err != nil {
			return nil, fmt.Errorf("catalog %s/%s: %w", ns, o.catalog.Name, err)
		}
		if len(res.Invalid) > 0 {
			return nil, fmt.Errorf("catalog %s/%s: invalid products %v", ns, o.catalog.Name, res.Invalid)
		}
		if partner.Spec.CatalogRef == nil {
			partner.Spec.CatalogRef = &v1alpha1.LocalObjectReference{Name: o.catalog.Name}
		}
		t.Catalog = &res.ID
	case partner.Spec.CatalogRef != nil:
		id, err := prov.CatalogID(ctx, ns, partner.Spec.CatalogRef.Name)
		if err != nil {
			return nil, fmt.Errorf("catalog of %s/%s: %w", ns, name, err)
		}
		t.Catalog = &id
	}
	res, err := prov.ApplyPartner(ctx, partner, t.Catalog, o.webhooks)
	if err != nil {
		return nil, fmt.Errorf("partner %s/%s: %w", ns, name, err)
	}
	t.PartnerID, t.Accounts = res.ID, res.Accounts
	for _, k := range o.keys {
		plain, err := IssueKey(ctx, prov, ns, name, k)
		if err != nil {
			return nil, err
		}
		t.Keys[k.Slot()] = plain
	}
	for _, b := range o.wallets {
		w := Wallet(name, b.environment, InNamespace(ns), WithThreshold(b.threshold), WithTopUps(b.topUps...))
		res, err := prov.ApplyWallet(ctx, w)
		if err != nil {
			return nil, fmt.Errorf("wallet %s/%s: %w", ns, w.Name, err)
		}
		if len(res.Invalid) > 0 {
			return nil, fmt.Errorf("wallet %s/%s: invalid top-ups %v", ns, w.Name, res.Invalid)
		}
		t.Wallets[b.environment] = res
	}
	return t, nil
}

// IssueKey registers a new key of the partner namespace/partner, as the ApiKey reconciler does
// for the ApiKey named partner-slot, and returns its plaintext.
func IssueKey(ctx context.Context, prov *provisioning.Provisioner, namespace, partner string, k Key) (string, error) {
	plain, err := auth.GenerateKey(k.Environment)
	if err != nil {
		return "", fmt.Errorf("generate %s key: %w", k.Environment, err)
	}
	source := namespace + "/" + partner + "-" + k.Slot()
	if _, err := prov.RegisterKey(ctx, provisioning.Key{Namespace: namespace, Partner: partner,
		Environment: k.Environment, Kind: string(k.Kind), Source: source, Plaintext: plain}); err != nil {
		return "", fmt.Errorf("key %s: %w", source, err)
	}
	return plain, nil
}
