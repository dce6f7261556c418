-- +goose Up
-- Configuration notifications name what changed, and fire only for rows that did change: a
-- statement that writes nothing (a reconcile with nothing to change) notifies nobody, and an API
-- replica drops only the cache entries of the named partner, account, key or catalog. Payloads
-- are "<kind>:<id>"; identical payloads of one transaction reach listeners once.
-- +goose StatementBegin
CREATE FUNCTION codeport_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
    what text;
BEGIN
    IF TG_OP = 'DELETE' THEN r := OLD; ELSE r := NEW; END IF;
    IF TG_TABLE_NAME = 'partners' THEN what := 'partner:' || r.id;
    ELSIF TG_TABLE_NAME = 'accounts' THEN what := 'account:' || r.id;
    ELSIF TG_TABLE_NAME = 'api_keys' THEN what := 'key:' || encode(r.digest, 'hex');
    ELSIF TG_TABLE_NAME = 'catalogs' THEN what := 'catalog:' || r.id;
    ELSIF TG_TABLE_NAME = 'catalog_products' THEN what := 'catalog:' || r.catalog_id;
    ELSIF TG_TABLE_NAME = 'webhook_endpoints' THEN what := 'webhook:' || r.partner_id;
    ELSE what := TG_TABLE_NAME;
    END IF;
    PERFORM pg_notify('codeport_config', what);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

DROP TRIGGER partners_notify ON partners;
DROP TRIGGER accounts_notify ON accounts;
DROP TRIGGER api_keys_notify ON api_keys;
DROP TRIGGER catalogs_notify ON catalogs;
DROP TRIGGER catalog_products_notify ON catalog_products;
DROP TRIGGER webhook_endpoints_notify ON webhook_endpoints;
DROP FUNCTION codeport_notify_config();

CREATE TRIGGER partners_notify AFTER INSERT OR UPDATE OR DELETE ON partners
    FOR EACH ROW EXECUTE FUNCTION codeport_notify_change();
CREATE TRIGGER accounts_notify AFTER INSERT OR UPDATE OR DELETE ON accounts
    FOR EACH ROW EXECUTE FUNCTION codeport_notify_change();
CREATE TRIGGER api_keys_notify AFTER INSERT OR UPDATE OR DELETE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION codeport_notify_change();
CREATE TRIGGER catalogs_notify AFTER INSERT OR UPDATE OR DELETE ON catalogs
    FOR EACH ROW EXECUTE FUNCTION codeport_notify_change();
CREATE TRIGGER catalog_products_notify AFTER INSERT OR UPDATE OR DELETE ON catalog_products
    FOR EACH ROW EXECUTE FUNCTION codeport_notify_change();
CREATE TRIGGER webhook_endpoints_notify AFTER INSERT OR UPDATE OR DELETE ON webhook_endpoints
    FOR EACH ROW EXECUTE FUNCTION codeport_notify_change();

-- +goose Down
-- +goose StatementBegin
CREATE FUNCTION codeport_notify_config() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('codeport_config', TG_TABLE_NAME);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

DROP TRIGGER partners_notify ON partners;
DROP TRIGGER accounts_notify ON accounts;
DROP TRIGGER api_keys_notify ON api_keys;
DROP TRIGGER catalogs_notify ON catalogs;
DROP TRIGGER catalog_products_notify ON catalog_products;
DROP TRIGGER webhook_endpoints_notify ON webhook_endpoints;
DROP FUNCTION codeport_notify_change();

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
