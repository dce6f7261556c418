package auth_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/tenancy"
	"github.com/codeport/codeport/internal/test/poll"
)

var databaseURL string

func TestMain(m *testing.M) {
	os.Exit(storetest.Main(m, "auth", func(url string) { databaseURL = url }))
}

type fixture struct {
	db        *store.DB
	accountID string
	keys      map[string]string // name -> plaintext
}

// newFixture creates a partner with both accounts and one key of each kind and environment.
func newFixture(t *testing.T, name string) *fixture {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, databaseURL, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	f := &fixture{db: db, keys: map[string]string{}}
	var partnerID string
	if err := db.Pool.QueryRow(ctx, `INSERT INTO partners (namespace, name, contact_email)
		VALUES ('ns', $1, 'ops@x.example') RETURNING id`, name).Scan(&partnerID); err != nil {
		t.Fatal(err)
	}
	for _, env := range []string{"sandbox", "production"} {
		var accountID string
		if err := db.Pool.QueryRow(ctx, `INSERT INTO accounts (partner_id, environment, ip_whitelist,
				daily_spend_limits, max_quantity_per_order)
			VALUES ($1, $2, '{127.0.0.1/32,2001:db8::/32}', '{"EUR": 5000}', 10) RETURNING id`,
			partnerID, env).Scan(&accountID); err != nil {
			t.Fatal(err)
		}
		if env == "production" {
			f.accountID = accountID
		}
		for _, kind := range []string{"apiKey", "bearerToken"} {
			key, err := auth.GenerateKey(env)
			if err != nil {
				t.Fatal(err)
			}
			digest := auth.Digest(key)
			if _, err := db.Pool.Exec(ctx, `INSERT INTO api_keys (account_id, kind, digest, key_prefix) VALUES ($1, $2, $3, $4)`,
				accountID, kind, digest[:], auth.DisplayPrefix(key)); err != nil {
				t.Fatal(err)
			}
			f.keys[env+"/"+kind] = key
		}
	}
	return f
}

func TestLookup(t *testing.T) {
	f := newFixture(t, "lookup")
	dir := auth.NewDirectory(f.db, "production")
	ctx := context.Background()

	p, err := dir.Lookup(ctx, f.keys["production/apiKey"], "apiKey")
	if err != nil {
		t.Fatalf("valid key: %v", err)
	}
	a := p.Account
	if a.ID.String() != f.accountID || a.Environment != "production" || a.Partner != "ns/lookup" ||
		a.MaxQuantityPerOrder != 10 || a.DailySpendLimits["EUR"] != 5000 {
		t.Fatalf("account = %+v", a)
	}
	if !a.Allows(netip.MustParseAddr("127.0.0.1")) || !a.Allows(netip.MustParseAddr("2001:db8::5")) ||
		a.Allows(netip.MustParseAddr("10.0.0.1")) {
		t.Fatalf("allowlist = %v", a.IPWhitelist)
	}

	invalid := map[string]struct{ key, kind string }{
		"sandbox key on production": {f.keys["sandbox/apiKey"], "apiKey"},
		"bearer token as api key":   {f.keys["production/bearerToken"], "apiKey"},
		"api key as bearer token":   {f.keys["production/apiKey"], "bearerToken"},
		"garbage":                   {"cp_live_nope", "apiKey"},
	}
	unknown, _ := auth.GenerateKey("production")
	invalid["unknown key"] = struct{ key, kind string }{unknown, "apiKey"}
	for name, tc := range invalid {
		if _, err := dir.Lookup(ctx, tc.key, tenancy.KeyKind(tc.kind)); !errors.Is(err, auth.ErrInvalidKey) {
			t.Errorf("%s: err = %v, want ErrInvalidKey", name, err)
		}
	}
	p, err = dir.Lookup(ctx, f.keys["production/bearerToken"], "bearerToken")
	if err != nil || p.KeyKind != "bearerToken" {
		t.Errorf("bearer token lookup: %v", err)
	}
}

// TestChangesVisibleToRunningDirectory: an allowlist change and a revocation reach a directory
// that cached the key, through the change notifications alone (nothing else refreshes an entry).
// Notifications take milliseconds; the bounds below are generous because a busy machine delays
// them far more.
func TestChangesVisibleToRunningDirectory(t *testing.T) {
	f := newFixture(t, "fresh")
	dir := auth.NewDirectory(f.db, "production")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	notified := make(chan struct{})
	var once sync.Once
	go func() { _ = dir.Run(ctx, dependent(func() { once.Do(func() { close(notified) }) })) }()
	key := f.keys["production/apiKey"]
	if _, err := dir.Lookup(ctx, key, "apiKey"); err != nil {
		t.Fatal(err)
	}
	// The listener subscribes asynchronously: touch the configuration until a notification
	// arrives, which also proves other caches are invalidated by the same notifications.
	poll.UntilTrue(t, 10*time.Second, "listener ready", func() bool {
		_, _ = f.db.Pool.Exec(ctx, `UPDATE accounts SET updated_at = now() WHERE id = $1`, f.accountID)
		select {
		case <-notified:
			return true
		case <-time.After(20 * time.Millisecond):
			return false
		}
	})

	if _, err := f.db.Pool.Exec(ctx, `UPDATE accounts SET ip_whitelist = '{198.51.100.0/24}' WHERE id = $1`,
		f.accountID); err != nil {
		t.Fatal(err)
	}
	poll.UntilTrue(t, 10*time.Second, "allowlist change", func() bool {
		p, err := dir.Lookup(ctx, key, "apiKey")
		return err == nil && p.Account.Allows(netip.MustParseAddr("198.51.100.9"))
	})

	digest := auth.Digest(key)
	if _, err := f.db.Pool.Exec(ctx, `UPDATE api_keys SET revoked_at = now() WHERE digest = $1`, digest[:]); err != nil {
		t.Fatal(err)
	}
	poll.UntilTrue(t, 10*time.Second, "revocation", func() bool {
		_, err := dir.Lookup(ctx, key, "apiKey")
		return errors.Is(err, auth.ErrInvalidKey)
	})
}

