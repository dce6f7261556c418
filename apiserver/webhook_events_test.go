package apiserver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/notify"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/poll"
)

// switchReceiver is a webhook endpoint that answers 503 while down and 200 otherwise, recording
// the body of every request by event id.
type switchReceiver struct {
	down   atomic.Bool
	mu     sync.Mutex
	bodies map[string][][]byte
	ok     map[string]int
	server *httptest.Server
}

func newSwitchReceiver(t *testing.T) *switchReceiver {
	t.Helper()
	r := &switchReceiver{bodies: map[string][][]byte{}, ok: map[string]int{}}
	r.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		id := req.Header.Get("webhook-id")
		r.mu.Lock()
		defer r.mu.Unlock()
		r.bodies[id] = append(r.bodies[id], body)
		if r.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		r.ok[id]++
	}))
	t.Cleanup(r.server.Close)
	return r
}

// delivered is how many 2xx answers each event got.
func (r *switchReceiver) delivered() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for id, n := range r.ok {
		out[id] = n
	}
	return out
}

// eachDelivered says whether events distinct events were each delivered n times.
func (r *switchReceiver) eachDelivered(events, n int) bool {
	d := r.delivered()
	if len(d) != events {
		return false
	}
	for _, c := range d {
		if c != n {
			return false
		}
	}
	return true
}

type listedEvent struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	CreatedAt string          `json:"createdAt"`
	Payload   json.RawMessage `json:"payload"`
	Delivery  struct {
		State         string  `json:"state"`
		Attempts      int     `json:"attempts"`
		LastAttemptAt *string `json:"lastAttemptAt"`
	} `json:"delivery"`
}

type eventPage struct {
	Events     []listedEvent `json:"events"`
	NextCursor *string       `json:"nextCursor"`
}

func (s *stack) events(t *testing.T, env, key, query string) eventPage {
	t.Helper()
	r := s.call(t, env, "GET", "/v2/webhooks/events"+query, key, nil)
	if r.status != 200 {
		t.Fatalf("list events%s: %d %s", query, r.status, r.raw)
	}
	if r.header.Get("X-RateLimit-Limit") == "" {
		t.Fatal("event listing without rate-limit headers")
	}
	var page eventPage
	if err := json.Unmarshal(r.raw, &page); err != nil {
		t.Fatal(err)
	}
	return page
}

