package notify

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/codeport/codeport/internal/apitime"
	"github.com/codeport/codeport/internal/pgtext"
	"github.com/codeport/codeport/internal/queryparam"
	"github.com/codeport/codeport/internal/store"
)

// Bounds of the event listing and of a replay.
const (
	DefaultEventPage = 50
	MaxEventPage     = 200
	// MaxReplayEvents is the most events one replay queues: a partner recovering from a long
	// outage replays in steps (since = nextSince) rather than flooding its own receiver.
	MaxReplayEvents = 500
	// EventRetention is how long events are kept (listed and replayable) after they were raised.
	EventRetention = 30 * 24 * time.Hour
)

// EventTypes are the webhook event types: the contract's, in its order, then the catalog events
// and stock.low.
var EventTypes = []string{EventOrderCompleted, EventOrderFailed, EventOrderPartiallyCompleted, EventBalanceLow,
	EventProductUpdated, EventProductRemoved, EventCatalogUpdated, EventStockLow}

// EventView is one event as GET /webhooks/events lists it.
type EventView struct {
	ID        string       `json:"id"`
	Type      string       `json:"type"`
	CreatedAt apitime.Time `json:"createdAt"`
	// Payload is the JSON every delivery of the event carries. The listing re-encodes it
	// compactly, so its bytes (whitespace) can differ from the signed body of a delivery.
	Payload  json.RawMessage `json:"payload"`
	Delivery DeliveryView    `json:"delivery"`
}

// DeliveryView is an event's delivery state.
type DeliveryView struct {
	State         string        `json:"state"`
	Attempts      int           `json:"attempts"`
	LastAttemptAt *apitime.Time `json:"lastAttemptAt"`
}

// EventPage is the body of GET /webhooks/events.
type EventPage struct {
	Events []EventView `json:"events"`
	// NextCursor continues the listing; null on the last page.
	NextCursor *string `json:"nextCursor"`
}

// ParamProblem is what is wrong with a query parameter.
type ParamProblem int

// Problems of query parameters.
const (
	// ParamInvalid: the value is not one the parameter takes.
	ParamInvalid ParamProblem = iota
	// ParamMissing: a required parameter is absent.
	ParamMissing
	// ParamEmptyWindow: until is not later than since.
	ParamEmptyWindow
)

// ParamError refuses a query parameter of the event listing or of a replay.
type ParamError struct {
	Param   string
	Problem ParamProblem
}

// Error implements error.
func (e *ParamError) Error() string {
	return fmt.Sprintf("query parameter %s: problem %d", e.Param, e.Problem)
}

// ParseEventQuery reads the listing's query parameters from args (a request's query); each of
// them refuses an empty value (queryparam).
func ParseEventQuery(args queryparam.Args) (store.WebhookEventQuery, error) {
	q := store.WebhookEventQuery{Limit: DefaultEventPage}
	if limit, ok := queryparam.Get(args, "limit"); ok {
		n, err := strconv.Atoi(limit)
		if err != nil || n < 1 || n > MaxEventPage {
			return q, &ParamError{Param: "limit"}
		}
		q.Limit = n
	}
	var err error
	if q.Type, err = eventType(args); err != nil {
		return q, err
	}
	if cursor, ok := queryparam.Get(args, "cursor"); ok {
		c, ok := decodeCursor(cursor)
		if !ok {
			return q, &ParamError{Param: "cursor"}
		}
		q.After = &c
	}
	return q, nil
}

// eventType is the type parameter: "" when absent, else one of EventTypes.
func eventType(args queryparam.Args) (string, error) {
	t, ok := queryparam.Get(args, "type")
	if ok && !slices.Contains(EventTypes, t) {
		return "", &ParamError{Param: "type"}
	}
	return t, nil
}

// encodeCursor makes the opaque cursor of the position after e. It is not signed: a cursor only
// positions the account's own listing, so a forged one shows nothing the caller could not see.
func encodeCursor(e store.WebhookEvent) string {
	return base64.RawURLEncoding.EncodeToString([]byte(e.CreatedAt.UTC().Format(time.RFC3339Nano) + "|" + e.ID))
}

func decodeCursor(s string) (store.WebhookEventCursor, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return store.WebhookEventCursor{}, false
	}
	at, id, ok := strings.Cut(string(raw), "|")
	// The id goes to PostgreSQL as text: a forged one it could not store is no position.
	if !ok || id == "" || !pgtext.Storable(id) {
		return store.WebhookEventCursor{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return store.WebhookEventCursor{}, false
	}
	return store.WebhookEventCursor{CreatedAt: t, ID: id}, true
}

// Events serves an account's webhook events to the API (their listing and replay), as
// orders.Service serves orders: the handlers hold it, and the database stays behind it.
type Events struct {
	db          *store.DB
	notifier    *Notifier
	environment string
}

// NewEvents serves the events of environment's accounts from db; replays are queued as
// notifier queues deliveries.
func NewEvents(db *store.DB, notifier *Notifier, environment string) *Events {
	return &Events{db: db, notifier: notifier, environment: environment}
}

