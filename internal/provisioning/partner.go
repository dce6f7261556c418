package provisioning

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/provisioning/configdb"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/tenancy"
)

// Defaults for what a Partner leaves unset.
const (
	DefaultRequestsPerMinute = 600
)

// Environments returns tenancy.Environments as the strings the models and workers carry.
func Environments() []string { return []string{string(tenancy.Sandbox), string(tenancy.Production)} }

// PartnerResult is what applying a partner did.
type PartnerResult struct {
	ID       uuid.UUID
	Accounts map[string]uuid.UUID
}

// Webhook is a partner's resolved webhook endpoint (the secret read from its Secret).
type Webhook struct {
	URL    string
	Secret []byte
	Events []string
}

// Webhooks are a partner's endpoints by environment; an environment without one gets no events.
type Webhooks map[string]*Webhook

// ResolveWebhooks is a partner's endpoint of each environment: the environment's own webhook,
// else the partner-wide one. read returns the signing secret a reference selects, or ok false
// when there is none (that environment then gets no events; the caller reports why). Each
// Secret is read once however many environments share it.
func ResolveWebhooks(
	spec *v1alpha1.PartnerSpec, read func(v1alpha1.SecretKeySelector) (secret []byte, ok bool, err error),
) (Webhooks, error) {
	out := Webhooks{}
	type found struct {
		secret []byte
		ok     bool
	}
	seen := map[v1alpha1.SecretKeySelector]found{}
	for _, env := range Environments() {
		w := EffectivePolicy(spec, env).Webhook
		if w == nil {
			continue
		}
		f, done := seen[w.SecretRef]
		if !done {
			secret, ok, err := read(w.SecretRef)
			if err != nil {
				return nil, fmt.Errorf("%s webhook: %w", env, err)
			}
			f = found{secret, ok}
			seen[w.SecretRef] = f
		}
		if !f.ok {
			continue
		}
		events := make([]string, len(w.Events))
		for i, e := range w.Events {
			events[i] = string(e)
		}
		out[env] = &Webhook{URL: w.URL, Secret: f.secret, Events: events}
	}
	return out, nil
}

// ErrNoSecretsKey means a webhook was to be provisioned by a provisioner built without the codes
// key that seals its secret.
var ErrNoSecretsKey = errors.New("no codes key to seal the webhook secret with")

// EffectivePolicy merges the partner-wide access policy with an environment's overrides: each
// field set in the override replaces the partner-wide one.
func EffectivePolicy(spec *v1alpha1.PartnerSpec, environment string) v1alpha1.AccessPolicy {
	out := spec.AccessPolicy
	var o *v1alpha1.AccessPolicy
	if spec.Environments != nil {
		if tenancy.Environment(environment) == tenancy.Sandbox {
			o = spec.Environments.Sandbox
		} else {
			o = spec.Environments.Production
		}
	}
	if o == nil {
		return out
	}
	if o.IPWhitelist != nil {
		out.IPWhitelist = o.IPWhitelist
	}
	if o.RateLimit != nil {
		out.RateLimit = o.RateLimit
	}
	if o.Webhook != nil {
		out.Webhook = o.Webhook
	}
	if o.Ordering != nil {
		merged := v1alpha1.OrderingSpec{}
		if out.Ordering != nil {
			merged = *out.Ordering
		}
		if o.Ordering.Enabled != nil {
			merged.Enabled = o.Ordering.Enabled
		}
		if o.Ordering.WalletEnabled != nil {
			merged.WalletEnabled = o.Ordering.WalletEnabled
		}
		if o.Ordering.Limits != nil {
			limits := v1alpha1.OrderLimits{}
			if merged.Limits != nil {
				limits = *merged.Limits
			}
			if o.Ordering.Limits.MaxQuantityPerOrder != nil {
				limits.MaxQuantityPerOrder = o.Ordering.Limits.MaxQuantityPerOrder
			}
			if o.Ordering.Limits.DailySpend != nil {
				limits.DailySpend = o.Ordering.Limits.DailySpend
			}
			merged.Limits = &limits
		}
		out.Ordering = &merged
	}
	return out
}

// NormalizeWhitelist turns IPs and CIDRs into canonical CIDRs (an IP becomes /32 or /128).
func NormalizeWhitelist(entries []string) ([]string, error) {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if prefix, err := netip.ParsePrefix(e); err == nil {
			out = append(out, prefix.Masked().String())
			continue
		}
		addr, err := netip.ParseAddr(e)
		if err != nil {
			return nil, fmt.Errorf("ipWhitelist entry %q is neither an IP address nor a CIDR", e)
		}
		out = append(out, netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen()).String())
	}
	return out, nil
}

func accountRow(
	partnerID uuid.UUID, environment string, policy v1alpha1.AccessPolicy, suspended bool,
) (configdb.Account, error) {
	whitelist, err := NormalizeWhitelist(policy.IPWhitelist)
	if err != nil {
		return configdb.Account{}, err
	}
	a := configdb.Account{
		PartnerID: partnerID, Environment: environment, IPWhitelist: store.TextArray(whitelist),
		RateLimitPerMinute: DefaultRequestsPerMinute, OrderingEnabled: true, WalletEnabled: true,
		DailySpendLimits: store.JSONMap{}, Suspended: suspended,
	}
	if policy.RateLimit != nil && policy.RateLimit.RequestsPerMinute > 0 {
		a.RateLimitPerMinute = int(policy.RateLimit.RequestsPerMinute)
	}
	if o := policy.Ordering; o != nil {
		if o.Enabled != nil {
			a.OrderingEnabled = *o.Enabled
		}
		if o.WalletEnabled != nil {
			a.WalletEnabled = *o.WalletEnabled
		}
		if o.Limits != nil {
			if o.Limits.MaxQuantityPerOrder != nil && *o.Limits.MaxQuantityPerOrder > 0 {
				n := int(*o.Limits.MaxQuantityPerOrder)
				a.MaxQuantityPerOrder = &n
			}
			for cur, v := range o.Limits.DailySpend {
				a.DailySpendLimits[cur] = v
			}
		}
	}
	return a, nil
}

