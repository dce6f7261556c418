-- +goose Up
-- Statements (GET /wallet/transactions) and order history (GET /orders) page an account's rows
-- newest first by keyset on (created_at, id): each page is a range scan of these indexes that
-- starts where the previous page ended, whatever the account's size. wallet_entries already
-- stores balance_after, written with its entry; nothing needs backfilling.
CREATE INDEX wallet_entries_statement_idx ON wallet_entries (account_id, created_at, id);
CREATE INDEX orders_history_idx ON orders (account_id, created_at, id);
-- No index holds status: fulfilment rewrites it on every order, and an indexed status would make
-- that update write every index of orders instead of a heap-only (HOT) tuple. A status filter
-- walks orders_history_idx and skips what does not match.

-- The partner's metadata of an order: string key/value pairs, bounded by the API. A constant
-- default adds the column without rewriting the table.
ALTER TABLE orders ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}'
    CONSTRAINT orders_metadata_object_check CHECK (jsonb_typeof(metadata) = 'object');

-- +goose Down
-- codeport:destroys SELECT count(*) FROM orders WHERE metadata <> '{}'
ALTER TABLE orders DROP COLUMN metadata;
DROP INDEX orders_history_idx;
DROP INDEX wallet_entries_statement_idx;
