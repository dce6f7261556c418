package catalog

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/recovery"
	"github.com/codeport/codeport/internal/tenancy"

	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/store"
)

// Cache serves catalog snapshots of one environment from memory. Snapshots are built on first
// use (concurrent first requests share one build), shared by every account bound to the catalog,
// and rebuilt on the request that finds the day changed (promotions) or the catalog's validity
// window opened or closed. Change notifications refresh them in the background while the
// current snapshot keeps serving: a change of named products patches the snapshot with those
// products' rows, any other change rebuilds it. Refreshes of one catalog run one at a time, and
// notifications arriving meanwhile are merged into the next one.
type Cache struct {
	db          *store.DB
	environment tenancy.Environment
	now         func() time.Time
	// settle is how long a refresh waits for more notifications of the same burst.
	settle time.Duration

	mu      sync.Mutex
	entries map[uuid.UUID]*cacheEntry
	// targeted and flushes count notifications of one catalog and of everything; patches and
	// rebuilds count the snapshots made from some products' rows and from the whole catalog.
	targeted, flushes, patches, rebuilds atomic.Uint64
}

type cacheEntry struct {
	ready chan struct{}
	// err is the first build's failure; current is the snapshot served once ready is closed.
	err     error
	current atomic.Pointer[version]
	// Guarded by Cache.mu: what the next refresh has to reload, and whether one is under way.
	pendingCodes map[string]struct{}
	pendingAll   bool
	refreshing   bool
}

// version is a snapshot with the moment it stops being valid.
type version struct {
	snap    *Snapshot
	expires time.Time
}

// maxPatchCodes bounds the products one refresh reloads by code; a refresh of more reloads the
// catalog.
const maxPatchCodes = 1000

// refreshTimeout bounds one background refresh.
const refreshTimeout = time.Minute

// NewCache serves the catalogs of environment from db.
func NewCache(db *store.DB, environment tenancy.Environment) *Cache {
	return &Cache{db: db, environment: environment, now: time.Now, settle: 20 * time.Millisecond,
		entries: map[uuid.UUID]*cacheEntry{}}
}

// Invalidate refreshes every snapshot: anything may have changed.
func (c *Cache) Invalidate() {
	c.mu.Lock()
	for id, e := range c.entries {
		c.scheduleLocked(id, e, nil)
	}
	c.mu.Unlock()
	c.flushes.Add(1)
}

// InvalidateCatalog refreshes the snapshot of one catalog; the others stay.
func (c *Cache) InvalidateCatalog(id uuid.UUID) {
	c.mu.Lock()
	if e, ok := c.entries[id]; ok {
		c.scheduleLocked(id, e, nil)
	}
	c.mu.Unlock()
	c.targeted.Add(1)
}

// ProductsChanged patches the snapshot of a catalog with the current rows of the products with
// codes (a code without a row was deleted).
func (c *Cache) ProductsChanged(id uuid.UUID, codes []string) {
	if len(codes) == 0 {
		return
	}
	c.mu.Lock()
	if e, ok := c.entries[id]; ok {
		c.scheduleLocked(id, e, codes)
	}
	c.mu.Unlock()
}

// Invalidations reports how many notifications named one catalog and how many everything.
func (c *Cache) Invalidations() (targeted, flushes uint64) {
	return c.targeted.Load(), c.flushes.Load()
}

// Builds reports how many snapshots were patched from changed products' rows and how many were
// built from whole catalogs.
func (c *Cache) Builds() (patches, rebuilds uint64) {
	return c.patches.Load(), c.rebuilds.Load()
}

// scheduleLocked records what e's next refresh reloads (the products with codes, or everything
// when codes is nil) and starts the refresh unless one is under way; it will pick this up.
func (c *Cache) scheduleLocked(id uuid.UUID, e *cacheEntry, codes []string) {
	switch {
	case e.pendingAll:
	case codes == nil || len(e.pendingCodes)+len(codes) > maxPatchCodes:
		e.pendingAll, e.pendingCodes = true, nil
	default:
		if e.pendingCodes == nil {
			e.pendingCodes = make(map[string]struct{}, len(codes))
		}
		for _, code := range codes {
			e.pendingCodes[code] = struct{}{}
		}
	}
	if !e.refreshing {
		e.refreshing = true
		go c.refresh(id, e)
	}
}

// refresh reloads what notifications named until nothing is pending. The entry keeps serving its
// current snapshot meanwhile; each result replaces it whole. An entry replaced or dropped from the
// cache needs no refresh: its successor is built from the database as it is now.
func (c *Cache) refresh(id uuid.UUID, e *cacheEntry) {
	<-e.ready
	for {
		time.Sleep(c.settle)
		c.mu.Lock()
		codes, all := e.pendingCodes, e.pendingAll
		e.pendingCodes, e.pendingAll = nil, false
		if e.err != nil || c.entries[id] != e || (!all && len(codes) == 0) {
			e.refreshing = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
		next, err := c.reloadRecovering(ctx, id, e.current.Load(), codes, all)
		cancel()
		if err != nil {
			// The next request rebuilds the snapshot itself, as it would have expired.
			next = &version{snap: e.current.Load().snap}
		}
		e.current.Store(next)
	}
}

// reloadRecovering is reload with a panic turned into its error: the entry then keeps serving
// its current snapshot, as after any failed reload, and the process goes on.
func (c *Cache) reloadRecovering(
	ctx context.Context, id uuid.UUID, cur *version, codes map[string]struct{}, all bool,
) (next *version, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = recovery.Recovered(ctx, nil, "catalog refresh", v)
		}
	}()
	return c.reload(ctx, id, cur, codes, all)
}

// reload makes the version that follows cur once the products with codes, or all of them, were
// reloaded.
func (c *Cache) reload(
	ctx context.Context, id uuid.UUID, cur *version, codes map[string]struct{}, all bool,
) (*version, error) {
	if all {
		snap, expires, err := c.build(ctx, id, c.now())
		if err != nil {
			return nil, err
		}
		return &version{snap: snap, expires: expires}, nil
	}
	if cur.snap.Catalog == nil || !cur.snap.Active {
		// No products are served; the catalog's return or the window's opening rebuilds it.
		return cur, nil
	}
	named := slices.Collect(maps.Keys(codes))
	rows, err := store.LoadProducts(ctx, c.db.Pool, id, named)
	if err != nil {
		return nil, err
	}
	snap, err := cur.snap.Patch(named, rows)
	if err != nil {
		return nil, err
	}
	c.patches.Add(1)
	return &version{snap: snap, expires: cur.expires}, nil
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
			if e.err != nil || !now.Before(e.current.Load().expires) {
				ok = false
			}
		default:
		}
	}
	if !ok {
		e = &cacheEntry{ready: make(chan struct{})}
		c.entries[key] = e
		c.mu.Unlock()
		snap, expires, err := c.build(context.WithoutCancel(ctx), key, now)
		e.current.Store(&version{snap: snap, expires: expires})
		e.err = err
		close(e.ready)
		if err != nil {
			c.mu.Lock()
			if c.entries[key] == e {
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
	if e.err != nil {
		return nil, e.err
	}
	return e.current.Load().snap, nil
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
	snap, err := newCatalogSnapshot(products, now.UTC().Format(time.DateOnly), c.environment == tenancy.Sandbox)
	if err != nil {
		return nil, time.Time{}, err
	}
	snap.Catalog, snap.Active = meta, active
	c.rebuilds.Add(1)
	return snap, expires, nil
}
