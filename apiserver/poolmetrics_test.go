package apiserver_test

import "testing"

// TestPoolMetrics checks that /metrics reports the connection pool as configured and counts the
// connections requests take from it.
func TestPoolMetrics(t *testing.T) {
	s := newStack(t, stackOptions{metrics: true})
	tn := s.onboard(t, "acme", nil)
	before := scrape(t, s.metricsURL)
	if got := before["codeport_db_pool_max_connections{}"]; got != 40 {
		t.Errorf("codeport_db_pool_max_connections = %v, want the stack's 40", got)
	}
	for range 3 {
		s.call(t, "production", "GET", "/v2/wallet", tn.keys["production"], nil)
	}
	after := scrape(t, s.metricsURL)
	if after["codeport_db_pool_acquires_total{}"] < before["codeport_db_pool_acquires_total{}"]+3 {
		t.Errorf("three wallet reads moved codeport_db_pool_acquires_total from %v to %v",
			before["codeport_db_pool_acquires_total{}"], after["codeport_db_pool_acquires_total{}"])
	}
	open := after["codeport_db_pool_connections{state=acquired}"] + after["codeport_db_pool_connections{state=idle}"]
	if open < 1 {
		t.Errorf("no open connection reported: %v", open)
	}
}