// newWebhookTenant is a stack with one partner whose endpoint is a switchReceiver and whose
// sandbox wallet holds 100 EUR.
func newWebhookTenant(t *testing.T) (*stack, *tenant, *switchReceiver) {
	t.Helper()
	s := newStack(t, stackOptions{})
	tn := s.onboard(t, "acme", nil)
	rcv := newSwitchReceiver(t)
	s.setWebhook(t, tn, rcv.server.URL)
	s.topUp(t, tn, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"})
	return s, tn, rcv
}

// finishSandboxOrders places sandbox orders of the given products and waits until each finished.
func (s *stack) finishSandboxOrders(t *testing.T, tn *tenant, products map[string]line) {
	t.Helper()
	for code, l := range products {
		r := s.call(t, "sandbox", "POST", "/v2/orders", tn.keys["sandbox"], order(code, l))
		if r.status != 202 {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		s.waitOrder(t, "sandbox", tn.keys["sandbox"], code)
	}
}

func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// TestWebhookEventsListing: an account lists its own events, newest first and keyset-paged, each
// with the body its deliveries carried and its delivery state; no other account (nor its own
// other environment) sees them; bad parameters are 400s in the contract's shape.
func TestWebhookEventsListing(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{databaseURL: storetest.New(t).URL})
	acme, other := s.onboard(t, "acme", nil), s.onboard(t, "other", nil)
	rcv, otherRcv := newSwitchReceiver(t), newSwitchReceiver(t)
	s.setWebhook(t, acme, rcv.server.URL)
	s.setWebhook(t, other, otherRcv.server.URL)
	s.topUp(t, acme, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"})
	key := acme.keys["sandbox"]
	// One at a time, so their creation order is known.
	for _, o := range []struct {
		code string
		l    line
	}{
		{"ev-ok", line{"productCode": "99000000000001", "quantity": 1}},
		{"ev-fail", line{"productCode": "99000000000003", "quantity": 1}},
		{"ev-partial", line{"productCode": "99000000000004", "quantity": 2}},
	} {
		s.finishSandboxOrders(t, acme, map[string]line{o.code: o.l})
	}
	poll.UntilTrue(t, 30*time.Second, "three events delivered", func() bool { return len(rcv.delivered()) == 3 })
	poll.UntilTrue(t, 10*time.Second, "three events marked delivered", func() bool {
		for _, e := range s.events(t, "sandbox", key, "").Events {
			if e.Delivery.State != store.WebhookDelivered {
				return false
			}
		}
		return true
	})

	first := s.events(t, "sandbox", key, "?limit=2")
	if len(first.Events) != 2 || first.NextCursor == nil {
		t.Fatalf("first page: %+v", first)
	}
	rest := s.events(t, "sandbox", key, "?limit=2&cursor="+url.QueryEscape(*first.NextCursor))
	if len(rest.Events) != 1 || rest.NextCursor != nil {
		t.Fatalf("second page: %+v", rest)
	}
	all := append(first.Events, rest.Events...)
	wantTypes := []string{notify.EventOrderPartiallyCompleted, notify.EventOrderFailed, notify.EventOrderCompleted}
	for i, e := range all {
		if e.Type != wantTypes[i] {
			t.Fatalf("event %d is %s, want %s (newest first)", i, e.Type, wantTypes[i])
		}
		if e.Delivery.State != "delivered" || e.Delivery.Attempts != 1 || e.Delivery.LastAttemptAt == nil {
			t.Errorf("event %s delivery %+v, want delivered after 1 attempt", e.ID, e.Delivery)
		}
		rcv.mu.Lock()
		bodies := rcv.bodies[e.ID]
		rcv.mu.Unlock()
		if len(bodies) != 1 || !sameJSON(bodies[0], e.Payload) {
			t.Errorf("event %s: payload %s, delivered %q", e.ID, e.Payload, bodies)
		}
		if !etaFormat.MatchString(e.CreatedAt) {
			t.Errorf("createdAt %q", e.CreatedAt)
		}
	}
	if failed := s.events(t, "sandbox", key, "?type=order.failed"); len(failed.Events) != 1 ||
		failed.Events[0].ID != all[1].ID {
		t.Fatalf("type filter: %+v", failed)
	}

	// Tenants and environments are apart.
	if page := s.events(t, "sandbox", other.keys["sandbox"], ""); len(page.Events) != 0 {
		t.Fatalf("another partner sees %d events", len(page.Events))
	}
	if page := s.events(t, "production", acme.keys["production"], ""); len(page.Events) != 0 {
		t.Fatalf("production sees %d sandbox events", len(page.Events))
	}
	// A cursor carries no authority: another account's cursor positions only its own listing.
	foreignCursor := "?cursor=" + url.QueryEscape(*first.NextCursor)
	if page := s.events(t, "sandbox", other.keys["sandbox"], foreignCursor); len(page.Events) != 0 {
		t.Fatalf("another partner's cursor shows %d events", len(page.Events))
	}

	for query, message := range map[string]string{
		"?limit=0":   "limit must be an integer from 1 to 200",
		"?limit=201": "limit must be an integer from 1 to 200",
		"?limit=ten": "limit must be an integer from 1 to 200",
		"?type=order.placed": "type must be one of order.completed, order.failed, order.partially_completed, balance.low, " +
			"product.updated, product.removed, catalog.updated, stock.low",
		"?cursor=%21%21":   "cursor is not valid: pass the nextCursor of a previous page",
		"?cursor=bm9waXBl": "cursor is not valid: pass the nextCursor of a previous page",
	} {
		expectError(t, s.call(t, "sandbox", "GET", "/v2/webhooks/events"+query, key, nil), 400, message)
	}
	expectError(t, s.call(t, "sandbox", "GET", "/v2/webhooks/events", "", nil), 401, "Missing API key")
}

// TestWebhookReplay: a replay delivers an account's past events again with the same ids and
// bodies; events whose delivery is still pending are never queued twice, however often the
// replay is repeated; another account's or environment's replay touches none of them; an account
// without an endpoint gets a 409.
func TestWebhookReplay(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{databaseURL: storetest.New(t).URL})
	acme, other, bare := s.onboard(t, "acme", nil), s.onboard(t, "other", nil), s.onboard(t, "bare", nil)
	rcv, otherRcv := newSwitchReceiver(t), newSwitchReceiver(t)
	s.setWebhook(t, acme, rcv.server.URL)
	s.setWebhook(t, other, otherRcv.server.URL)
	s.topUp(t, acme, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"})
	since := time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano)
	s.finishSandboxOrders(t, acme, map[string]line{
		"rp-ok":   {"productCode": "99000000000001", "quantity": 1},
		"rp-fail": {"productCode": "99000000000003", "quantity": 1},
	})
	key := acme.keys["sandbox"]
	delivered := func(n int) func() bool { return func() bool { return rcv.eachDelivered(2, n) } }
	poll.UntilTrue(t, 30*time.Second, "both events delivered", delivered(1))
	poll.UntilTrue(t, 10*time.Second, "both marked delivered", func() bool {
		page := s.events(t, "sandbox", key, "")
		return len(page.Events) == 2 && page.Events[0].Delivery.State == "delivered" &&
			page.Events[1].Delivery.State == "delivered"
	})
	replay := func(key, env, query string) response {
		return s.call(t, env, "POST", "/v2/webhooks/replay"+query, key, nil)
	}
	queued := func(r response) int {
		t.Helper()
		if r.status != 202 {
			t.Fatalf("replay: %d %s", r.status, r.raw)
		}
		n, _ := r.body["queued"].(float64)
		return int(n)
	}

	// Other accounts and environments replay nothing of acme's.
	if n := queued(replay(other.keys["sandbox"], "sandbox", "?since="+url.QueryEscape(since))); n != 0 {
		t.Fatalf("another partner's replay queued %d", n)
	}
	if n := queued(replay(acme.keys["production"], "production", "?since="+url.QueryEscape(since))); n != 0 {
		t.Fatalf("the production replay queued %d sandbox events", n)
	}
	expectError(t, replay(bare.keys["sandbox"], "sandbox", "?since="+url.QueryEscape(since)), 409,
		"No webhook endpoint is configured for this environment. Ask your account manager to set one up, then replay.")

	// While the receiver is down, replays keep each event's one delivery pending.
	rcv.down.Store(true)
	if n := queued(replay(key, "sandbox", "?since="+url.QueryEscape(since))); n != 2 {
		t.Fatalf("first replay queued %d, want 2", n)
	}
	if n := queued(replay(key, "sandbox", "?since="+url.QueryEscape(since))); n != 0 {
		t.Fatalf("second replay queued %d events already pending", n)
	}
	poll.UntilTrue(t, 10*time.Second, "replayed deliveries failing", func() bool {
		page := s.events(t, "sandbox", key, "")
		for _, e := range page.Events {
			if e.Delivery.State != "pending" || e.Delivery.Attempts < 3 {
				return false
			}
		}
		return true
	})
	rcv.down.Store(false)
	poll.UntilTrue(t, 30*time.Second, "both events delivered again", delivered(2))
	time.Sleep(300 * time.Millisecond) // no late duplicates
	if !delivered(2)() {
		t.Fatalf("deliveries after two replays: %v, want each event twice", rcv.delivered())
	}
	rcv.mu.Lock()
	for id, bodies := range rcv.bodies {
		for _, b := range bodies {
			if !bytes.Equal(b, bodies[0]) {
				t.Errorf("event %s was replayed with a different body", id)
			}
		}
	}
	rcv.mu.Unlock()
	if n := len(otherRcv.delivered()); n != 0 {
		t.Fatalf("the other partner's endpoint got %d events", n)
	}

	// A window that holds only the failed order's event, and a type filter.
	if n := queued(replay(key, "sandbox", "?since="+url.QueryEscape(since)+"&type=order.failed")); n != 1 {
		t.Fatalf("typed replay queued %d", n)
	}
	if n := queued(replay(key, "sandbox", "?since="+url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339))+
		"&until="+url.QueryEscape(time.Now().Add(2*time.Hour).Format(time.RFC3339)))); n != 0 {
		t.Fatalf("a future window queued %d", n)
	}

}

