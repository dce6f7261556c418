-- +goose NO TRANSACTION
-- +goose Up
-- Ciphertexts by the codes key they are sealed under. A process refuses to start when a key its
-- keyring lacks still seals rows, and counts them to say so; codes rekey takes rows of an older
-- key batch by batch. Without these indexes each of those read the whole of the two largest
-- tables. Built concurrently, expand-only: imports and deliveries go on meanwhile, and binaries of
-- the previous version neither know nor mind them.
CREATE INDEX CONCURRENTLY IF NOT EXISTS code_stock_key_ref_idx ON code_stock (key_ref);
CREATE INDEX CONCURRENTLY IF NOT EXISTS delivered_codes_key_ref_idx ON delivered_codes (key_ref);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS delivered_codes_key_ref_idx;
DROP INDEX CONCURRENTLY IF EXISTS code_stock_key_ref_idx;
