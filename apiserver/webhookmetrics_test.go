package apiserver_test

import (
	"testing"
	"time"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/poll"
)

// TestWebhookDeliveryMetrics checks that every delivery attempt counts under its partner and
// environment: a receiver failing twice shows two retrying attempts, then one delivered.
func TestWebhookDeliveryMetrics(t *testing.T) {
	s := newStack(t, stackOptions{metrics: true})
	tn := s.onboard(t, "acme", nil)
	rcv := newReceiver(t, 2)
	s.setWebhook(t, tn, rcv.server.URL)
	s.topUp(t, tn, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"})
	r := s.call(t, "sandbox", "POST", "/v2/orders", tn.keys["sandbox"],
		order("wh-metrics", line{"productCode": "99000000000001", "quantity": 1}))
	if r.status != 202 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	series := func(outcome string) string {
		return "codeport_webhook_deliveries_total{environment=sandbox,outcome=" + outcome +
			",partner=" + tn.namespace + "/acme}"
	}
	var got map[string]float64
	poll.UntilTrue(t, 30*time.Second, "the delivered attempt counted", func() bool {
		got = scrape(t, s.metricsURL)
		return got[series("delivered")] == 1
	})
	if got[series("retrying")] != 2 {
		t.Fatalf("retrying attempts = %v, want 2 (the receiver failed twice)", got[series("retrying")])
	}
	if n, ok := got[series("failed")]; ok {
		t.Fatalf("failed = %v: no delivery gave up", n)
	}
}
