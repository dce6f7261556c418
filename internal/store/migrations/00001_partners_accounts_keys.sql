-- +goose Up
-- Partners mirror the Partner custom resource; an account is one environment of a partner.
-- Everything a partner owns in the data plane (keys, wallets, orders, limits) hangs off an account.
CREATE TABLE partners (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    namespace      text NOT NULL,
    name           text NOT NULL,
    display_name   text NOT NULL DEFAULT '',
    contact_email  text NOT NULL DEFAULT '',
    catalog_id     uuid,
    suspended      boolean NOT NULL DEFAULT false,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    -- Partners are never hard-deleted: their orders and ledger must stay readable.
    deleted_at     timestamptz,
    CONSTRAINT partners_namespace_name_key UNIQUE (namespace, name)
);

CREATE TABLE accounts (
    id                     uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    partner_id             uuid NOT NULL REFERENCES partners (id),
    environment            text NOT NULL CHECK (environment IN ('sandbox', 'production')),
    -- Allowed client networks; an empty list admits nobody.
    ip_whitelist           cidr[] NOT NULL DEFAULT '{}',
    rate_limit_per_minute  integer NOT NULL DEFAULT 600 CHECK (rate_limit_per_minute > 0),
    ordering_enabled       boolean NOT NULL DEFAULT true,
    wallet_enabled         boolean NOT NULL DEFAULT true,
    max_quantity_per_order integer CHECK (max_quantity_per_order > 0),
    -- Per-currency daily spend caps in minor units, e.g. {"EUR": 5000000}.
    daily_spend_limits     jsonb NOT NULL DEFAULT '{}',
    -- Major units, applied to every currency of the wallet.
    low_balance_threshold  numeric(30, 6) NOT NULL DEFAULT 0 CHECK (low_balance_threshold >= 0),
    suspended              boolean NOT NULL DEFAULT false,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT accounts_partner_environment_key UNIQUE (partner_id, environment)
);

-- Keys are stored only as SHA-256 digests of the plaintext; the prefix is kept for display.
CREATE TABLE api_keys (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    account_id   uuid NOT NULL REFERENCES accounts (id),
    kind         text NOT NULL CHECK (kind IN ('apiKey', 'bearerToken')),
    digest       bytea NOT NULL CHECK (octet_length(digest) = 32),
    key_prefix   text NOT NULL,
    -- The ApiKey resource (namespace/name) that issued this key and the rotation it belongs to.
    source       text NOT NULL DEFAULT '',
    rotation     bigint NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz,
    CONSTRAINT api_keys_digest_key UNIQUE (digest)
);
CREATE INDEX api_keys_account_idx ON api_keys (account_id);
CREATE INDEX api_keys_source_idx ON api_keys (source) WHERE revoked_at IS NULL;

-- +goose Down
-- codeport:destroys SELECT count(*) FROM partners
-- codeport:destroys SELECT count(*) FROM accounts
-- codeport:destroys SELECT count(*) FROM api_keys
DROP TABLE api_keys;
DROP TABLE accounts;
DROP TABLE partners;
