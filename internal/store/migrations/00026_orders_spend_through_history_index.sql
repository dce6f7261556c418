-- +goose NO TRANSACTION
-- +goose Up
-- The daily spend limit sums an account's orders of one currency since the start of the UTC day.
-- orders_history_idx (account_id, created_at, id) finds that day's orders as well as
-- orders_account_spend_idx (account_id, currency, created_at) did: the heap rows are read either
-- way for their totals, and a day's rows of one account lie together, so reading the other
-- currencies' rows of the day and skipping them costs next to nothing. The index cost every
-- order an index entry of about 40 bytes, written at placement, kept for years
-- (docs/performance.md, "Years of orders"). Dropped concurrently: placements keep writing.
DROP INDEX CONCURRENTLY IF EXISTS orders_account_spend_idx;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_account_spend_idx ON orders (account_id, currency, created_at);
