-- +goose NO TRANSACTION
-- +goose Up
-- Codes are handed out oldest import first, through an index that holds only available codes.
-- Ordering by import time, which the primary key cannot give, keeps the planner off the
-- primary key: by id alone, statistics that say nearly every code is available (as after an
-- import) made each claim walk the key from the first code ever imported, past every one
-- already delivered. Built concurrently: imports and deliveries go on meanwhile.
CREATE INDEX CONCURRENTLY IF NOT EXISTS code_stock_available_oldest_idx
    ON code_stock (product_code, imported_at, id) WHERE order_id IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS code_stock_available_idx;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS code_stock_available_idx
    ON code_stock (product_code, id) WHERE order_id IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS code_stock_available_oldest_idx;
