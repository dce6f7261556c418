package apiserver

import (
	"github.com/prometheus/client_golang/prometheus"
)

// newWebhookDeliveries registers the webhook delivery counter on reg and returns the function
// the delivery worker reports each attempt to (notify.Delivery.Attempted). Partners are bounded
// by the Partner resources, outcomes by notify's three.
func newWebhookDeliveries(reg prometheus.Registerer) func(partner, environment, outcome string) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "codeport_webhook_deliveries_total",
		Help: "Webhook delivery attempts by partner (namespace/name), environment and outcome " +
			"(delivered, retrying, failed: the last attempt).",
	}, []string{"partner", "environment", "outcome"})
	reg.MustRegister(c)
	return func(partner, environment, outcome string) { c.WithLabelValues(partner, environment, outcome).Inc() }
}
