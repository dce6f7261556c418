-- +goose Up
-- Each event carries its delivery state, so partners can list their events with it and ask for
-- a replay: pending (a delivery job is queued or running), delivered (the receiver answered 2xx
-- to the last delivery), failed (the retry schedule ran out, or there was no endpoint to try).
-- A replay moves an event back to pending; only one delivery of an event is ever queued.
ALTER TABLE webhook_events
    ADD COLUMN state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
    ADD COLUMN attempts integer NOT NULL DEFAULT 0,
    ADD COLUMN last_attempt_at timestamptz;
-- Existing events take their state from their delivery jobs (River keeps finished jobs for a
-- while only: an undelivered event without a live job has failed).
UPDATE webhook_events SET
    state = CASE WHEN delivered_at IS NOT NULL THEN 'delivered' ELSE 'failed' END,
    attempts = CASE WHEN delivered_at IS NOT NULL THEN 1 ELSE 0 END,
    last_attempt_at = delivered_at;
UPDATE webhook_events e SET
    state = CASE WHEN e.delivered_at IS NULL AND j.live THEN 'pending' ELSE e.state END,
    attempts = greatest(e.attempts, j.attempt),
    last_attempt_at = coalesce(j.attempted_at, e.last_attempt_at)
FROM (
    SELECT args->>'eventId' AS event_id,
           bool_or(state IN ('available', 'pending', 'retryable', 'running', 'scheduled')) AS live,
           max(attempt) AS attempt, max(attempted_at) AS attempted_at
    FROM river_job WHERE kind = 'codeport.deliver_webhook' GROUP BY 1
) j
WHERE j.event_id = e.id;
-- The listing reads an account's events newest first, paged on (created_at, id).
CREATE INDEX webhook_events_account_listing_idx ON webhook_events (account_id, created_at DESC, id DESC);
DROP INDEX webhook_events_account_idx;
-- Pruning deletes events past the retention period, oldest first.
CREATE INDEX webhook_events_created_idx ON webhook_events (created_at);

-- +goose Down
-- codeport:destroys SELECT count(*) FROM webhook_events WHERE state <> 'pending' OR attempts <> 0 OR last_attempt_at IS NOT NULL
DROP INDEX webhook_events_created_idx;
CREATE INDEX webhook_events_account_idx ON webhook_events (account_id, created_at);
DROP INDEX webhook_events_account_listing_idx;
ALTER TABLE webhook_events DROP COLUMN last_attempt_at, DROP COLUMN attempts, DROP COLUMN state;
