-- +goose Up
-- A partner's endpoint is kept per environment (the operator writes the partner-wide one into
-- both), and its signing secret is kept only sealed with the codes key. Existing endpoints
-- serve both environments; their secrets are dropped here and sealed anew by the operator's
-- next reconcile of each partner. Until then deliveries fail and are retried, never lost.
ALTER TABLE webhook_endpoints ADD COLUMN environment text NOT NULL DEFAULT 'sandbox'
    CHECK (environment IN ('sandbox', 'production'));
ALTER TABLE webhook_endpoints ALTER COLUMN environment DROP DEFAULT;
ALTER TABLE webhook_endpoints DROP CONSTRAINT webhook_endpoints_pkey;
INSERT INTO webhook_endpoints (partner_id, environment, url, secret, event_types, enabled, updated_at)
    SELECT partner_id, 'production', url, secret, event_types, enabled, updated_at FROM webhook_endpoints;
ALTER TABLE webhook_endpoints ADD PRIMARY KEY (partner_id, environment);
ALTER TABLE webhook_endpoints DROP COLUMN secret;
-- NULL until the operator has sealed the secret.
ALTER TABLE webhook_endpoints ADD COLUMN sealed_secret bytea;

-- +goose Down
-- codeport:destroys SELECT count(*) FROM webhook_endpoints
-- The plaintext secrets cannot be recovered: the endpoints are removed, and the operator of the
-- version migrated down to writes them again from the Partners.
DELETE FROM webhook_endpoints;
ALTER TABLE webhook_endpoints DROP COLUMN sealed_secret;
ALTER TABLE webhook_endpoints ADD COLUMN secret bytea NOT NULL;
ALTER TABLE webhook_endpoints DROP CONSTRAINT webhook_endpoints_pkey;
ALTER TABLE webhook_endpoints DROP COLUMN environment;
ALTER TABLE webhook_endpoints ADD PRIMARY KEY (partner_id);
