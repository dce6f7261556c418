-- +goose Up
-- digest is the SHA-256 of a product row's content (every column but the key, position and
-- timestamps) as provisioning wrote it. A catalog is brought up to date by reading
-- (product_code, digest, position) and writing only the rows whose digest or position differ, so
-- a change costs what changed, not the size of the catalog. Rows written before it have none
-- and are rewritten, with their digest, by their catalog's next reconcile. Adding a nullable
-- column without a default does not rewrite the table.
ALTER TABLE catalog_products ADD COLUMN digest bytea;

-- +goose Down
ALTER TABLE catalog_products DROP COLUMN digest;
