-- +goose NO TRANSACTION
-- +goose Up
-- A delivered code leaves code_stock (store.ClaimStock): the delivery deletes its stock row and
-- writes its delivered_codes row, instead of updating the stock row in place and keeping it for
-- ever. Kept, the row cost every delivery a second copy of the sealed code, a new row version
-- and an entry in each of code_stock's indexes (order_id is in the predicate of the index of
-- available codes, so the update is never HOT), and made code_stock grow with the history: its
-- digest index, read by every import, was 1.4 GB at 10 million orders, and the vacuums that keep
-- claims fast read all of it (migration 00029). code_stock now holds the codes not delivered
-- yet, and an import refuses a code already delivered by its digest in delivered_codes,
-- delivered_codes_archive and retired_code_digests (store.InsertStock).
--
-- Expand-only. Binaries of the previous release refuse a duplicate by code_stock alone, so while
-- one of them is registered in codeport_instances deliveries keep updating in place and the
-- rows of delivered codes stay (store.StockDeleteSchemaVersion); once none is, the purge job
-- (fulfilment.PurgeStockArgs) deletes the rows older deliveries left, through
-- code_stock_delivered_idx, in small batches. Every statement can run again after a partial run
-- (no transaction: the indexes are built concurrently on tables that are large and busy).

-- Every product that ever had production stock, so that the stock gauge still reports a product
-- at 0 once its last code has left code_stock. Imports add theirs; the purge job adds those
-- an older binary imported.
CREATE TABLE IF NOT EXISTS stock_products (
    product_code text PRIMARY KEY
);
INSERT INTO stock_products (product_code) SELECT DISTINCT product_code FROM code_stock
ON CONFLICT DO NOTHING;

-- The digests of delivered codes whose archive rows were deleted (docs/operations.md, "Order
-- retention": the archive is dumped and deleted), so that an import still refuses them. 32
-- bytes and an index entry a code, written only when archive rows go.
CREATE TABLE IF NOT EXISTS retired_code_digests (
    digest bytea PRIMARY KEY
);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION delivered_codes_archive_retire() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO retired_code_digests (digest) SELECT digest FROM gone ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE OR REPLACE TRIGGER delivered_codes_archive_retire AFTER DELETE ON delivered_codes_archive
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION delivered_codes_archive_retire();

-- A stock row no longer outlives its delivery. Dropping the key takes the strongest lock of both
-- tables, and a delivery locks code_stock before delivered_codes: the step takes them in that
-- order too, or it holds delivered_codes while a delivery holding code_stock waits for it, a
-- deadlock. lock_timeout bounds the wait in a transaction of the step's own, as in 00027.
-- +goose StatementBegin
DO $$
BEGIN
    SET LOCAL lock_timeout = '5s';
    IF EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'delivered_codes_stock_id_fkey') THEN
        LOCK TABLE code_stock, delivered_codes IN ACCESS EXCLUSIVE MODE;
        ALTER TABLE delivered_codes DROP CONSTRAINT delivered_codes_stock_id_fkey;
    END IF;
END;
$$;
-- +goose StatementEnd

CREATE INDEX CONCURRENTLY IF NOT EXISTS delivered_codes_archive_digest_idx ON delivered_codes_archive (digest);
CREATE INDEX CONCURRENTLY IF NOT EXISTS code_stock_delivered_idx ON code_stock (id) WHERE order_id IS NOT NULL;

-- +goose Down
-- codeport:destroys SELECT count(*) FROM retired_code_digests
-- The binaries of the previous release refuse a duplicate by code_stock alone: every code
-- delivered since the upgrade gets its stock row back, delivered, with its delivery time for its
-- import time (the import's own is gone).
INSERT INTO code_stock (id, product_code, key_ref, ciphertext, digest, imported_at, order_id, delivered_at)
SELECT d.stock_id, l.product_code, d.key_ref, d.ciphertext, d.digest, d.delivered_at, d.order_id, d.delivered_at
FROM delivered_codes d JOIN order_lines l USING (order_id, line_no)
WHERE d.stock_id IS NOT NULL
UNION ALL
SELECT d.stock_id, l.product_code, d.key_ref, d.ciphertext, d.digest, d.delivered_at, d.order_id, d.delivered_at
FROM delivered_codes_archive d JOIN order_lines_archive l USING (order_id, line_no)
WHERE d.stock_id IS NOT NULL
ON CONFLICT DO NOTHING;

DROP INDEX CONCURRENTLY IF EXISTS code_stock_delivered_idx;
DROP INDEX CONCURRENTLY IF EXISTS delivered_codes_archive_digest_idx;
-- +goose StatementBegin
DO $$
BEGIN
    SET LOCAL lock_timeout = '5s';
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'delivered_codes_stock_id_fkey') THEN
        -- In a delivery's order, as in the up step.
        LOCK TABLE code_stock, delivered_codes IN SHARE ROW EXCLUSIVE MODE;
        ALTER TABLE delivered_codes ADD CONSTRAINT delivered_codes_stock_id_fkey
            FOREIGN KEY (stock_id) REFERENCES code_stock (id) NOT VALID;
    END IF;
END;
$$;
-- +goose StatementEnd
-- Checking the rows takes a lock that lets deliveries go on, not the one above.
ALTER TABLE delivered_codes VALIDATE CONSTRAINT delivered_codes_stock_id_fkey;
DROP TRIGGER IF EXISTS delivered_codes_archive_retire ON delivered_codes_archive;
DROP FUNCTION IF EXISTS delivered_codes_archive_retire();
DROP TABLE IF EXISTS retired_code_digests;
DROP TABLE IF EXISTS stock_products;
