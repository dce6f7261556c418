-- +goose Up
-- Where a partner wants its events, and the secret its receivers verify signatures with.
CREATE TABLE webhook_endpoints (
    partner_id  uuid PRIMARY KEY REFERENCES partners (id),
    url         text NOT NULL CHECK (url ~ '^https?://'),
    secret      bytea NOT NULL,
    -- Empty means every event type.
    event_types text[] NOT NULL DEFAULT '{}',
    enabled     boolean NOT NULL DEFAULT true,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Every event raised, with its stable id, so a delivery retried for a day carries the same id.
CREATE TABLE webhook_events (
    id         text PRIMARY KEY,
    account_id uuid NOT NULL REFERENCES accounts (id),
    type       text NOT NULL CHECK (type IN ('order.completed', 'order.failed', 'order.partially_completed', 'balance.low')),
    payload    jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    delivered_at timestamptz
);
CREATE INDEX webhook_events_account_idx ON webhook_events (account_id, created_at);

-- +goose Down
-- codeport:destroys SELECT count(*) FROM webhook_endpoints
-- codeport:destroys SELECT count(*) FROM webhook_events
DROP TABLE webhook_events;
DROP TABLE webhook_endpoints;
