package auth

import (
	"net/netip"
	"time"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/tenancy"
)

// Account is the configuration of one partner environment, as every request handler sees it.
// Values are resolved once per configuration change (per-environment overrides already applied)
// and shared read-only between requests: never modify one.
type Account struct {
	ID        uuid.UUID
	PartnerID uuid.UUID
	// Partner is "namespace/name" of the Partner resource, for logs and metrics.
	Partner      string
	ContactEmail string
	Environment  string
	// CatalogID is nil when the partner has no catalog bound: its catalog is then empty (plus the
	// built-in test products in sandbox).
	CatalogID *uuid.UUID
	// IPWhitelist is the set of client networks admitted; empty admits nobody.
	IPWhitelist        []netip.Prefix
	RateLimitPerMinute int
	OrderingEnabled    bool
	WalletEnabled      bool
	// MaxQuantityPerOrder is 0 when unlimited.
	MaxQuantityPerOrder int
	// DailySpendLimits caps, per currency, the minor units ordered per UTC day.
	DailySpendLimits map[string]int64
	// LowBalanceThreshold is a decimal string in major units, applied to each currency.
	LowBalanceThreshold string
	Suspended           bool
}

// Allows reports whether a client address is inside the account's allowlist.
func (a *Account) Allows(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range a.IPWhitelist {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Principal is an authenticated caller: the key presented and the account it belongs to.
type Principal struct {
	KeyID   uuid.UUID
	KeyKind tenancy.KeyKind
	// ExpiresAt, when set, is when the key stops working: the previous key of a rotation with a
	// grace period.
	ExpiresAt time.Time
	Account   *Account
	// RateBucket and AccountID are the key's rate-limit bucket and the account id as text,
	// formatted once when the key is loaded rather than on every request.
	RateBucket string
	AccountID  string
}