// TestWebhookReplayBadInput: a replay's parameters are checked before anything is queued.
func TestWebhookReplayBadInput(t *testing.T) {
	s := newStack(t, stackOptions{})
	acme := s.onboard(t, "acme", nil)
	since := url.QueryEscape(time.Now().UTC().Format(time.RFC3339Nano))
	typeMessage := "type must be one of order.completed, order.failed, order.partially_completed, balance.low, " +
		"product.updated, product.removed, catalog.updated, stock.low"
	for query, message := range map[string]string{
		"":                                "since is required: an RFC 3339 date-time",
		"?since=yesterday":                "since must be an RFC 3339 date-time, e.g. 2026-11-25T08:00:00Z",
		"?since=2026-11-25":               "since must be an RFC 3339 date-time, e.g. 2026-11-25T08:00:00Z",
		"?since=" + since + "&until=soon": "until must be an RFC 3339 date-time, e.g. 2026-11-25T09:00:00Z",
		"?since=" + since + "&type=order": typeMessage,
		"?since=2026-11-25T10:00:00Z&until=2026-11-25T09:00:00Z": "until must be later than since",
	} {
		expectError(t, s.call(t, "sandbox", "POST", "/v2/webhooks/replay"+query, acme.keys["sandbox"], nil), 400, message)
	}
}

