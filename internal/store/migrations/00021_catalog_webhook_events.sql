-- +goose Up
-- Catalog changes raise product.updated, product.removed and catalog.updated events for the
-- partners that subscribe to them.
ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_type_check;
ALTER TABLE webhook_events ADD CONSTRAINT webhook_events_type_check CHECK (type IN ('order.completed',
    'order.failed', 'order.partially_completed', 'balance.low', 'product.updated', 'product.removed',
    'catalog.updated'));

-- +goose Down
-- codeport:destroys SELECT count(*) FROM webhook_events WHERE type IN ('product.updated', 'product.removed', 'catalog.updated')
DELETE FROM webhook_events WHERE type IN ('product.updated', 'product.removed', 'catalog.updated');
ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_type_check;
ALTER TABLE webhook_events ADD CONSTRAINT webhook_events_type_check CHECK (type IN ('order.completed',
    'order.failed', 'order.partially_completed', 'balance.low'));
