-- +goose Up
-- code_stock is both the queue of available codes and the record of every code delivered, which
-- stays to reject a code imported twice: with years of orders, nearly all of its rows are history.
-- A claim walks the index of available codes (code_stock_available_oldest_idx) from the oldest
-- import, stepping over the entries of codes delivered since the last vacuum that cleaned that
-- index. By default neither comes often enough once the history is large:
-- - autovacuum waits for dead rows to reach 20% of the table, 3.6 million deliveries at 10 million
--   orders;
-- - a vacuum skips the indexes when fewer than 2% of the table's pages hold dead rows, which the
--   deliveries between two vacuums never reach, so the entries stay however often it runs.
-- At 10 million orders a claim read 271 index pages after 44,000 deliveries; after a vacuum that
-- cleaned the indexes, 3 (docs/performance.md, "Years of orders"). So autovacuum runs after a
-- number of deliveries, indexes included. The number weighs two costs per delivered code: such
-- a vacuum reads every index of the table whole (2.4 s at 10 million orders, 1.9 GB), shared by
-- the deliveries since the last one; and a claim steps over up to that many entries, about 180
-- to a page. 25,000 keeps both near 0.1 ms a code at 10 million orders; both grow with the
-- square root of the history, which only keeping delivered codes out of this table would end.
SET LOCAL lock_timeout = '5s';
ALTER TABLE code_stock SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 25000,
    vacuum_index_cleanup = on);

-- +goose Down
SET LOCAL lock_timeout = '5s';
ALTER TABLE code_stock RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, vacuum_index_cleanup);
