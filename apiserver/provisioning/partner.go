package provisioning

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/google/uuid"
	"github.com/lib/pq"
	"gorm.io/datatypes"
	"gorm.io/gorm"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/apiserver/store"
)

// Defaults for what a Partner leaves unset.
const (
	DefaultRequestsPerMinute = 600
)

// Environments returns the two environments every partner has, in a stable order.
func Environments() []string { return []string{store.EnvironmentSandbox, store.EnvironmentProduction} }

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

// EffectivePolicy merges the partner-wide access policy with an environment's overrides: each
// field set in the override replaces the partner-wide one.
func EffectivePolicy(spec *v1alpha1.PartnerSpec, environment string) v1alpha1.AccessPolicy {
	out := spec.AccessPolicy
	var o *v1alpha1.AccessPolicy
	if spec.Environments != nil {
		if environment == store.EnvironmentSandbox {
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

func accountRow(partnerID uuid.UUID, environment string, policy v1alpha1.AccessPolicy, suspended bool) (store.Account, error) {
	whitelist, err := NormalizeWhitelist(policy.IPWhitelist)
	if err != nil {
		return store.Account{}, err
	}
	a := store.Account{
		PartnerID: partnerID, Environment: environment, IPWhitelist: pq.StringArray(whitelist),
		RateLimitPerMinute: DefaultRequestsPerMinute, OrderingEnabled: true, WalletEnabled: true,
		DailySpendLimits: datatypes.JSONMap{}, Suspended: suspended,
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
// overrides applied) and its webhook endpoint, in one transaction. catalogID is the resolved
// catalogRef (nil when none).
func (p *Provisioner) ApplyPartner(ctx context.Context, partner *v1alpha1.Partner, catalogID *uuid.UUID, webhook *Webhook) (PartnerResult, error) {
	row := store.Partner{Namespace: partner.Namespace, Name: partner.Name, DisplayName: partner.Spec.DisplayName,
		ContactEmail: partner.Spec.ContactEmail, CatalogID: catalogID, Suspended: partner.Spec.Suspended}
	envs := Environments()
	accounts := make([]store.Account, 0, len(envs))
	for _, env := range envs {
		a, err := accountRow(uuid.Nil, env, EffectivePolicy(&partner.Spec, env), partner.Spec.Suspended)
		if err != nil {
			return PartnerResult{}, fmt.Errorf("%s: %w", env, err)
		}
		accounts = append(accounts, a)
	}
	result := PartnerResult{Accounts: map[string]uuid.UUID{}}
	err := p.db.Gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := store.UpsertPartner(tx, &row); err != nil {
			return err
		}
		for i := range accounts {
			accounts[i].PartnerID = row.ID
			if err := store.UpsertAccount(tx, &accounts[i]); err != nil {
				return err
			}
			result.Accounts[accounts[i].Environment] = accounts[i].ID
		}
		var endpoint *store.WebhookEndpoint
		if webhook != nil {
			endpoint = &store.WebhookEndpoint{URL: webhook.URL, Secret: webhook.Secret, EventTypes: pq.StringArray(append([]string{}, webhook.Events...)), Enabled: true}
		}
		return store.UpsertWebhook(tx, row.ID, endpoint)
	})
	if err != nil {
		return PartnerResult{}, err
	}
	result.ID = row.ID
	return result, nil
}

// RetirePartner suspends a deleted partner's accounts and revokes its keys; its orders and
// ledger are kept.
func (p *Provisioner) RetirePartner(ctx context.Context, namespace, name string) error {
	return store.RetirePartner(ctx, p.db.Gorm, namespace, name)
}

// ErrPartnerNotProvisioned means the referenced partner has no accounts yet (or was deleted).
var ErrPartnerNotProvisioned = errors.New("partner not provisioned")

func (p *Provisioner) account(ctx context.Context, namespace, partner, environment string) (store.Account, error) {
	a, err := store.AccountOf(ctx, p.db.Gorm, namespace, partner, environment)
	if errors.Is(err, store.ErrNotFound) {
		return store.Account{}, fmt.Errorf("%s/%s %s: %w", namespace, partner, environment, ErrPartnerNotProvisioned)
	}
	return a, err
}

// CatalogID resolves a catalog reference to the id of its provisioned catalog.
func (p *Provisioner) CatalogID(ctx context.Context, namespace, name string) (uuid.UUID, error) {
	return store.CatalogID(ctx, p.db.Gorm, namespace, name)
}
