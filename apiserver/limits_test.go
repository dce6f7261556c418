package apiserver_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/codeport/codeport/apiserver/ratelimit"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// awayFromMinuteEnd waits until a window has at least 5 s left, so a sequence of requests
// lands in one fixed window.
func awayFromMinuteEnd() {
	if s := time.Now().Second(); s >= 55 {
		time.Sleep(time.Duration(61-s) * time.Second)
	}
}

func TestRateLimit(t *testing.T) {
	rdb := storetest.Redis(t)
	for name, limiter := range map[string]ratelimit.Limiter{
		"memory": ratelimit.NewMemory(),
		"redis":  ratelimit.NewRedis(rdb),
	} {
		t.Run(name, func(t *testing.T) {
			s := newStack(t, stackOptions{limiter: limiter})
			tn := s.onboard(t, "acme", testfixture.WithRateLimit(5))
			awayFromMinuteEnd()
			for i := range 5 {
				// Errors count too: the third request is a 404.
				path := "/v2/ping"
				if i == 2 {
					path = "/v2/orders/nope"
				}
				r := s.call(t, "production", "GET", path, tn.keys["production"], nil)
				if r.header.Get("X-RateLimit-Limit") != "5" || r.header.Get("X-RateLimit-Remaining") != strconv.Itoa(4-i) {
					t.Fatalf("request %d: limit %q remaining %q",
						i, r.header.Get("X-RateLimit-Limit"), r.header.Get("X-RateLimit-Remaining"))
				}
				reset, _ := strconv.ParseInt(r.header.Get("X-RateLimit-Reset"), 10, 64)
				if reset%60 != 0 || reset <= time.Now().Unix() || reset > time.Now().Unix()+60 {
					t.Fatalf("X-RateLimit-Reset %d is not the end of the current minute", reset)
				}
			}
			r := s.call(t, "production", "GET", "/v2/ping", tn.keys["production"], nil)
			retry := r.header.Get("Retry-After")
			expectError(t, r, http.StatusTooManyRequests, "Rate limit exceeded. Retry after "+retry+"s.")
			if n, err := strconv.Atoi(retry); err != nil || n < 1 || n > 60 || r.header.Get("X-RateLimit-Remaining") != "0" {
				t.Fatalf("Retry-After %q, remaining %q", retry, r.header.Get("X-RateLimit-Remaining"))
			}
			// Another partner's key has its own budget.
			other := s.onboard(t, "other", nil)
			if r := s.call(t, "production", "GET", "/v2/ping", other.keys["production"], nil); r.status != 200 {
				t.Fatalf("other partner limited: %d", r.status)
			}
		})
	}
}

func TestSharedLimitAcrossReplicas(t *testing.T) {
	rdb := storetest.Redis(t)
	// Two stacks are two replicas sharing one Redis: together they allow the budget once.
	a := newStack(t, stackOptions{limiter: ratelimit.NewRedis(rdb)})
	b := newStack(t, stackOptions{limiter: ratelimit.NewRedis(rdb), noWorker: true})
	tn := a.onboard(t, "acme", testfixture.WithRateLimit(4))
	awayFromMinuteEnd()
	statuses := []int{}
	for i := range 6 {
		s := a
		if i%2 == 1 {
			s = b
		}
		statuses = append(statuses, s.call(t, "production", "GET", "/v2/ping", tn.keys["production"], nil).status)
	}
	want := []int{200, 200, 200, 200, 429, 429}
	for i := range want {
		if statuses[i] != want[i] {
			t.Fatalf("statuses %v, want %v", statuses, want)
		}
	}
}

func TestHealthAndReadiness(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	for _, path := range []string{"/healthz", "/readyz"} {
		if r := s.call(t, "production", "GET", path, "", nil); r.status != 200 {
			t.Fatalf("%s: %d %s", path, r.status, r.raw)
		}
	}
}

func TestConfigChangesReachRunningServers(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	tn := s.onboard(t, "acme", nil)
	key := tn.keys["production"]
	if r := s.call(t, "production", "GET", "/v2/ping", key, nil); r.status != 200 {
		t.Fatalf("%d", r.status)
	}
	// Revocation: the operator rotates the key; the old one stops working at once.
	if _, err := s.prov.RevokeKeys(context.Background(), tn.namespace+"/acme-production"); err != nil {
		t.Fatal(err)
	}
	// The revocation reaches the API by notification: milliseconds, or seconds on a busy machine.
	poll.UntilTrue(t, 10*time.Second, "revocation", func() bool {
		return s.call(t, "production", "GET", "/v2/ping", key, nil).status == http.StatusUnauthorized
	})
	// A catalog change: a product removed from the catalog disappears from the running API.
	c, products := testCatalog(tn.namespace)
	if _, err := s.prov.ApplyCatalog(context.Background(), c, products[1:]); err != nil {
		t.Fatal(err)
	}
	sb := tn.keys["sandbox"]
	// So does the catalog change, then the snapshot is refreshed in the background.
	poll.UntilTrue(t, 10*time.Second, "catalog change", func() bool {
		return s.call(t, "sandbox", "GET", "/v2/catalog/products/10000000000001", sb, nil).status == http.StatusNotFound
	})
}