// ApplyPartner upserts the partner and both of its accounts (policy with per-environment
// overrides applied) and its webhook endpoints, in one transaction. catalogID is the resolved
// catalogRef (nil when none).
func (p *Provisioner) ApplyPartner(
	ctx context.Context, partner *v1alpha1.Partner, catalogID *uuid.UUID, webhooks Webhooks,
) (PartnerResult, error) {
	row := configdb.Partner{Namespace: partner.Namespace, Name: partner.Name, DisplayName: partner.Spec.DisplayName,
		ContactEmail: partner.Spec.ContactEmail, CatalogID: catalogID, Suspended: partner.Spec.Suspended}
	envs := Environments()
	accounts := make([]configdb.Account, 0, len(envs))
	for _, env := range envs {
		a, err := accountRow(uuid.Nil, env, EffectivePolicy(&partner.Spec, env), partner.Spec.Suspended)
		if err != nil {
			return PartnerResult{}, fmt.Errorf("%s: %w", env, err)
		}
		accounts = append(accounts, a)
	}
	result := PartnerResult{Accounts: map[string]uuid.UUID{}}
	err := p.config.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := configdb.UpsertPartner(tx, &row); err != nil {
			return err
		}
		for i := range accounts {
			accounts[i].PartnerID = row.ID
			if err := configdb.UpsertAccount(tx, &accounts[i]); err != nil {
				return err
			}
			result.Accounts[accounts[i].Environment] = accounts[i].ID
		}
		return p.applyWebhooks(tx, row.ID, webhooks)
	})
	if err != nil {
		return PartnerResult{}, err
	}
	result.ID = row.ID
	return result, nil
}

// applyWebhooks writes the partner's endpoint of each environment. A stored secret is resealed
// only when it no longer opens to the wanted one, so a resync that changes nothing writes
// nothing (sealing is randomised), and a stored secret sealed under a previous codes key is
// resealed under the current one.
func (p *Provisioner) applyWebhooks(tx *gorm.DB, partnerID uuid.UUID, webhooks Webhooks) error {
	stored, err := configdb.WebhookEndpoints(tx, partnerID)
	if err != nil {
		return err
	}
	for _, env := range Environments() {
		want, have := webhooks[env], stored[env]
		if want == nil {
			if have.URL != "" {
				if err := configdb.UpsertWebhook(tx, partnerID, env, nil); err != nil {
					return err
				}
			}
			continue
		}
		if p.secrets == nil {
			return ErrNoSecretsKey
		}
		owner := store.WebhookSecretOwner(partnerID, env)
		sealed := have.SealedSecret
		plain, err := p.secrets.OpenSecret(have.SecretKeyRef, sealed, owner)
		// A secret sealed under an older key of the ring is sealed again under the current one.
		if err != nil || !bytes.Equal(plain, want.Secret) || have.SecretKeyRef != p.secrets.Key() {
			if sealed, err = p.secrets.SealSecret(want.Secret, owner); err != nil {
				return err
			}
		}
		endpoint := configdb.WebhookEndpoint{
			URL:          want.URL,
			SealedSecret: sealed,
			// A stored secret is kept only when it opened under the current key.
			SecretKeyRef: p.secrets.Key(),
			EventTypes:   store.TextArray(append([]string{}, want.Events...)),
			Enabled:      true,
		}
		if have.URL == endpoint.URL && bytes.Equal(have.SealedSecret, endpoint.SealedSecret) &&
			have.SecretKeyRef == endpoint.SecretKeyRef && have.Enabled && slices.Equal(have.EventTypes, endpoint.EventTypes) {
			continue
		}
		if err := configdb.UpsertWebhook(tx, partnerID, env, &endpoint); err != nil {
			return err
		}
	}
	return nil
}

// RetirePartner suspends a deleted partner's accounts and revokes its keys; its orders and
// ledger are kept.
func (p *Provisioner) RetirePartner(ctx context.Context, namespace, name string) error {
	return configdb.RetirePartner(ctx, p.config, namespace, name)
}

// ErrPartnerNotProvisioned means the referenced partner has no accounts yet (or was deleted).
var ErrPartnerNotProvisioned = errors.New("partner not provisioned")

func (p *Provisioner) account(ctx context.Context, namespace, partner, environment string) (store.Account, error) {
	a, err := store.AccountOf(ctx, p.db.Pool, namespace, partner, environment)
	if errors.Is(err, store.ErrNotFound) {
		return store.Account{}, fmt.Errorf("%s/%s %s: %w", namespace, partner, environment, ErrPartnerNotProvisioned)
	}
	return a, err
}

// BoundCatalog is the provisioned catalog a partner serves now, by id and name; IsNotFound
// when it serves none.
func (p *Provisioner) BoundCatalog(ctx context.Context, namespace, partner string) (uuid.UUID, string, error) {
	return configdb.BoundCatalog(ctx, p.config, namespace, partner)
}

// CatalogID resolves a catalog reference to the id of its provisioned catalog.
func (p *Provisioner) CatalogID(ctx context.Context, namespace, name string) (uuid.UUID, error) {
	return configdb.CatalogID(ctx, p.config, namespace, name)
}
