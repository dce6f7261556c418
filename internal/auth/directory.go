package auth

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/tenancy"
)

// ErrInvalidKey means the presented credential does not grant access here: malformed, unknown,
// revoked, of another environment or kind, or of a deleted partner. Callers must not say which.
var ErrInvalidKey = errors.New("invalid key")

// Directory resolves keys to principals from memory. A configuration notification drops the
// entries of what it names (a key, an account, a partner); one it cannot read, and every
// listener (re)connect, drops them all. A revocation or a changed allowlist is seen within the
// notification latency, well under a second, and an unrelated change costs no lookups.
type Directory struct {
	db          *store.DB
	environment string

	mu sync.RWMutex
	// entries caches lookups by digest; a nil principal caches a miss, so a flood of invalid
	// keys costs one query each until the cache is full.
	entries map[[32]byte]*Principal
	// generation increments on every invalidation, so a lookup that raced with one does not
	// store a stale result.
	generation uint64
	// invalidations counts what notifications dropped: single targets and everything.
	targeted, flushes atomic.Uint64
}

// maxCachedKeys bounds memory whatever keys clients send.
const maxCachedKeys = 100_000

// NewDirectory serves keys of environment from db.
func NewDirectory(db *store.DB, environment string) *Directory {
	return &Directory{db: db, environment: environment, entries: map[[32]byte]*Principal{}}
}

// Invalidate forgets every cached lookup.
func (d *Directory) Invalidate() {
	d.mu.Lock()
	d.entries = map[[32]byte]*Principal{}
	d.generation++
	d.mu.Unlock()
	d.flushes.Add(1)
}

// Invalidations reports how many notifications dropped one target's entries and how many
// dropped everything.
func (d *Directory) Invalidations() (targeted, flushes uint64) {
	return d.targeted.Load(), d.flushes.Load()
}

// Len reports how many lookups (hits and misses) are cached.
func (d *Directory) Len() int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return len(d.entries)
}

// forget drops the entries drop selects (a cached miss has no principal and is passed nil).
func (d *Directory) forget(drop func(digest [32]byte, p *Principal) bool) {
	d.mu.Lock()
	for digest, p := range d.entries {
		if drop(digest, p) {
			delete(d.entries, digest)
		}
	}
	d.generation++
	d.mu.Unlock()
	d.targeted.Add(1)
}

// Lookup returns the principal of a key of the given kind.
func (d *Directory) Lookup(ctx context.Context, plaintext string, kind tenancy.KeyKind) (*Principal, error) {
	env, ok := ParseKey(plaintext)
	if !ok || env != d.environment {
		return nil, ErrInvalidKey
	}
	digest := Digest(plaintext)
	d.mu.RLock()
	p, cached := d.entries[digest]
	generation := d.generation
	d.mu.RUnlock()
	if !cached {
		var err error
		p, err = d.load(ctx, digest)
		if err != nil {
			return nil, err
		}
		d.mu.Lock()
		if d.generation == generation && len(d.entries) < maxCachedKeys {
			d.entries[digest] = p
		}
		d.mu.Unlock()
	}
	if p == nil || p.KeyKind != kind {
		return nil, ErrInvalidKey
	}
	// A key in a rotation's grace period ends at a moment no notification marks: the cached
	// entry is checked against it on every use.
	if !p.ExpiresAt.IsZero() && !time.Now().Before(p.ExpiresAt) {
		return nil, ErrInvalidKey
	}
	return p, nil
}

