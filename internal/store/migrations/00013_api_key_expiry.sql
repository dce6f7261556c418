-- +goose Up
-- A key replaced by a rotation with a grace period stays valid until expires_at: the API refuses
-- it from then on by itself (no notification marks the moment), and the operator sets
-- revoked_at once it has passed. NULL, the default, is a key without an end; revoked_at alone
-- still revokes at once. Binaries older than this column ignore it and stop accepting the key
-- when the operator revokes it.
ALTER TABLE api_keys ADD COLUMN expires_at timestamptz;

-- +goose Down
-- codeport:destroys SELECT count(*) FROM api_keys WHERE expires_at IS NOT NULL
ALTER TABLE api_keys DROP COLUMN expires_at;
