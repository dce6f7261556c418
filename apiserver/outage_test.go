package apiserver_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/poll"
)

// setConnectable opens or closes a database to new connections (storetest.SetConnectable).
func setConnectable(t *testing.T, name string, allow bool) {
	t.Helper()
	storetest.SetConnectable(t, name, allow)
}

// TestDatabaseOutage: while the database is unreachable, orders get the spec's 502 (never a 500
// or a hang), and a server that never reached the database is not ready; when it returns, the
// same API recovers without a restart.
func TestDatabaseOutage(t *testing.T) {
	db := storetest.New(t)
	s := newStack(t, stackOptions{databaseURL: db.URL, noWorker: true})
	tn := s.onboard(t, "acme", nil)
	s.topUp(t, tn, "production", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"})
	key := tn.keys["production"]
	if r := s.call(t, "production", "GET", "/v2/catalog/products", key, nil); r.status != 200 {
		t.Fatalf("%d", r.status)
	}
	setConnectable(t, db.Name, false)
	defer setConnectable(t, db.Name, true)

	start := time.Now()
	r := s.call(t, "production", "POST", "/v2/orders", key,
		order("outage-1", line{"productCode": "10000000000001", "quantity": 1}))
	expectError(t, r, http.StatusBadGateway, "Order could not be created. Please try again later.")
	if r.header.Get("X-RateLimit-Limit") == "" {
		t.Fatal("502 without rate-limit headers")
	}
	if elapsed := time.Since(start); elapsed > 15*time.Second {
		t.Fatalf("the 502 took %s", elapsed)
	}
	if r := s.call(t, "production", "GET", "/readyz", "", nil); r.status != http.StatusServiceUnavailable {
		t.Fatalf("readyz during outage: %d", r.status)
	}

	setConnectable(t, db.Name, true)
	// The pool opens new connections once the database accepts them again; on a busy machine a
	// connection attempt may take seconds (up to its 5 s timeout).
	poll.UntilTrue(t, 30*time.Second, "recovery", func() bool {
		r := s.call(t, "production", "POST", "/v2/orders", key,
			order("outage-2", line{"productCode": "10000000000001", "quantity": 1}))
		return r.status == http.StatusAccepted
	})
	// The order attempted during the outage was not recorded.
	expectError(t, s.call(t, "production", "GET", "/v2/orders/outage-1", key, nil), 404, "Order outage-1 not found")
}

// TestReadinessOutlastsAShortOutage: a server that has reached the database stays ready through
// an outage shorter than its grace (a failover: every replica shares the database, so leaving
// the Service would only turn 502s into refused connections and stop the catalog), serves its
// catalog from memory meanwhile, and leaves once the outage outlasts the grace.
func TestReadinessOutlastsAShortOutage(t *testing.T) {
	db := storetest.New(t)
	grace := 2 * time.Second
	s := newStack(t, stackOptions{databaseURL: db.URL, noWorker: true, outageGrace: &grace, metrics: true})
	tn := s.onboard(t, "acme", nil)
	key := tn.keys["production"]
	// The caches' first subscription flushes them: what the outage reads from memory must be
	// cached after it.
	s.waitSubscribed(t)
	if r := s.call(t, "production", "GET", "/readyz", "", nil); r.status != http.StatusOK {
		t.Fatalf("readyz before the outage: %d %s", r.status, r.raw)
	}
	// The key's principal and the catalog are in memory once used.
	if r := s.call(t, "production", "GET", "/v2/catalog/products", key, nil); r.status != http.StatusOK {
		t.Fatalf("catalog before the outage: %d %s", r.status, r.raw)
	}
	setConnectable(t, db.Name, false)
	defer setConnectable(t, db.Name, true)
	outage := time.Now()

	r := s.call(t, "production", "GET", "/readyz", "", nil)
	if r.status != http.StatusOK || r.str("database") != "unreachable" {
		t.Fatalf("readyz within the grace: %d %s, want 200 naming the unreachable database", r.status, r.raw)
	}
	if r := s.call(t, "production", "GET", "/v2/catalog/products", key, nil); r.status != http.StatusOK {
		t.Fatalf("catalog during the outage: %d %s", r.status, r.raw)
	}
	time.Sleep(time.Until(outage.Add(grace + 100*time.Millisecond)))
	if r := s.call(t, "production", "GET", "/readyz", "", nil); r.status != http.StatusServiceUnavailable {
		t.Fatalf("readyz after the grace: %d %s, want 503", r.status, r.raw)
	}
	setConnectable(t, db.Name, true)
	poll.UntilTrue(t, 30*time.Second, "ready again", func() bool {
		return s.call(t, "production", "GET", "/readyz", "", nil).status == http.StatusOK
	})
}