func (d *Directory) load(ctx context.Context, digest [32]byte) (*Principal, error) {
	row, err := store.LookupKey(ctx, d.db.Pool, digest[:], d.environment)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil // a cached miss
	}
	if err != nil {
		return nil, err
	}
	p := Principal{KeyID: row.KeyID, KeyKind: tenancy.KeyKind(row.KeyKind)}
	a := Account{ID: row.AccountID, PartnerID: row.PartnerID, Partner: row.Partner, ContactEmail: row.ContactEmail,
		Environment: row.Environment, CatalogID: row.CatalogID, RateLimitPerMinute: row.RateLimitPerMinute,
		OrderingEnabled: row.OrderingEnabled, WalletEnabled: row.WalletEnabled,
		LowBalanceThreshold: row.LowBalanceThreshold, Suspended: row.Suspended}
	for _, cidr := range row.IPWhitelist {
		prefix, err := netip.ParsePrefix(cidr)
		if err != nil {
			return nil, fmt.Errorf("account %s: bad whitelist entry %q: %w", a.ID, cidr, err)
		}
		a.IPWhitelist = append(a.IPWhitelist, prefix)
	}
	if row.MaxQuantityPerOrder != nil {
		a.MaxQuantityPerOrder = int(*row.MaxQuantityPerOrder)
	}
	a.DailySpendLimits, err = parseSpendLimits(row.DailySpendLimits)
	if err != nil {
		return nil, fmt.Errorf("account %s: %w", a.ID, err)
	}
	if row.ExpiresAt != nil {
		p.ExpiresAt = *row.ExpiresAt
	}
	p.Account = &a
	p.RateBucket, p.AccountID = "key:"+p.KeyID.String(), a.ID.String()
	return &p, nil
}

func parseSpendLimits(raw []byte) (map[string]int64, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var m map[string]json.Number
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("daily spend limits: %w", err)
	}
	out := make(map[string]int64, len(m))
	for cur, n := range m {
		v, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("daily spend limit %s: %w", cur, err)
		}
		out[cur] = v
	}
	return out, nil
}

// Dependent is a cache that follows the same notifications as the directory.
type Dependent interface {
	// Invalidate forgets everything.
	Invalidate()
	// InvalidateCatalog forgets what was built from one catalog.
	InvalidateCatalog(id uuid.UUID)
	// ProductsChanged forgets what was built from some products of one catalog, by code.
	ProductsChanged(catalogID uuid.UUID, productCodes []string)
}

// Run keeps the directory, and the dependents, fresh until ctx ends.
func (d *Directory) Run(ctx context.Context, dependents ...Dependent) error {
	flush := func() {
		d.Invalidate()
		for _, dep := range dependents {
			dep.Invalidate()
		}
	}
	return store.Listen(ctx, d.db.Pool, []string{store.ChannelConfig},
		func(_, payload string) { d.apply(payload, dependents, flush) }, flush)
}

// apply drops what a notification's payload ("<kind>:<id>", or "catalog:<id>:<code>,<code>..."
// for products, see the change triggers) names.
func (d *Directory) apply(payload string, dependents []Dependent, flush func()) {
	kind, id, _ := strings.Cut(payload, ":")
	var codes string
	if kind == "catalog" {
		id, codes, _ = strings.Cut(id, ":")
	}
	switch kind {
	case "key":
		raw, err := hex.DecodeString(id)
		if err != nil || len(raw) != 32 {
			break
		}
		digest := [32]byte(raw)
		d.forget(func(k [32]byte, _ *Principal) bool { return k == digest })
		return
	case "account", "partner", "catalog":
		uid, err := uuid.Parse(id)
		if err != nil {
			break
		}
		switch {
		case kind == "account":
			d.forget(func(_ [32]byte, p *Principal) bool { return p != nil && p.Account.ID == uid })
		case kind == "partner":
			d.forget(func(_ [32]byte, p *Principal) bool { return p != nil && p.Account.PartnerID == uid })
		case codes != "":
			productCodes := strings.Split(codes, ",")
			for _, dep := range dependents {
				dep.ProductsChanged(uid, productCodes)
			}
		default:
			for _, dep := range dependents {
				dep.InvalidateCatalog(uid)
			}
		}
		return
	case "webhook":
		// Webhook endpoints are read when an event is delivered; nothing here holds them.
		return
	}
	flush()
}
