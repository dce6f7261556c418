package catalog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/codeport/codeport/apiserver/auth"
	"github.com/codeport/codeport/apiserver/store"
)

// Cache serves catalog snapshots of one environment from memory. Snapshots are built on first
// use, shared by every account bound to the catalog, dropped by Invalidate (wired to the
// configuration notifications), and rebuilt when the day changes (promotions) or the catalog's
// validity window opens or closes.
type Cache struct {
	db          *store.DB
	environment string
	now         func() time.Time

	mu         sync.Mutex
	entries    map[uuid.UUID]*cacheEntry
	generation uint64
	// targeted and flushes count invalidations of one catalog and of everything.
	targeted, flushes atomic.Uint64
}

type cacheEntry struct {
	ready   chan struct{}
	snap    *Snapshot
	err     error
	expires time.Time
}

// NewCache serves the catalogs of environment from db.
func NewCache(db *store.DB, environment string) *Cache {
	return &Cache{db: db, environment: environment, now: time.Now, entries: map[uuid.UUID]*cacheEntry{}}
}

// Invalidate drops every snapshot; the next request of each catalog rebuilds it.
func (c *Cache) Invalidate() {
	c.mu.Lock()
	c.entries = map[uuid.UUID]*cacheEntry{}
	c.generation++
	c.mu.Unlock()
	c.flushes.Add(1)
}

// InvalidateCatalog drops the snapshot of one catalog; the others stay.
func (c *Cache) InvalidateCatalog(id uuid.UUID) {
	c.mu.Lock()
	delete(c.entries, id)
	c.generation++
	c.mu.Unlock()
	c.targeted.Add(1)
}

// Invalidations reports how many single snapshots and how many whole caches were dropped.
func (c *Cache) Invalidations() (targeted, flushes uint64) {
	return c.targeted.Load(), c.flushes.Load()
}

// ForAccount returns the snapshot of the account's catalog: its products while the catalog is
// valid, plus the test products in sandbox. Concurrent first requests share one build.
func (c *Cache) ForAccount(ctx context.Context, acct *auth.Account) (*Snapshot, error) {
	key := uuid.Nil
	if acct.CatalogID != nil {
		key = *acct.CatalogID
	}
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[key]
	if ok {
		select {
		case <-e.ready:
			if e.err != nil || !now.Before(e.expires) {
				ok = false
			}
		default:
		}
	}
	if !ok {
		e = &cacheEntry{ready: make(chan struct{})}
		c.entries[key] = e
		generation := c.generation
		c.mu.Unlock()
		e.snap, e.expires, e.err = c.build(context.WithoutCancel(ctx), key, now)
		close(e.ready)
		if e.err != nil {
			c.mu.Lock()
			if c.generation == generation && c.entries[key] == e {
				delete(c.entries, key)
			}
			c.mu.Unlock()
		}
	} else {
		c.mu.Unlock()
	}
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for catalog snapshot: %w", ctx.Err())
	}
	return e.snap, e.err
}

func nextMidnight(now time.Time) time.Time {
	y, m, d := now.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}

func (c *Cache) build(ctx context.Context, catalogID uuid.UUID, now time.Time) (*Snapshot, time.Time, error) {
	expires := nextMidnight(now)
	var products []Product
	var meta *store.Catalog
	active := false
	if catalogID != uuid.Nil {
		cat, rows, err := store.LoadCatalog(ctx, c.db.Pool, catalogID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			// A deleted catalog serves nothing; the partner sees an empty catalog.
		case err != nil:
			return nil, time.Time{}, err
		default:
			meta = &cat
			if cat.ValidFrom.After(now) && cat.ValidFrom.Before(expires) {
				expires = cat.ValidFrom
			}
			if cat.ValidTo != nil && cat.ValidTo.After(now) && cat.ValidTo.Before(expires) {
				expires = *cat.ValidTo
			}
			active = !cat.ValidFrom.After(now) && (cat.ValidTo == nil || cat.ValidTo.After(now))
			if active {
				products = make([]Product, 0, len(rows)+5)
				for _, r := range rows {
					products = append(products, Product{CatalogProduct: r})
				}
			}
		}
	}
	snap, err := newCatalogSnapshot(products, now.UTC().Format(time.DateOnly), c.environment == store.EnvironmentSandbox)
	if err != nil {
		return nil, time.Time{}, err
	}
	snap.Catalog, snap.Active = meta, active
	return snap, expires, nil
}
