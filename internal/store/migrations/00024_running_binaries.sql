-- +goose Up
-- The codeport processes (serve, operator, dev) running on this database, each refreshing its
-- own row while it runs. `migrate status` says from it whether each is compatible with the
-- schema, and `migrate up` refuses a contract step (one that breaks binaries built for an older
-- schema) while such a binary still runs. Expand-only: binaries of the previous version neither
-- know nor mind it.
CREATE TABLE codeport_instances (
    instance_id    uuid PRIMARY KEY,
    -- serve, operator or dev.
    component      text NOT NULL CHECK (component <> ''),
    version        text NOT NULL,
    -- The newest migration embedded in the binary: the schema it was built for.
    schema_version bigint NOT NULL CHECK (schema_version > 0),
    host           text NOT NULL,
    started_at     timestamptz NOT NULL DEFAULT now(),
    last_seen      timestamptz NOT NULL DEFAULT now()
);
-- Rows of processes that died without removing theirs expire by last_seen.
CREATE INDEX codeport_instances_last_seen_idx ON codeport_instances (last_seen);

-- +goose Down
DROP TABLE codeport_instances;
