-- +goose Up
-- A running total of each account's orders per currency and UTC day, which the daily spend
-- limit reads instead of summing the day's orders at every placement (docs/operations.md, "Daily
-- spend totals"). spent is the sum of total_price - refunded_amount over the day's orders, the
-- sum store.SpentSince took from orders.
--
-- Expand-only, and correct while binaries of the previous release still place and fulfil
-- orders: the database keeps the totals, not the binaries. Triggers on orders add every
-- inserted order and every change of an order's value (a refund) to its day's row, whichever
-- binary wrote it. They are deferred to the commit, so a transaction takes the row's lock last,
-- after its order and balance rows (store/ledger.go's lock order), in every binary; the previous
-- release's placements and fulfilments cannot deadlock with the new ones on it. Archival
-- changes no order's value, so archived orders stay counted and nothing here reads the archive.
--
-- The triggers only count what is written once they exist: a row for a day that had orders
-- before this step is short of them. counted says the row was recounted from orders since,
-- under its lock (store.DailySpend), after which the triggers keep it exact. Every row starts
-- uncounted, so the first limited placement of each day recounts its account's orders of the
-- day, usually none but its own. Creating the triggers waits for the transactions writing
-- orders at that moment and holds new ones back until this step commits: no order is written
-- half before, half after. lock_timeout bounds that wait, and the placements queued behind it:
-- past it the step fails without a change and migrate up runs it again (the hook Job retries). Rows of past days may be deleted (retention does); a refund of an
-- older order then writes its day's row again, uncounted.
SET LOCAL lock_timeout = '5s';

CREATE TABLE daily_spend (
    account_id uuid NOT NULL,
    currency   text NOT NULL,
    day        date NOT NULL,
    spent      bigint NOT NULL,
    counted    boolean NOT NULL DEFAULT false,
    PRIMARY KEY (account_id, currency, day)
);

-- +goose StatementBegin
CREATE FUNCTION daily_spend_add(account uuid, cur text, at timestamptz, amount bigint) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO daily_spend AS s (account_id, currency, day, spent)
    VALUES (account, cur, (at AT TIME ZONE 'UTC')::date, amount)
    ON CONFLICT (account_id, currency, day) DO UPDATE SET spent = s.spent + excluded.spent
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION daily_spend_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM daily_spend_add(NEW.account_id, NEW.currency, NEW.created_at, NEW.total_price - NEW.refunded_amount);
    ELSIF (OLD.account_id, OLD.currency, (OLD.created_at AT TIME ZONE 'UTC')::date)
        = (NEW.account_id, NEW.currency, (NEW.created_at AT TIME ZONE 'UTC')::date) THEN
        PERFORM daily_spend_add(NEW.account_id, NEW.currency, NEW.created_at,
            (NEW.total_price - NEW.refunded_amount) - (OLD.total_price - OLD.refunded_amount));
    ELSE
        PERFORM daily_spend_add(OLD.account_id, OLD.currency, OLD.created_at, OLD.refunded_amount - OLD.total_price);
        PERFORM daily_spend_add(NEW.account_id, NEW.currency, NEW.created_at, NEW.total_price - NEW.refunded_amount);
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE CONSTRAINT TRIGGER orders_daily_spend_insert AFTER INSERT ON orders
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (NEW.total_price - NEW.refunded_amount <> 0)
    EXECUTE FUNCTION daily_spend_count();
CREATE CONSTRAINT TRIGGER orders_daily_spend_update
    AFTER UPDATE OF account_id, currency, created_at, total_price, refunded_amount ON orders
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN ((OLD.account_id, OLD.currency, OLD.created_at, OLD.total_price - OLD.refunded_amount)
        IS DISTINCT FROM (NEW.account_id, NEW.currency, NEW.created_at, NEW.total_price - NEW.refunded_amount))
    EXECUTE FUNCTION daily_spend_count();

-- +goose Down
-- The totals are derived from orders: applying this step again starts every row uncounted, and the
-- first limited placement of the day recounts it.
DROP TRIGGER orders_daily_spend_update ON orders;
DROP TRIGGER orders_daily_spend_insert ON orders;
DROP FUNCTION daily_spend_count();
DROP FUNCTION daily_spend_add(uuid, text, timestamptz, bigint);
DROP TABLE daily_spend;
