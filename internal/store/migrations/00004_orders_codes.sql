-- +goose Up
CREATE TABLE orders (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    account_id          uuid NOT NULL REFERENCES accounts (id),
    external_order_code text NOT NULL CHECK (external_order_code <> ''),
    -- SHA-256 of the canonical request: a replay with the same payload is recognised by it.
    payload_hash        bytea NOT NULL,
    currency            text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    total_price         bigint NOT NULL CHECK (total_price >= 0),
    total_quantity      integer NOT NULL CHECK (total_quantity > 0),
    -- Amount debited from the wallet at placement (0 when wallet ordering is off).
    debited_amount      bigint NOT NULL DEFAULT 0 CHECK (debited_amount >= 0),
    refunded_amount     bigint NOT NULL DEFAULT 0 CHECK (refunded_amount >= 0),
    status              text NOT NULL DEFAULT 'processing'
        CHECK (status IN ('processing', 'completed', 'partially_completed', 'failed')),
    delivered           integer NOT NULL DEFAULT 0 CHECK (delivered >= 0),
    reason              text,
    estimated_ready_at  timestamptz NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    finished_at         timestamptz,
    CONSTRAINT orders_external_code_key UNIQUE (account_id, external_order_code),
    CONSTRAINT orders_refund_within_debit_check CHECK (refunded_amount <= debited_amount),
    CONSTRAINT orders_delivered_within_total_check CHECK (delivered <= total_quantity)
);
-- Daily spend limits sum an account's orders of one currency and day.
CREATE INDEX orders_account_spend_idx ON orders (account_id, currency, created_at);

CREATE TABLE order_lines (
    order_id     uuid NOT NULL REFERENCES orders (id),
    line_no      integer NOT NULL CHECK (line_no >= 0),
    product_code text NOT NULL,
    unit_price   bigint NOT NULL CHECK (unit_price >= 0),
    quantity     integer NOT NULL CHECK (quantity > 0),
    currency     text NOT NULL,
    sku          text NOT NULL DEFAULT '',
    PRIMARY KEY (order_id, line_no)
);

-- Production stock, encrypted at rest (AES-GCM: nonce || ciphertext). The digest rejects a
-- code imported twice without revealing it; the partial index serves FOR UPDATE SKIP LOCKED.
CREATE TABLE code_stock (
    id           bigserial PRIMARY KEY,
    product_code text NOT NULL CHECK (product_code ~ '^[0-9]{14}$'),
    ciphertext   bytea NOT NULL,
    digest       bytea NOT NULL CHECK (octet_length(digest) = 32),
    batch        text NOT NULL DEFAULT '',
    imported_at  timestamptz NOT NULL DEFAULT now(),
    order_id     uuid REFERENCES orders (id),
    delivered_at timestamptz,
    CONSTRAINT code_stock_digest_key UNIQUE (digest)
);
CREATE INDEX code_stock_available_idx ON code_stock (product_code, id) WHERE order_id IS NULL;

-- One row per delivered unit. The unique (order, line, unit) makes a second delivery of the same
-- unit impossible, and the unique digest makes one code impossible to hand out twice.
CREATE TABLE delivered_codes (
    order_id     uuid NOT NULL REFERENCES orders (id),
    line_no      integer NOT NULL,
    unit_no      integer NOT NULL CHECK (unit_no >= 0),
    stock_id     bigint REFERENCES code_stock (id),
    ciphertext   bytea NOT NULL,
    digest       bytea NOT NULL CHECK (octet_length(digest) = 32),
    delivered_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (order_id, line_no, unit_no),
    CONSTRAINT delivered_codes_line_fk FOREIGN KEY (order_id, line_no) REFERENCES order_lines (order_id, line_no),
    CONSTRAINT delivered_codes_digest_key UNIQUE (digest)
);

-- +goose Down
-- codeport:destroys SELECT count(*) FROM orders
-- codeport:destroys SELECT count(*) FROM order_lines
-- codeport:destroys SELECT count(*) FROM code_stock
-- codeport:destroys SELECT count(*) FROM delivered_codes
DROP TABLE delivered_codes;
DROP TABLE code_stock;
DROP TABLE order_lines;
DROP TABLE orders;
