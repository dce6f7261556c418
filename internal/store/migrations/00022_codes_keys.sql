-- +goose Up
-- The codes keys this database's codes and secrets are sealed under, each by its key id (a
-- fingerprint of the key, never the key). A process refuses to start with a key whose id is not
-- recorded here; the first one to start on a database records its own, after checking that the
-- ciphertexts already there open with it. Without this, a process started with another key sold
-- codes it could not open.
CREATE TABLE codes_keys (
    -- The small number ciphertexts name their key by, rather than repeating the id in every row.
    ref               smallint PRIMARY KEY CHECK (ref > 0),
    key_id            text NOT NULL UNIQUE CHECK (key_id ~ '^[0-9a-f]{16}$'),
    -- The key that digests codes to detect duplicates, sealed under this row's key. It is the
    -- database's, not derived from whichever key is current, so a code imported again under
    -- another key is still recognised; each key of the database holds it sealed.
    sealed_digest_key bytea NOT NULL,
    recorded_at       timestamptz NOT NULL DEFAULT now()
);

-- Every ciphertext names the key it is sealed under. Rows from before this migration were all
-- sealed under the database's one key, which becomes key 1 when it is recorded: the constant
-- default gives them that key without rewriting the tables, and covers the rows a binary of the
-- previous version writes while an upgrade rolls out. The checks are NOT VALID for the same
-- reason (existing rows hold 1; checking them would scan the tables under an exclusive lock);
-- they hold for every row written from now on. No foreign key to codes_keys: every delivery
-- would lock the key's row.
ALTER TABLE code_stock ADD COLUMN key_ref smallint NOT NULL DEFAULT 1;
ALTER TABLE code_stock ADD CONSTRAINT code_stock_key_ref_check CHECK (key_ref > 0) NOT VALID;
ALTER TABLE delivered_codes ADD COLUMN key_ref smallint NOT NULL DEFAULT 1;
ALTER TABLE delivered_codes ADD CONSTRAINT delivered_codes_key_ref_check CHECK (key_ref > 0) NOT VALID;
ALTER TABLE webhook_endpoints ADD COLUMN secret_key_ref smallint NOT NULL DEFAULT 1;
ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_secret_key_ref_check
    CHECK (secret_key_ref > 0) NOT VALID;

-- +goose Down
-- codeport:destroys SELECT count(*) FROM codes_keys
-- codeport:destroys SELECT count(*) FROM code_stock WHERE key_ref <> 1
-- codeport:destroys SELECT count(*) FROM delivered_codes WHERE key_ref <> 1
-- codeport:destroys SELECT count(*) FROM webhook_endpoints WHERE secret_key_ref <> 1
ALTER TABLE webhook_endpoints DROP COLUMN secret_key_ref;
ALTER TABLE delivered_codes DROP COLUMN key_ref;
ALTER TABLE code_stock DROP COLUMN key_ref;
DROP TABLE codes_keys;
