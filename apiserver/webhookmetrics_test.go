package apiserver_test

import (
	"testing"
	"time"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/test/poll"
)

// TestWebhookDeliveryMetrics checks that every delivery attempt counts under its partner and
// environment: a receiver failing twice shows two retrying attempts, then one delivered; an
// endpoint no request can be made to fails its one attempt for good.
func TestWebhookDeliveryMetrics(t *testing.T) {
	s := newStack(t, stackOptions{metrics: true})
	acme, beta := s.onboard(t, "acme", nil), s.onboard(t, "beta", nil)
	rcv := newReceiver(t, 2)
	s.setWebhook(t, acme, rcv.server.URL)
	s.setWebhook(t, beta, "http://no such host/")
	for _, tn := range []*tenant{acme, beta} {
		s.topUp(t, tn, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"})
		r := s.call(t, "sandbox", "POST", "/v2/orders", tn.keys["sandbox"],
			order("wh-metrics", line{"productCode": "99000000000001", "quantity": 1}))
		if r.status != 202 {
			t.Fatalf("%d %s", r.status, r.raw)
		}
	}
	series := func(tn *tenant, outcome string) string {
		return "codeport_webhook_deliveries_total{environment=sandbox,outcome=" + outcome +
			",partner=" + tn.namespace + "/" + tn.name + "}"
	}
	var got map[string]float64
	poll.UntilTrue(t, 30*time.Second, "the delivered and the failed attempt counted", func() bool {
		got = scrape(t, s.metricsURL)
		return got[series(acme, "delivered")] == 1 && got[series(beta, "failed")] == 1
	})
	if got[series(acme, "retrying")] != 2 {
		t.Fatalf("acme's retrying attempts = %v, want 2 (the receiver failed twice)", got[series(acme, "retrying")])
	}
	for _, unexpected := range []string{series(acme, "failed"), series(beta, "retrying"), series(beta, "delivered")} {
		if n, ok := got[unexpected]; ok {
			t.Errorf("%s = %v", unexpected, n)
		}
	}
}
