package apiserver_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/poll"
)

// registerKey issues one more key of the tenant, as the operator would for an ApiKey.
func (s *stack) registerKey(t *testing.T, tn *tenant, env, kind string) string {
	t.Helper()
	plain, err := auth.GenerateKey(env)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.prov.RegisterKey(t.Context(), provisioning.Key{Namespace: tn.namespace, Partner: tn.name,
		Environment: env, Kind: kind, Source: tn.namespace + "/" + tn.name + "-" + env + "-" + kind,
		Plaintext: plain}); err != nil {
		t.Fatal(err)
	}
	return plain
}

func scenario(name string) http.Header { return http.Header{"X-Sandbox-Scenario": {name}} }

// TestSandboxScenarios: on the sandbox, X-Sandbox-Scenario forces the contract's error answers on
// any endpoint, keeping the rate-limit headers; production ignores the header.
func TestSandboxScenarios(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{databaseURL: storetest.New(t).URL})
	tn := s.onboard(t, "acme", nil)
	s.topUp(t, tn, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"})
	tn.keys["bearer:sandbox"] = "Bearer " + s.registerKey(t, tn, "sandbox", "bearerToken")
	const (
		rateLimited       = "Rate limit exceeded. Retry after "
		internal          = "Internal server error"
		insufficientFunds = "Insufficient funds. Please top up your wallet and try again."
		timedOut          = "The request timed out. Its outcome is unknown: " +
			"retry it (orders with the same externalOrderCode) to find out."
		unknown = `Unknown X-Sandbox-Scenario "slow". ` +
			"Valid scenarios: timeout, rate-limited, server-error, insufficient-funds."
	)
	orderBody := func(code string) map[string]any {
		return order(code, line{"productCode": "99000000000001", "quantity": 1})
	}
	for _, c := range []struct {
		name, scenario, method, path string
		body                         any
		key                          string
		status                       int
		message                      string
	}{
		{"rate-limited ping", "rate-limited", "GET", "/v2/ping", nil, "sandbox", 429, rateLimited},
		{"rate-limited order", "rate-limited", "POST", "/v2/orders", orderBody("sc-429"), "sandbox", 429, rateLimited},
		{"rate-limited v1", "rate-limited", "GET", "/v1/catalog", nil, "bearer:sandbox", 429, rateLimited},
		{"server error catalog", "server-error", "GET", "/v2/catalog/products", nil, "sandbox", 500, internal},
		{"server error order", "server-error", "POST", "/v2/orders", orderBody("sc-500"), "sandbox", 500, internal},
		{"server error wallet", "server-error", "GET", "/v2/wallet", nil, "sandbox", 500, internal},
		{"insufficient funds order", "insufficient-funds", "POST", "/v2/orders", orderBody("sc-422"), "sandbox", 422,
			insufficientFunds},
		{"insufficient funds elsewhere runs", "insufficient-funds", "GET", "/v2/wallet", nil, "sandbox", 200, ""},
		{"timeout product", "timeout", "GET", "/v2/catalog/products/99000000000001", nil, "sandbox", 504, timedOut},
		{"timeout unknown order", "timeout", "GET", "/v2/orders/none", nil, "sandbox", 504, timedOut},
		{"unknown scenario", "slow", "GET", "/v2/wallet", nil, "sandbox", 400, unknown},
		{"unknown scenario, unknown route", "slow", "GET", "/v2/nowhere", nil, "sandbox", 400, unknown},
		// The documents' pattern is in lower case, and so is what the sandbox takes.
		{"other letter case", "Server-Error", "GET", "/v2/ping", nil, "sandbox", 400,
			strings.Replace(unknown, `"slow"`, `"Server-Error"`, 1)},
		{"no key first", "server-error", "GET", "/v2/ping", nil, "", 401, "Missing API key"},
		{"production ignores", "server-error", "GET", "/v2/wallet", nil, "production", 200, ""},
		{"production ignores unknown", "slow", "GET", "/v2/ping", nil, "production", 200, ""},
		{"production ignores rate-limited", "rate-limited", "GET", "/v2/catalog/products", nil, "production", 200, ""},
		{"production ignores timeout", "timeout", "GET", "/v2/orders/none", nil, "production", 404, "Order none not found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := "sandbox"
			if c.key == "production" {
				env = "production"
			}
			key := tn.keys[c.key]
			r := s.callWith(t, env, c.method, c.path, key, c.body, scenario(c.scenario))
			if c.message == "" {
				if r.status != c.status {
					t.Fatalf("%d %s, want %d", r.status, r.raw, c.status)
				}
			} else if c.status == 429 {
				checkScenarioRateLimited(t, r)
			} else {
				expectError(t, r, c.status, c.message)
			}
			if c.key != "" && r.header.Get("X-RateLimit-Limit") == "" {
				t.Errorf("no rate-limit headers: %v", r.header)
			}
		})
	}
	// Nothing was ordered by the refused placements.
	for _, code := range []string{"sc-429", "sc-500", "sc-422"} {
		expectError(t, s.call(t, "sandbox", "GET", "/v2/orders/"+code, tn.keys["sandbox"], nil), 404,
			"Order "+code+" not found")
	}
}

// checkScenarioRateLimited checks the contract's 429: message, Retry-After equal to the seconds
// the message names, the window's reset after it, no requests remaining.
func checkScenarioRateLimited(t *testing.T, r response) {
	t.Helper()
	retry := r.header.Get("Retry-After")
	expectError(t, r, 429, "Rate limit exceeded. Retry after "+retry+"s.")
	seconds, err := strconv.ParseInt(retry, 10, 64)
	if err != nil || seconds < 1 || seconds > 60 {
		t.Fatalf("Retry-After %q", retry)
	}
	if reset, err := strconv.ParseInt(r.header.Get("X-RateLimit-Reset"), 10, 64); err != nil ||
		reset < time.Now().Unix() {
		t.Fatalf("X-RateLimit-Reset %q", r.header.Get("X-RateLimit-Reset"))
	}
	if r.header.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("X-RateLimit-Remaining %q", r.header.Get("X-RateLimit-Remaining"))
	}
}

// TestSandboxTimeoutPlacesTheOrder: under the timeout scenario an order is placed and fulfilled
// and its webhook fires although the answer is a 504, as when a gateway gives up on a placement
// that went through; retrying with the same externalOrderCode finds it.
func TestSandboxTimeoutPlacesTheOrder(t *testing.T) {
	s, tn, rcv := newWebhookTenant(t)
	key := tn.keys["sandbox"]
	for code, product := range map[string]string{"to-ok": "99000000000001", "to-fail": "99000000000003"} {
		body := order(code, line{"productCode": product, "quantity": 1})
		r := s.callWith(t, "sandbox", "POST", "/v2/orders", key, body, scenario("timeout"))
		expectError(t, r, 504, "The request timed out. Its outcome is unknown: "+
			"retry it (orders with the same externalOrderCode) to find out.")
		if r.header.Get("Idempotent-Replayed") != "" {
			t.Fatal("a 504 says Idempotent-Replayed")
		}
		retried := s.call(t, "sandbox", "POST", "/v2/orders", key, body)
		if retried.status != 200 || retried.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry: %d %s", retried.status, retried.raw)
		}
	}
	poll.UntilTrue(t, 30*time.Second, "both orders' events delivered", func() bool { return len(rcv.delivered()) == 2 })
	types := map[string]bool{}
	for _, e := range s.events(t, "sandbox", key, "").Events {
		types[e.Type] = true
	}
	if !types["order.completed"] || !types["order.failed"] {
		t.Fatalf("events: %v", types)
	}
}