// TestWebhookEventRetention: pruning deletes events past the retention period unless their
// delivery is pending, and keeps younger ones.
func TestWebhookEventRetention(t *testing.T) {
	s, acme, rcv := newWebhookTenant(t)
	s.finishSandboxOrders(t, acme, map[string]line{
		"old":     {"productCode": "99000000000001", "quantity": 1},
		"young":   {"productCode": "99000000000001", "quantity": 1},
		"pending": {"productCode": "99000000000001", "quantity": 1},
	})
	poll.UntilTrue(t, 30*time.Second, "three events delivered", func() bool { return len(rcv.delivered()) == 3 })
	ctx := t.Context()
	const day = 24 * time.Hour
	age := map[string]time.Duration{"old": 31 * day, "young": 29 * day, "pending": 40 * day}
	for code, d := range age {
		if _, err := s.db.Pool.Exec(ctx, `UPDATE webhook_events SET created_at = now() - make_interval(secs => $2),
			state = CASE WHEN $1 = 'pending' THEN 'pending' ELSE state END
			WHERE payload->'data'->>'externalOrderCode' = $1`, code, d.Seconds()); err != nil {
			t.Fatal(err)
		}
	}
	n, err := store.PruneWebhookEvents(ctx, s.db.Pool, time.Now().Add(-notify.EventRetention), 10)
	if err != nil || n != 1 {
		t.Fatalf("pruned %d, %v; want the one old delivered event", n, err)
	}
	var left []string
	rows, err := s.db.Pool.Query(ctx, `SELECT payload->'data'->>'externalOrderCode' FROM webhook_events e
		JOIN accounts a ON a.id = e.account_id JOIN partners p ON p.id = a.partner_id WHERE p.namespace = $1 ORDER BY 1`,
		acme.namespace)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var code string
		if err := rows.Scan(&code); err != nil {
			t.Fatal(err)
		}
		left = append(left, code)
	}
	if fmt.Sprint(left) != "[pending young]" {
		t.Fatalf("left after pruning: %v", left)
	}
}

// TestWebhookFailedDeliveryReplayed: an event whose delivery gives up (here: the endpoint was
// removed while it retried) is listed as failed, and once an endpoint is back a replay delivers
// it, with its id.
func TestWebhookFailedDeliveryReplayed(t *testing.T) {
	s, tn, rcv := newWebhookTenant(t)
	key := tn.keys["sandbox"]
	since := url.QueryEscape(time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano))
	rcv.down.Store(true)
	s.finishSandboxOrders(t, tn, map[string]line{"fd-ok": {"productCode": "99000000000001", "quantity": 1}})
	state := func(want string, minAttempts int) func() bool {
		return func() bool {
			page := s.events(t, "sandbox", key, "")
			return len(page.Events) == 1 && page.Events[0].Delivery.State == want &&
				page.Events[0].Delivery.Attempts >= minAttempts
		}
	}
	poll.UntilTrue(t, 10*time.Second, "the delivery retrying", state("pending", 2))
	s.setWebhooks(t, tn, provisioning.Webhooks{})
	poll.UntilTrue(t, 10*time.Second, "the delivery given up", state("failed", 2))
	expectError(t, s.call(t, "sandbox", "POST", "/v2/webhooks/replay?since="+since, key, nil), 409,
		"No webhook endpoint is configured for this environment. Ask your account manager to set one up, then replay.")

	rcv.down.Store(false)
	s.setWebhook(t, tn, rcv.server.URL)
	r := s.call(t, "sandbox", "POST", "/v2/webhooks/replay?since="+since, key, nil)
	if r.status != 202 || r.body["queued"] != float64(1) {
		t.Fatalf("replay: %d %s", r.status, r.raw)
	}
	poll.UntilTrue(t, 10*time.Second, "the replay delivered", state("delivered", 3))
	id := s.events(t, "sandbox", key, "").Events[0].ID
	if d := rcv.delivered(); len(d) != 1 || d[id] != 1 {
		t.Fatalf("deliveries %v, want %s once", d, id)
	}
}

