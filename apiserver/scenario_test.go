package apiserver

import "testing"

func TestParseScenario(t *testing.T) {
	for _, c := range []struct {
		value, want string
		ok          bool
	}{
		{"timeout", ScenarioTimeout, true},
		{"rate-limited", ScenarioRateLimited, true},
		{"server-error", ScenarioServerError, true},
		{"insufficient-funds", ScenarioInsufficientFunds, true},
		// The documents' pattern is case-sensitive, and so is the sandbox.
		{"Rate-Limited", "", false},
		{"SERVER-ERROR", "", false},
		{"Timeout", "", false},
		{" timeout", "", false},
		{"", "", false},
		{"rate_limited", "", false},
		{"timeout,server-error", "", false},
		{"slow", "", false},
	} {
		got, ok := parseScenario(c.value)
		if got != c.want || ok != c.ok {
			t.Errorf("parseScenario(%q) = %q, %v; want %q, %v", c.value, got, ok, c.want, c.ok)
		}
	}
}