// dependent is an auth.Dependent that reports every invalidation to f.
type dependent func()

func (f dependent) Invalidate()                 { f() }
func (f dependent) InvalidateCatalog(uuid.UUID) { f() }

func (f dependent) ProductsChanged(uuid.UUID, []string) { f() }

func TestConcurrentLookups(t *testing.T) {
	f := newFixture(t, "concurrent")
	dir := auth.NewDirectory(f.db, "sandbox")
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%10 == 0 {
				dir.Invalidate()
			}
			if _, err := dir.Lookup(context.Background(), f.keys["sandbox/apiKey"], "apiKey"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

// TestNotificationsDropOnlyWhatTheyName: a new key whose digest was cached as a miss works once
// registered; a change of one account leaves the other accounts' entries cached; a payload the
// directory cannot read drops everything.
func TestNotificationsDropOnlyWhatTheyName(t *testing.T) {
	f := newFixture(t, "targeted")
	dir := auth.NewDirectory(f.db, "production")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = dir.Run(ctx) }()
	// The listener connects in the background (a connection attempt may time out after 5 s and be
	// retried on a busy machine); the lookups below must not be cached before its subscription
	// flushes the directory.
	poll.UntilTrue(t, 30*time.Second, "subscribed", func() bool { _, flushes := dir.Invalidations(); return flushes == 1 })

	fresh, err := auth.GenerateKey("production")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dir.Lookup(ctx, fresh, "apiKey"); !errors.Is(err, auth.ErrInvalidKey) {
		t.Fatalf("unregistered key: %v", err)
	}
	if _, err := dir.Lookup(ctx, f.keys["production/apiKey"], "apiKey"); err != nil {
		t.Fatal(err)
	}
	digest := auth.Digest(fresh)
	if _, err := f.db.Pool.Exec(ctx, `INSERT INTO api_keys (account_id, kind, digest, key_prefix)
		VALUES ($1, 'apiKey', $2, 'x')`, f.accountID, digest[:]); err != nil {
		t.Fatal(err)
	}
	// Each wait below is for the listener to handle one notification: milliseconds, or seconds
	// on a busy machine.
	poll.UntilTrue(t, 10*time.Second, "registered key accepted", func() bool {
		_, err := dir.Lookup(ctx, fresh, "apiKey")
		return err == nil
	})
	if n := dir.Len(); n != 2 {
		t.Fatalf("%d cached lookups, want the two keys", n)
	}

	// A change of another account keeps this account's entries.
	targeted, _ := dir.Invalidations()
	if _, err := f.db.Pool.Exec(ctx, `SELECT pg_notify('codeport_config', 'account:' || gen_random_uuid())`); err != nil {
		t.Fatal(err)
	}
	poll.UntilTrue(t, 10*time.Second, "notification handled", func() bool {
		tg, _ := dir.Invalidations()
		return tg > targeted
	})
	if n := dir.Len(); n != 2 {
		t.Fatalf("a change of another account dropped entries: %d cached", n)
	}
	if _, err := f.db.Pool.Exec(ctx, `SELECT pg_notify('codeport_config', 'something new')`); err != nil {
		t.Fatal(err)
	}
	poll.UntilTrue(t, 10*time.Second, "unreadable payload flushes", func() bool { return dir.Len() == 0 })
}

// TestLookupHonoursKeyExpiry: a key in a rotation's grace period works until its end and not a
// moment later, although its cached entry is never dropped by a notification.
func TestLookupHonoursKeyExpiry(t *testing.T) {
	f := newFixture(t, "expiry")
	dir := auth.NewDirectory(f.db, "production")
	ctx := context.Background()
	key := f.keys["production/apiKey"]
	digest := auth.Digest(key)
	var end time.Time
	if err := f.db.Pool.QueryRow(ctx, `UPDATE api_keys SET expires_at = now() + interval '1 second'
		WHERE digest = $1 RETURNING expires_at`, digest[:]).Scan(&end); err != nil {
		t.Fatal(err)
	}
	p, err := dir.Lookup(ctx, key, "apiKey")
	if err != nil || !p.ExpiresAt.Equal(end) {
		t.Fatalf("lookup in the grace period: %+v, %v (end %s)", p, err, end)
	}
	// The key ends a second from now; the bound leaves a busy machine time to get there.
	poll.Until(t, 10*time.Second, "key refused at its end", func() (bool, string) {
		_, err := dir.Lookup(ctx, key, "apiKey")
		return errors.Is(err, auth.ErrInvalidKey), ""
	})
	if now := time.Now(); now.Before(end) {
		t.Fatalf("key refused at %s, before its end %s", now, end)
	}
	if dir.Len() == 0 {
		t.Fatal("the entry was not cached: the refusal did not come from the cache")
	}
	// Loaded afresh, it is refused too.
	dir.Invalidate()
	if _, err := dir.Lookup(ctx, key, "apiKey"); !errors.Is(err, auth.ErrInvalidKey) {
		t.Fatalf("expired key loaded afresh: %v", err)
	}
}
