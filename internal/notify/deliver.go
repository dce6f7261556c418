package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/store"
)

// Retry is the delivery schedule: exponential from Base, doubling up to Max between attempts,
// kept up for at least 24 hours.
type Retry struct {
	Base time.Duration
	Max  time.Duration
}

// DefaultRetry retries after 5 s, 10 s, 20 s, … up to hourly, for a little over a day.
func DefaultRetry() Retry { return Retry{Base: 5 * time.Second, Max: time.Hour} }

func (r Retry) delay(attempt int) time.Duration {
	d := r.Base
	for i := 1; i < attempt && d < r.Max; i++ {
		d *= 2
	}
	return min(d, r.Max)
}

// attemptsFor24h is how many attempts the schedule needs to span 24 hours, at most
// store.MaxJobAttempts.
func (r Retry) attemptsFor24h() int {
	var total time.Duration
	n := 1
	for ; total < 24*time.Hour && n < store.MaxJobAttempts; n++ {
		total += r.delay(n)
	}
	return n
}

// Sign computes the Standard Webhooks signature header value for a message: "v1," followed by
// the base64 HMAC-SHA256 of "{id}.{timestamp}.{body}". A secret of the form whsec_<base64> is
// decoded first, as the scheme's libraries do.
func Sign(secret []byte, id string, timestamp int64, body []byte) string {
	key := secret
	if s := string(secret); strings.HasPrefix(s, "whsec_") {
		if decoded, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_")); err == nil {
			key = decoded
		}
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%d.", id, timestamp)
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// DeliverArgs is the delivery job of one event.
type DeliverArgs struct {
	EventID string `json:"eventId"`
}

// Kind names the job.
func (DeliverArgs) Kind() string { return "codeport.deliver_webhook" }

type deliverWorker struct {
	river.WorkerDefaults[DeliverArgs]
	db      *store.DB
	secrets *codes.Cipher
	client  *http.Client
	retry   Retry
	timeout time.Duration
	// attempted, when set, hears of every recorded attempt (Delivery.Attempted).
	attempted func(partner, environment, outcome string)
}

// Timeout lets the HTTP timeout, not River's, end a slow receiver's attempt.
func (w *deliverWorker) Timeout(*river.Job[DeliverArgs]) time.Duration {
	return w.timeout + 5*time.Second
}

// NextRetry spaces attempts exponentially, with jitter so a receiver back from an outage is not
// hit by every queued event at once.
func (w *deliverWorker) NextRetry(job *river.Job[DeliverArgs]) time.Time {
	d := w.retry.delay(job.Attempt)
	jitter := time.Duration(rand.Int64N(int64(d)/10 + 1)) //nolint:gosec // jitter needs no cryptographic randomness
	return time.Now().Add(d + jitter)
}

// Outcomes of a delivery attempt, as Delivery.Attempted reports them.
const (
	// OutcomeDelivered: the receiver answered 2xx.
	OutcomeDelivered = "delivered"
	// OutcomeRetrying: the attempt failed and another one is scheduled.
	OutcomeRetrying = "retrying"
	// OutcomeFailed: the last attempt failed; the event is marked failed.
	OutcomeFailed = "failed"
)

// Work posts the event; only a 2xx answer counts as delivered. Every attempt carries the same
// webhook-id so receivers can drop duplicates.
func (w *deliverWorker) Work(ctx context.Context, job *river.Job[DeliverArgs]) error {
	ev, err := store.WebhookEventByID(ctx, w.db.Pool, job.Args.EventID)
	if errors.Is(err, store.ErrNotFound) {
		return river.JobCancel(fmt.Errorf("event %s no longer exists", job.Args.EventID))
	}
	if err != nil {
		return err
	}
	// Only a pending event has a delivery to make: a job run again after its event was
	// delivered (at least once) sends nothing.
	if ev.State != store.WebhookPending {
		return nil
	}
	target, err := w.attempt(ctx, ev)
	if err == nil {
		w.observe(target, OutcomeDelivered)
		return store.MarkWebhookDelivered(context.WithoutCancel(ctx), w.db.Pool, ev.ID)
	}
	var cancel *river.JobCancelError
	if errors.As(err, &cancel) || job.Attempt >= job.MaxAttempts {
		w.observe(target, OutcomeFailed)
		// The last attempt: the event's delivery has failed (a replay can queue it again).
		if markErr := store.MarkWebhookFailed(context.WithoutCancel(ctx), w.db.Pool, ev.ID); markErr != nil {
			return errors.Join(err, markErr)
		}
		return err
	}
	w.observe(target, OutcomeRetrying)
	return err
}

// observe reports an attempt made to target; an attempt that ended before it was recorded
// (the event's partner unknown, the database failing) reached no receiver and is not reported.
func (w *deliverWorker) observe(target store.WebhookTarget, outcome string) {
	if w.attempted != nil && target.Partner != "" {
		w.attempted(target.Partner, target.Environment, outcome)
	}
}

// attempt posts the event once, counting the attempt; nil means the receiver took it. The
// target is returned once the attempt is recorded, and is zero before.
func (w *deliverWorker) attempt(ctx context.Context, ev store.WebhookEvent) (store.WebhookTarget, error) {
	target, err := store.WebhookFor(ctx, w.db.Pool, ev.AccountID)
	if errors.Is(err, store.ErrNotFound) {
		// The partner removed its webhook (or was deleted) since: nobody to tell.
		return store.WebhookTarget{}, river.JobCancel(fmt.Errorf("no webhook endpoint for event %s", ev.ID))
	}
	if err != nil {
		return store.WebhookTarget{}, err
	}
	if err := store.RecordWebhookAttempt(ctx, w.db.Pool, ev.ID); err != nil {
		return store.WebhookTarget{}, err
	}
	return target, w.post(ctx, ev, target)
}

// post signs the event and posts it to target.
func (w *deliverWorker) post(ctx context.Context, ev store.WebhookEvent, target store.WebhookTarget) error {
	if target.SealedSecret == nil {
		return fmt.Errorf("deliver %s: the webhook secret is not sealed yet "+
			"(the operator seals it on its next reconcile of the partner)", ev.ID)
	}
	secret, err := w.secrets.OpenSecret(target.SecretKey, target.SealedSecret, target.Owner)
	if err != nil {
		// Sealed under another codes key: the operator reseals it with its own on its next
		// reconcile of the partner.
		return fmt.Errorf("deliver %s: open the webhook secret: %w", ev.ID, err)
	}
	timestamp := time.Now().Unix()
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.URL, bytes.NewReader(ev.Payload))
	if err != nil {
		return river.JobCancel(fmt.Errorf("webhook url: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "codeport-webhooks/1")
	req.Header.Set("webhook-id", ev.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(timestamp, 10))
	req.Header.Set("webhook-signature", Sign(secret, ev.ID, timestamp, ev.Payload))
	resp, err := w.client.Do(req)
	if err != nil {
		return fmt.Errorf("deliver %s: %w", ev.ID, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode <= 399:
		return fmt.Errorf("deliver %s: receiver answered %d "+
			"(redirects are not followed; the endpoint must answer 2xx itself)", ev.ID, resp.StatusCode)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return fmt.Errorf("deliver %s: receiver answered %d", ev.ID, resp.StatusCode)
	}
	return nil
}
