package apiserver_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/catalog"
	"github.com/codeport/codeport/internal/test/poll"
)

// TestOrderMetadata: metadata is stored with the order and shown on its placement, its reads,
// the history and its webhook; a replay with the same metadata is a replay, with other metadata
// the contract's 409; invalid metadata is a 400 that places nothing.
func TestOrderMetadata(t *testing.T) {
	s := newStack(t, stackOptions{})
	tn := s.onboard(t, "acme", nil)
	rcv := newReceiver(t, 0)
	s.setWebhook(t, tn, rcv.server.URL)
	s.topUp(t, tn, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"})
	key := tn.keys["sandbox"]
	meta := map[string]any{"invoice": "INV-42", "customer": "c, \"9\""}
	body := order("meta-1", line{"productCode": catalog.TestSuccessFixed, "quantity": 1})
	body["metadata"] = meta
	want := fmt.Sprint(meta)

	placed := s.call(t, "sandbox", "POST", "/v2/orders", key, body)
	if placed.status != 202 || fmt.Sprint(placed.body["metadata"]) != want {
		t.Fatalf("placement: %d %s", placed.status, placed.raw)
	}
	done := s.waitOrder(t, "sandbox", key, "meta-1")
	if fmt.Sprint(done.body["metadata"]) != want {
		t.Fatalf("read: %s", done.raw)
	}
	listed, _ := s.pages(t, "sandbox", key, "/v2/orders?externalOrderCode=meta-1", "orders")
	if len(listed) != 1 || fmt.Sprint(listed[0]["metadata"]) != want {
		t.Fatalf("history: %v", listed)
	}

	// The same keys in another order are the same payload; other metadata is another order.
	replay := s.call(t, "sandbox", "POST", "/v2/orders", key,
		json.RawMessage(`{"metadata":{"customer":"c, \"9\"","invoice":"INV-42"},"externalOrderCode":"meta-1",`+
			`"currency":"EUR","orderProducts":[{"productCode":"`+catalog.TestSuccessFixed+`","quantity":1}]}`))
	if replay.status != 200 || replay.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %s", replay.status, replay.raw)
	}
	for _, other := range []any{map[string]any{"invoice": "INV-43"}, nil} {
		b := order("meta-1", line{"productCode": catalog.TestSuccessFixed, "quantity": 1})
		if other != nil {
			b["metadata"] = other
		}
		expectError(t, s.call(t, "sandbox", "POST", "/v2/orders", key, b), 409,
			"An order with this external order code already exists.")
	}

	// Without metadata, responses have none.
	plain := s.call(t, "sandbox", "POST", "/v2/orders", key,
		order("meta-2", line{"productCode": catalog.TestSuccessFixed, "quantity": 1}))
	if _, has := plain.body["metadata"]; plain.status != 202 || has {
		t.Fatalf("order without metadata: %d %s", plain.status, plain.raw)
	}

	invalid := []struct {
		metadata any
		message  string
	}{
		{"invoice=1", "metadata must be an object of string keys and string values"},
		{map[string]any{"n": 1}, `metadata value of key "n" must be a string`},
		{map[string]any{strings.Repeat("k", 41): "v"}, "metadata keys must be 1 to 40 characters"},
		{map[string]any{"k": strings.Repeat("v", 501)}, `metadata value of key "k" must be at most 500 characters`},
	}
	for i, tc := range invalid {
		b := order(fmt.Sprintf("meta-bad-%d", i), line{"productCode": catalog.TestSuccessFixed, "quantity": 1})
		b["metadata"] = tc.metadata
		expectError(t, s.call(t, "sandbox", "POST", "/v2/orders", key, b), 400, tc.message)
	}
	if r := s.call(t, "sandbox", "GET", "/v2/orders/meta-bad-0", key, nil); r.status != 404 {
		t.Fatalf("a refused order was placed: %d %s", r.status, r.raw)
	}

	// The order.completed webhook carries the metadata.
	var data map[string]any
	poll.UntilTrue(t, 30*time.Second, "the order's webhook", func() bool {
		for _, d := range rcv.deliveries() {
			var ev struct{ Data map[string]any }
			if json.Unmarshal(d.body, &ev) == nil && ev.Data["externalOrderCode"] == "meta-1" {
				data = ev.Data
				return true
			}
		}
		return false
	})
	if fmt.Sprint(data["metadata"]) != want {
		t.Fatalf("webhook data %v", data)
	}
}
