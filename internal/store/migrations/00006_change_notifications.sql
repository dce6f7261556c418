-- +goose Up
-- Every process caches partner configuration and catalogs in memory. Whoever writes (the
-- operator, codeport dev, a manual fix in psql), these triggers tell every listener at commit
-- through NOTIFY, so a revoked key stops working everywhere within moments.
-- +goose StatementBegin
CREATE FUNCTION codeport_notify_config() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('codeport_config', TG_TABLE_NAME);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION codeport_notify_ledger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('codeport_ledger', NEW.account_id::text);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER partners_notify AFTER INSERT OR UPDATE OR DELETE ON partners
    FOR EACH STATEMENT EXECUTE FUNCTION codeport_notify_config();
CREATE TRIGGER accounts_notify AFTER INSERT OR UPDATE OR DELETE ON accounts
    FOR EACH STATEMENT EXECUTE FUNCTION codeport_notify_config();
CREATE TRIGGER api_keys_notify AFTER INSERT OR UPDATE OR DELETE ON api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION codeport_notify_config();
CREATE TRIGGER catalogs_notify AFTER INSERT OR UPDATE OR DELETE ON catalogs
    FOR EACH STATEMENT EXECUTE FUNCTION codeport_notify_config();
CREATE TRIGGER catalog_products_notify AFTER INSERT OR UPDATE OR DELETE ON catalog_products
    FOR EACH STATEMENT EXECUTE FUNCTION codeport_notify_config();
CREATE TRIGGER webhook_endpoints_notify AFTER INSERT OR UPDATE OR DELETE ON webhook_endpoints
    FOR EACH STATEMENT EXECUTE FUNCTION codeport_notify_config();
CREATE TRIGGER wallet_entries_notify AFTER INSERT ON wallet_entries
    FOR EACH ROW EXECUTE FUNCTION codeport_notify_ledger();

-- +goose Down
DROP TRIGGER wallet_entries_notify ON wallet_entries;
DROP TRIGGER webhook_endpoints_notify ON webhook_endpoints;
DROP TRIGGER catalog_products_notify ON catalog_products;
DROP TRIGGER catalogs_notify ON catalogs;
DROP TRIGGER api_keys_notify ON api_keys;
DROP TRIGGER accounts_notify ON accounts;
DROP TRIGGER partners_notify ON partners;
DROP FUNCTION codeport_notify_ledger();
DROP FUNCTION codeport_notify_config();
