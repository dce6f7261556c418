package notify

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/apitime"
)

// TestSignLikeStandardWebhooks: receivers verify deliveries with the Standard Webhooks libraries,
// so Sign must reproduce the scheme's published test vector. A whsec_ secret is its base64 key;
// any other secret, including a whsec_ one that is not base64, is used as raw bytes.
func TestSignLikeStandardWebhooks(t *testing.T) {
	const (
		id        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		timestamp = 1614265330
		body      = `{"test": 2432232314}`
	)
	tests := []struct {
		name, secret, want string
	}{
		{"the specification's vector", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
			"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
		// Standard base64, with + and / and padding, as the scheme's secrets are written.
		{"a whsec_ secret of standard base64", "whsec_++++///+AQJyb3RhdGVkLXNpZ25pbmcta2U=",
			"v1,XDcyJTnpSYN4MVHPvsFZH7jS6q2KRIEK8MtUNvHVtMk="},
		{"a raw secret", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "v1,ELhqG0Ku1gwOc1f4jyKdp3SFGFLAOdJ9bvpWLciCakI="},
		{"a whsec_ secret that is not base64", "whsec_not*base64", "v1,snoo2vxz886mjGi6hcIGqrk6T8gTYFoa8UWl8TbXw0k="},
	}
	for _, tt := range tests {
		if got := Sign([]byte(tt.secret), id, timestamp, []byte(body)); got != tt.want {
			t.Errorf("%s: Sign = %s, want %s", tt.name, got, tt.want)
		}
	}
}

// TestEventBody: the webhook body is the spec's draft payload plus the environment (the same
// externalOrderCode can exist in both), createdAt in the API's one date-time format (UTC,
// milliseconds, whatever the zone and precision of the instant), amounts of balance.low in
// major units.
func TestEventBody(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 4, 5, 123_456_789, time.FixedZone("CET", 3600))
	tests := []struct {
		event Event
		want  string
	}{
		{Event{ID: "evt_1", Type: EventOrderPartiallyCompleted, Environment: "sandbox", CreatedAt: apitime.Of(at),
			Data: OrderData{OrderID: uuid.MustParse("01930000-0000-7000-8000-000000000001"), ExternalOrderCode: "A-1",
				Status: "partially_completed"}},
			`{"id":"evt_1","type":"order.partially_completed","environment":"sandbox",` +
				`"createdAt":"2026-11-22T09:04:05.123Z","data":{"orderId":"01930000-0000-7000-8000-000000000001",` +
				`"externalOrderCode":"A-1","status":"partially_completed"}}`},
		{Event{ID: "evt_2", Type: EventBalanceLow, Environment: "production", CreatedAt: apitime.Of(at),
			Data: BalanceData{Currency: "EUR", Balance: "12.50", Threshold: "100.00"}},
			`{"id":"evt_2","type":"balance.low","environment":"production","createdAt":"2026-11-22T09:04:05.123Z",` +
				`"data":{"currency":"EUR","balance":12.50,"threshold":100.00}}`},
	}
	for _, tt := range tests {
		got, err := json.Marshal(tt.event)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Errorf("got  %s\nwant %s", got, tt.want)
		}
	}
}

// TestRetryDelays: deliveries back off by doubling from Base and never wait longer than Max.
func TestRetryDelays(t *testing.T) {
	r := DefaultRetry()
	tests := []struct {
		attempt int
		want    time.Duration
	}{
		{1, 5 * time.Second},
		{2, 10 * time.Second},
		{3, 20 * time.Second},
		{10, 2560 * time.Second},
		{11, time.Hour},
		{40, time.Hour},
	}
	for _, tt := range tests {
		if got := r.delay(tt.attempt); got != tt.want {
			t.Errorf("delay before attempt %d: %s, want %s", tt.attempt, got, tt.want)
		}
	}
	if got := (Retry{Base: 2 * time.Hour, Max: time.Hour}).delay(1); got != time.Hour {
		t.Errorf("a base above the maximum waits %s, want the maximum", got)
	}
}