// TestWebhookReplayIsBounded: one replay queues at most maxEvents, oldest first, and says where
// to continue; continuing from nextSince queues the rest.
func TestWebhookReplayIsBounded(t *testing.T) {
	s, tn, rcv := newWebhookTenant(t)
	start := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	const events = notify.MaxReplayEvents + 1
	s.storeDeliveredEvents(t, tn, start, events)
	since := url.QueryEscape(start.Format(time.RFC3339Nano))
	r := s.call(t, "sandbox", "POST", "/v2/webhooks/replay?since="+since, tn.keys["sandbox"], nil)
	last := start.Add(notify.MaxReplayEvents * time.Millisecond).Format("2006-01-02T15:04:05.000Z")
	if r.status != 202 || r.body["queued"] != float64(notify.MaxReplayEvents) ||
		r.body["maxEvents"] != float64(notify.MaxReplayEvents) || r.str("nextSince") != last {
		t.Fatalf("first replay: %d %s, want %d queued up to %s", r.status, r.raw, notify.MaxReplayEvents, last)
	}
	r = s.call(t, "sandbox", "POST", "/v2/webhooks/replay?since="+url.QueryEscape(r.str("nextSince")),
		tn.keys["sandbox"], nil)
	// The newest event of the first replay may have been delivered already and go out again.
	if n, _ := r.body["queued"].(float64); r.status != 202 || n < 1 || n > 2 || r.body["nextSince"] != nil {
		t.Fatalf("second replay: %d %s", r.status, r.raw)
	}
	poll.UntilTrue(t, 60*time.Second, "every event delivered", func() bool { return len(rcv.delivered()) == events })
}

// storeDeliveredEvents records n delivered events of the tenant's sandbox account, created a
// millisecond apart after start, as if raised and delivered long ago, and returns the prefix of
// their ids.
func (s *stack) storeDeliveredEvents(t *testing.T, tn *tenant, start time.Time, n int) string {
	t.Helper()
	prefix := "evt_" + uuid.NewString() + "_"
	if _, err := s.db.Pool.Exec(t.Context(), `INSERT INTO webhook_events (id, account_id, type, payload, created_at,
			delivered_at, state, attempts)
		SELECT $4 || i, $1, 'order.completed', jsonb_build_object('id', $4 || i),
			$2::timestamptz + i * interval '1 ms', now(), 'delivered', 1
		FROM generate_series(1, $3) i`, s.account(t, tn, "sandbox").ID, start, n, prefix); err != nil {
		t.Fatal(err)
	}
	return prefix
}

// TestConcurrentReplaysQueueEachEventOnce: replays racing over the same events queue each of
// them exactly once between them.
func TestConcurrentReplaysQueueEachEventOnce(t *testing.T) {
	s, tn, rcv := newWebhookTenant(t)
	rcv.down.Store(true)
	start := time.Now().Add(-time.Hour).UTC()
	const events, replays = 50, 8
	prefix := s.storeDeliveredEvents(t, tn, start, events)
	since := url.QueryEscape(start.Format(time.RFC3339Nano))
	var queued atomic.Int64
	var wg sync.WaitGroup
	for range replays {
		wg.Go(func() {
			r := s.call(t, "sandbox", "POST", "/v2/webhooks/replay?since="+since, tn.keys["sandbox"], nil)
			if r.status != 202 {
				t.Errorf("replay: %d %s", r.status, r.raw)
			}
			n, _ := r.body["queued"].(float64)
			queued.Add(int64(n))
		})
	}
	wg.Wait()
	var jobs int
	if err := s.db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job
		WHERE kind = 'codeport.deliver_webhook' AND starts_with(args->>'eventId', $1)`, prefix).
		Scan(&jobs); err != nil {
		t.Fatal(err)
	}
	if queued.Load() != events || jobs != events {
		t.Fatalf("%d replays queued %d events in %d jobs, want each of %d once", replays, queued.Load(), jobs, events)
	}
}
