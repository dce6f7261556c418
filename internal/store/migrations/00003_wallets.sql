-- +goose Up
-- A balance row per (account, currency). The CHECK makes overdraft impossible even if
-- application code were wrong: a debit that would go negative fails the transaction.
CREATE TABLE wallet_balances (
    account_id  uuid NOT NULL REFERENCES accounts (id),
    currency    text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    balance     bigint NOT NULL DEFAULT 0 CHECK (balance >= 0),
    -- Set while the balance is below the account's threshold, so alerts fire once per crossing.
    low_balance boolean NOT NULL DEFAULT false,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, currency)
);

-- Append-only ledger. Every change of wallet_balances has exactly one entry, written in the same
-- transaction; (account, kind, reference) makes each top-up, debit and refund apply at most once.
CREATE TABLE wallet_entries (
    id            bigserial PRIMARY KEY,
    account_id    uuid NOT NULL,
    currency      text NOT NULL,
    kind          text NOT NULL CHECK (kind IN ('top_up', 'order_debit', 'refund', 'adjustment')),
    reference     text NOT NULL,
    amount        bigint NOT NULL CHECK (amount <> 0),
    balance_after bigint NOT NULL CHECK (balance_after >= 0),
    note          text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT wallet_entries_reference_key UNIQUE (account_id, kind, reference),
    CONSTRAINT wallet_entries_balance_fk FOREIGN KEY (account_id, currency)
        REFERENCES wallet_balances (account_id, currency),
    CONSTRAINT wallet_entries_sign_check CHECK (
        (kind IN ('top_up', 'refund') AND amount > 0)
        OR (kind = 'order_debit' AND amount < 0)
        OR kind = 'adjustment')
);
CREATE INDEX wallet_entries_account_idx ON wallet_entries (account_id, currency, created_at);

-- The ledger is append-only: refuse updates and deletes outright.
-- +goose StatementBegin
CREATE FUNCTION wallet_entries_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'wallet_entries is append-only';
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER wallet_entries_no_update BEFORE UPDATE OR DELETE ON wallet_entries
    FOR EACH ROW EXECUTE FUNCTION wallet_entries_append_only();

-- +goose Down
-- codeport:destroys SELECT count(*) FROM wallet_balances
-- codeport:destroys SELECT count(*) FROM wallet_entries
DROP TABLE wallet_entries;
DROP FUNCTION wallet_entries_append_only();
DROP TABLE wallet_balances;
