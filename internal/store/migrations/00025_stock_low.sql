-- +goose NO TRANSACTION
-- +goose Up
-- Stock running low. A catalog's stock_low_threshold is the number of available codes under
-- which a product of it is low (0: never); the operator writes it, from Catalog
-- spec.stockLowThreshold or its --stock-low-threshold. A row of stock_low_notices says that the
-- catalog's partners were told (stock.low) that the product is low; a delivery that finds the
-- product low and no row raises the event and inserts the row, one that finds it back at the
-- threshold or above deletes it, so there is one event per crossing however many deliveries
-- follow. Expand-only: binaries of the previous version neither read nor write any of it, and
-- their catalog upserts leave the threshold as it is. Every statement can run again after a
-- partial run (no transaction: the index is built concurrently).
ALTER TABLE catalogs ADD COLUMN IF NOT EXISTS stock_low_threshold integer NOT NULL DEFAULT 0
    CHECK (stock_low_threshold >= 0);

CREATE TABLE IF NOT EXISTS stock_low_notices (
    catalog_id   uuid NOT NULL REFERENCES catalogs (id) ON DELETE CASCADE,
    product_code text NOT NULL,
    -- Codes available when the event was raised.
    available    integer NOT NULL,
    raised_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (catalog_id, product_code)
);

-- A delivery finds the catalogs holding the products it delivered; without this index that was
-- a scan of every catalog's products in each fulfilment.
CREATE INDEX CONCURRENTLY IF NOT EXISTS catalog_products_product_code_idx ON catalog_products (product_code);

-- NOT VALID, then validated without blocking writes: the table is large and busy.
ALTER TABLE webhook_events DROP CONSTRAINT IF EXISTS webhook_events_type_check;
ALTER TABLE webhook_events ADD CONSTRAINT webhook_events_type_check CHECK (type IN ('order.completed',
    'order.failed', 'order.partially_completed', 'balance.low', 'product.updated', 'product.removed',
    'catalog.updated', 'stock.low')) NOT VALID;
ALTER TABLE webhook_events VALIDATE CONSTRAINT webhook_events_type_check;

-- +goose Down
-- codeport:destroys SELECT count(*) FROM webhook_events WHERE type = 'stock.low'
-- codeport:destroys SELECT count(*) FROM stock_low_notices
DELETE FROM webhook_events WHERE type = 'stock.low';
ALTER TABLE webhook_events DROP CONSTRAINT IF EXISTS webhook_events_type_check;
ALTER TABLE webhook_events ADD CONSTRAINT webhook_events_type_check CHECK (type IN ('order.completed',
    'order.failed', 'order.partially_completed', 'balance.low', 'product.updated', 'product.removed',
    'catalog.updated'));
DROP INDEX CONCURRENTLY IF EXISTS catalog_products_product_code_idx;
DROP TABLE IF EXISTS stock_low_notices;
ALTER TABLE catalogs DROP COLUMN IF EXISTS stock_low_threshold;
