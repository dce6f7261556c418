-- +goose Up
-- The operator follows the ledger by polling wallet_entries by id (its primary key) once a
-- second. A NOTIFY per entry made every placement's commit take PostgreSQL's database-wide
-- notification lock, serialising the commits of all orders, and does not pass a transaction
-- pooler.
DROP TRIGGER wallet_entries_notify ON wallet_entries;
DROP FUNCTION codeport_notify_ledger();

-- +goose Down
-- +goose StatementBegin
CREATE FUNCTION codeport_notify_ledger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('codeport_ledger', NEW.account_id::text);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER wallet_entries_notify AFTER INSERT ON wallet_entries
    FOR EACH ROW EXECUTE FUNCTION codeport_notify_ledger();