// List returns a page of the account's events, newest first.
func (s *Events) List(ctx context.Context, accountID uuid.UUID, query store.WebhookEventQuery) (EventPage, error) {
	events, err := store.ListWebhookEvents(ctx, s.db.Pool, accountID, query)
	if err != nil {
		return EventPage{}, err
	}
	page := EventPage{Events: make([]EventView, 0, len(events))}
	for _, e := range events {
		v := EventView{ID: e.ID, Type: e.Type, CreatedAt: apitime.Of(e.CreatedAt), Payload: json.RawMessage(e.Payload),
			Delivery: DeliveryView{State: e.State, Attempts: e.Attempts}}
		if e.LastAttemptAt != nil {
			at := apitime.Of(*e.LastAttemptAt)
			v.Delivery.LastAttemptAt = &at
		}
		page.Events = append(page.Events, v)
	}
	if len(events) == query.Limit {
		next := encodeCursor(events[len(events)-1])
		page.NextCursor = &next
	}
	return page, nil
}

// ReplayRequest is a parsed POST /webhooks/replay.
type ReplayRequest struct {
	Since, Until time.Time
	Type         string
}

// ParseReplay reads the replay's query parameters from args (a request's query) at now: since
// is required (sent empty, it is missing), until defaults to now, and the window must not be
// empty. until and type refuse an empty value (queryparam).
func ParseReplay(args queryparam.Args, now time.Time) (ReplayRequest, error) {
	var r ReplayRequest
	since, _ := queryparam.Get(args, "since")
	if since == "" {
		return r, &ParamError{Param: "since", Problem: ParamMissing}
	}
	var err error
	if r.Since, err = time.Parse(time.RFC3339Nano, since); err != nil {
		return r, &ParamError{Param: "since"}
	}
	r.Until = now
	if until, ok := queryparam.Get(args, "until"); ok {
		if r.Until, err = time.Parse(time.RFC3339Nano, until); err != nil {
			return r, &ParamError{Param: "until"}
		}
	}
	if !r.Until.After(r.Since) {
		return r, &ParamError{Param: "until", Problem: ParamEmptyWindow}
	}
	if r.Type, err = eventType(args); err != nil {
		return r, err
	}
	return r, nil
}

// ReplayResult is the body of a replay's 202.
type ReplayResult struct {
	// Queued is how many events were queued for delivery again.
	Queued int `json:"queued"`
	// MaxEvents is the bound of one replay.
	MaxEvents int `json:"maxEvents"`
	// NextSince, present when the bound was reached, is where the next replay continues.
	NextSince *apitime.Time `json:"nextSince,omitempty"`
}

// ErrNoEndpoint is a replay of an account without a webhook endpoint.
var ErrNoEndpoint = errors.New("no webhook endpoint")

// Replay queues the account's delivered and failed events of the request's window for delivery
// again, with their ids and bodies unchanged, at most MaxReplayEvents of them. Events still
// pending are on their way already and are not queued twice.
func (s *Events) Replay(ctx context.Context, accountID uuid.UUID, r ReplayRequest) (ReplayResult, error) {
	job, err := store.NewJob(DeliverArgs{}, QueueName(s.environment), s.notifier.maxAttempts)
	if err != nil {
		return ReplayResult{}, err
	}
	var replayed store.ReplayedEvents
	err = s.db.InTx(ctx, func(tx store.Tx) error {
		if _, err := store.WebhookFor(ctx, tx, accountID); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return ErrNoEndpoint
			}
			return err
		}
		replayed, err = store.QueueWebhookReplay(ctx, tx, store.WebhookReplay{AccountID: accountID, Since: r.Since,
			Until: r.Until, Type: r.Type, Limit: MaxReplayEvents, Job: job})
		return err
	})
	if err != nil {
		return ReplayResult{}, err
	}
	res := ReplayResult{Queued: replayed.Queued, MaxEvents: MaxReplayEvents}
	if replayed.Queued == MaxReplayEvents {
		next := apitime.Of(replayed.Last)
		res.NextSince = &next
	}
	return res, nil
}

// PruneArgs is the job that deletes events past EventRetention.
type PruneArgs struct{}

// Kind names the job.
func (PruneArgs) Kind() string { return "codeport.prune_webhook_events" }

// pruneBatch bounds one DELETE, so pruning a large backlog never holds many row locks at once.
const pruneBatch = 5000

type pruneWorker struct {
	river.WorkerDefaults[PruneArgs]
	db *store.DB
}

// Work deletes every event older than EventRetention whose delivery is not pending, in batches.
func (w *pruneWorker) Work(ctx context.Context, _ *river.Job[PruneArgs]) error {
	cutoff := time.Now().Add(-EventRetention)
	for {
		n, err := store.PruneWebhookEvents(ctx, w.db.Pool, cutoff, pruneBatch)
		if err != nil || n < pruneBatch {
			return err
		}
	}
}

// PruneEvery is how often the retention job runs (on the one elected River leader).
const PruneEvery = time.Hour

// PeriodicJobs are the notification jobs River runs on a schedule, worked from the notification
// queue of environment (one the process works). River's elected leader, whichever environment
// it serves, inserts them; pruning covers the events of every environment.
func PeriodicJobs(environment string) []*river.PeriodicJob {
	return []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(PruneEvery),
		func() (river.JobArgs, *river.InsertOpts) {
			return PruneArgs{}, &river.InsertOpts{Queue: QueueName(environment)}
		}, nil)}
}
