-- +goose Up
-- Product notifications name the products a statement changed, so that an API replica fetches
-- those rows and patches its catalog snapshot instead of rebuilding it. The triggers fire once per
-- statement and read the changed rows from transition tables: a bulk load of a whole catalog sends
-- one notification, not one per row, and a statement that changes no row sends none. Per catalog
-- the payload is "catalog:<id>:<code>,<code>,..." (codes sorted, at most 100 of them, which keeps
-- it far below NOTIFY's 8000 bytes) or, when the statement changed more, "catalog:<id>": the whole
-- catalog is to be reloaded. A product whose code is named but has no row was deleted.
-- +goose StatementBegin
CREATE FUNCTION codeport_notify_product_codes(catalog_id uuid, n bigint, codes text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF n <= 100 AND length(codes) <= 2000 THEN
        PERFORM pg_notify('codeport_config', 'catalog:' || catalog_id || ':' || codes);
    ELSE
        PERFORM pg_notify('codeport_config', 'catalog:' || catalog_id);
    END IF;
END;
$$;
-- +goose StatementEnd

-- Each operation reads only the transition tables it has: PL/pgSQL plans a query naming a
-- transition table the trigger lacks as an error, even in a branch that never runs.
-- +goose StatementBegin
CREATE FUNCTION codeport_notify_products() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    IF TG_OP = 'INSERT' THEN
        FOR r IN SELECT catalog_id, count(*) AS n, string_agg(product_code, ',' ORDER BY product_code) AS codes
                 FROM new_products GROUP BY catalog_id LOOP
            PERFORM codeport_notify_product_codes(r.catalog_id, r.n, r.codes);
        END LOOP;
    ELSIF TG_OP = 'DELETE' THEN
        FOR r IN SELECT catalog_id, count(*) AS n, string_agg(product_code, ',' ORDER BY product_code) AS codes
                 FROM old_products GROUP BY catalog_id LOOP
            PERFORM codeport_notify_product_codes(r.catalog_id, r.n, r.codes);
        END LOOP;
    ELSE
        -- An update may move a product to another code or catalog: both sides changed.
        FOR r IN SELECT catalog_id, count(*) AS n, string_agg(product_code, ',' ORDER BY product_code) AS codes
                 FROM (SELECT catalog_id, product_code FROM new_products
                       UNION SELECT catalog_id, product_code FROM old_products) changed
                 GROUP BY catalog_id LOOP
            PERFORM codeport_notify_product_codes(r.catalog_id, r.n, r.codes);
        END LOOP;
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

DROP TRIGGER catalog_products_notify ON catalog_products;

CREATE TRIGGER catalog_products_notify_insert AFTER INSERT ON catalog_products
    REFERENCING NEW TABLE AS new_products
    FOR EACH STATEMENT EXECUTE FUNCTION codeport_notify_products();
CREATE TRIGGER catalog_products_notify_update AFTER UPDATE ON catalog_products
    REFERENCING NEW TABLE AS new_products OLD TABLE AS old_products
    FOR EACH STATEMENT EXECUTE FUNCTION codeport_notify_products();
CREATE TRIGGER catalog_products_notify_delete AFTER DELETE ON catalog_products
    REFERENCING OLD TABLE AS old_products
    FOR EACH STATEMENT EXECUTE FUNCTION codeport_notify_products();

-- +goose Down
DROP TRIGGER catalog_products_notify_insert ON catalog_products;
DROP TRIGGER catalog_products_notify_update ON catalog_products;
DROP TRIGGER catalog_products_notify_delete ON catalog_products;
DROP FUNCTION codeport_notify_products();
DROP FUNCTION codeport_notify_product_codes(uuid, bigint, text);

CREATE TRIGGER catalog_products_notify AFTER INSERT OR UPDATE OR DELETE ON catalog_products
    FOR EACH ROW EXECUTE FUNCTION codeport_notify_change();
