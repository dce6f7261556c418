package store_test

import (
	"context"
	"testing"
)

// TestWebhookDeliveryStateBackfill: migration 00019 gives existing events the delivery state
// their jobs show: delivered when delivered, pending while a job is still live, failed when the
// job gave up or is gone, with the attempts and last attempt the jobs recorded.
func TestWebhookDeliveryStateBackfill(t *testing.T) {
	ctx := context.Background()
	db, m := openEmpty(t)
	if _, err := m.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	if _, err := m.DownTo(ctx, 18); err != nil {
		t.Fatalf("down 00019: %v", err)
	}
	var accountID string
	err := db.Pool.QueryRow(ctx, `WITH p AS (INSERT INTO partners (namespace, name) VALUES ('p', 'acme') RETURNING id)
		INSERT INTO accounts (partner_id, environment) SELECT id, 'production' FROM p RETURNING id`).Scan(&accountID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []struct {
		id        string
		delivered bool
		jobState  string
		attempt   int
	}{
		{"evt_delivered", true, "completed", 2},
		{"evt_retrying", false, "retryable", 3},
		{"evt_discarded", false, "discarded", 5},
		{"evt_jobless", false, "", 0},
	} {
		if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_events (id, account_id, type, payload, delivered_at)
			VALUES ($1, $2, 'order.completed', '{}', CASE WHEN $3 THEN now() END)`, e.id, accountID, e.delivered); err != nil {
			t.Fatal(err)
		}
		if e.jobState == "" {
			continue
		}
		if _, err := db.Pool.Exec(ctx, `INSERT INTO river_job (kind, queue, args, max_attempts, state, attempt,
				attempted_at, finalized_at)
			VALUES ('codeport.deliver_webhook', 'notify_production', jsonb_build_object('eventId', $1::text), 10,
				$2::river_job_state, $3, now(),
				CASE WHEN $2 IN ('completed', 'discarded') THEN now() END)`, e.id, e.jobState, e.attempt); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatalf("up 00019 over existing events: %v", err)
	}
	want := map[string]struct {
		state    string
		attempts int
		attempt  bool
	}{
		"evt_delivered": {"delivered", 2, true},
		"evt_retrying":  {"pending", 3, true},
		"evt_discarded": {"failed", 5, true},
		"evt_jobless":   {"failed", 0, false},
	}
	for id, w := range want {
		var state string
		var attempts int
		var attempted bool
		if err := db.Pool.QueryRow(ctx, `SELECT state, attempts, last_attempt_at IS NOT NULL FROM webhook_events
			WHERE id = $1`, id).Scan(&state, &attempts, &attempted); err != nil {
			t.Fatal(err)
		}
		if state != w.state || attempts != w.attempts || attempted != w.attempt {
			t.Errorf("%s: %s after %d attempts (last recorded %v), want %+v", id, state, attempts, attempted, w)
		}
	}
}
