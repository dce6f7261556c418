-- +goose NO TRANSACTION
-- +goose Up
-- Retention of order details (docs/operations.md, "Order retention"). An order past the
-- retention period keeps its row in orders, the record that makes a re-post of its
-- externalOrderCode a replay rather than a second order, and that daily spend limits sum; its
-- lines, delivered codes (still sealed) and ledger entries move to the archive tables below, and
-- archived_at says when. A run of archived ledger entries leaves one carried entry in their
-- place (kind adjustment, reference archived:<id>), at the id, time and balance of the run's
-- last entry, so every balance still equals the sum of its online ledger and balance_after still
-- chains from entry to entry.
--
-- Expand-only: binaries of the previous release neither read nor write any of it, and archival
-- does not run while one of them is registered in codeport_instances (store.ArchiveOrders).
-- Every statement can run again after a partial run (no transaction: the indexes are built
-- concurrently on tables that are large and busy).
--
-- Adding the column takes orders' strongest lock for an instant, but waiting for it queues
-- every read and write of orders behind the wait: a pg_dump holds a weaker lock for the whole
-- dump, 8 minutes at 10 M orders. lock_timeout bounds the wait, in a transaction of the statement's own; past
-- it the step fails, changes nothing, and migrate up runs it again (the hook Job retries).
-- +goose StatementBegin
DO $$
BEGIN
    SET LOCAL lock_timeout = '5s';
    ALTER TABLE orders ADD COLUMN IF NOT EXISTS archived_at timestamptz;
END;
$$;
-- +goose StatementEnd

CREATE TABLE IF NOT EXISTS order_lines_archive (
    order_id     uuid NOT NULL,
    line_no      integer NOT NULL,
    product_code text NOT NULL,
    unit_price   bigint NOT NULL,
    quantity     integer NOT NULL,
    currency     text NOT NULL,
    sku          text NOT NULL,
    archived_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (order_id, line_no)
);

-- Codes stay sealed under the key they were sealed with; rotating the codes key reseals these
-- too (store.SealedTables), so retiring a key never strands an archived code.
CREATE TABLE IF NOT EXISTS delivered_codes_archive (
    order_id     uuid NOT NULL,
    line_no      integer NOT NULL,
    unit_no      integer NOT NULL,
    stock_id     bigint,
    key_ref      smallint NOT NULL CHECK (key_ref > 0),
    ciphertext   bytea NOT NULL,
    digest       bytea NOT NULL,
    delivered_at timestamptz NOT NULL,
    archived_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (order_id, line_no, unit_no)
);
CREATE INDEX IF NOT EXISTS delivered_codes_archive_key_ref_idx ON delivered_codes_archive (key_ref);

CREATE TABLE IF NOT EXISTS wallet_entries_archive (
    id            bigint PRIMARY KEY,
    account_id    uuid NOT NULL,
    currency      text NOT NULL,
    kind          text NOT NULL,
    reference     text NOT NULL,
    amount        bigint NOT NULL,
    balance_after bigint NOT NULL,
    note          text NOT NULL,
    created_at    timestamptz NOT NULL,
    archived_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS wallet_entries_archive_account_idx ON wallet_entries_archive (account_id, currency);

-- The ledger stays append-only, but for archival: a transaction that says it archives
-- (codeport.ledger_archival) may delete an entry already copied to the archive, or a carried
-- entry it is about to replace by a larger one.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION wallet_entries_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('codeport.ledger_archival', true) = 'on' AND (
        EXISTS (SELECT 1 FROM wallet_entries_archive a WHERE a.id = OLD.id AND a.amount = OLD.amount
                AND a.account_id = OLD.account_id AND a.reference = OLD.reference)
        OR (OLD.kind = 'adjustment' AND OLD.reference = 'archived:' || OLD.id)) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'wallet_entries is append-only';
END;
$$;
-- +goose StatementEnd

-- Archival finds an account's finished, unarchived orders oldest first, and walks an account's
-- ledger of one currency by id around the entries it archives.
CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_archivable_idx ON orders (account_id, finished_at)
    WHERE archived_at IS NULL AND finished_at IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS wallet_entries_account_currency_id_idx
    ON wallet_entries (account_id, currency, id);

-- +goose Down
-- codeport:destroys SELECT count(*) FROM orders WHERE archived_at IS NOT NULL
-- codeport:destroys SELECT count(*) FROM order_lines_archive
-- codeport:destroys SELECT count(*) FROM delivered_codes_archive
-- codeport:destroys SELECT count(*) FROM wallet_entries_archive
DROP INDEX CONCURRENTLY IF EXISTS wallet_entries_account_currency_id_idx;
DROP INDEX CONCURRENTLY IF EXISTS orders_archivable_idx;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION wallet_entries_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'wallet_entries is append-only';
END;
$$;
-- +goose StatementEnd
DROP TABLE IF EXISTS wallet_entries_archive;
DROP TABLE IF EXISTS delivered_codes_archive;
DROP TABLE IF EXISTS order_lines_archive;
ALTER TABLE orders DROP COLUMN IF EXISTS archived_at;
