-- +goose Up
CREATE TABLE catalogs (
    id                          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    namespace                   text NOT NULL,
    name                        text NOT NULL,
    description                 text NOT NULL DEFAULT '',
    valid_from                  timestamptz NOT NULL DEFAULT now(),
    valid_to                    timestamptz,
    catalog_type_id             integer NOT NULL DEFAULT 1,
    default_discount_percentage numeric(7, 4) NOT NULL DEFAULT 0
        CHECK (default_discount_percentage BETWEEN 0 AND 100),
    created_at                  timestamptz NOT NULL DEFAULT now(),
    updated_at                  timestamptz NOT NULL DEFAULT now(),
    deleted_at                  timestamptz,
    CONSTRAINT catalogs_namespace_name_key UNIQUE (namespace, name),
    CONSTRAINT catalogs_validity_check CHECK (valid_to IS NULL OR valid_to > valid_from)
);

ALTER TABLE partners
    ADD CONSTRAINT partners_catalog_fk FOREIGN KEY (catalog_id) REFERENCES catalogs (id);

-- Prices are integers in minor units of currency_code. buying_price is derived from the
-- discount when the catalog is provisioned, so reads never recompute it.
CREATE TABLE catalog_products (
    catalog_id          uuid NOT NULL REFERENCES catalogs (id) ON DELETE CASCADE,
    product_code        text NOT NULL CHECK (product_code ~ '^[0-9]{14}$'),
    position            integer NOT NULL DEFAULT 0,
    ean                 text NOT NULL DEFAULT '',
    name                text NOT NULL,
    short_name          text NOT NULL DEFAULT '',
    image               text NOT NULL DEFAULT '',
    brand               text NOT NULL DEFAULT '',
    publisher           text NOT NULL DEFAULT '',
    country_code        text NOT NULL CHECK (country_code ~ '^[A-Z]{2}$'),
    currency_code       text NOT NULL CHECK (currency_code ~ '^[A-Z]{3}$'),
    buying_currency_code text NOT NULL CHECK (buying_currency_code ~ '^[A-Z]{3}$'),
    denomination_type   text NOT NULL CHECK (denomination_type IN ('fixed', 'open')),
    price               bigint CHECK (price >= 0),
    buying_price        bigint CHECK (buying_price >= 0),
    rrp                 bigint CHECK (rrp >= 0),
    denomination_min    bigint,
    denomination_max    bigint,
    denomination_step   bigint,
    denomination_default bigint,
    discount_percentage numeric(7, 4) NOT NULL DEFAULT 0 CHECK (discount_percentage BETWEEN 0 AND 100),
    main_category       text NOT NULL DEFAULT '',
    sub_category        text NOT NULL DEFAULT '',
    product_category    text NOT NULL DEFAULT '',
    product_type        text NOT NULL DEFAULT '',
    platform            text NOT NULL DEFAULT '',
    type                text NOT NULL DEFAULT 'digital',
    tags                text[] NOT NULL DEFAULT '{}',
    languages           jsonb NOT NULL DEFAULT '[]',
    promotion           jsonb,
    service_fee         jsonb,
    status              text NOT NULL CHECK (status IN ('active', 'inactive', 'preorder')),
    preorder            boolean NOT NULL DEFAULT false,
    first_sale          date,
    playable_on         date,
    expires             boolean NOT NULL DEFAULT false,
    expiry_policy       text NOT NULL DEFAULT '',
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (catalog_id, product_code),
    CONSTRAINT catalog_products_denomination_check CHECK (
        (denomination_type = 'fixed' AND price IS NOT NULL)
        OR (denomination_type = 'open' AND denomination_min IS NOT NULL AND denomination_max IS NOT NULL
            AND denomination_min <= denomination_max))
);
-- Lookups made by the APIs: legacy v1 by EAN, and the v2 list filters (case-insensitive).
CREATE INDEX catalog_products_ean_idx ON catalog_products (catalog_id, ean);
CREATE INDEX catalog_products_country_idx ON catalog_products (catalog_id, lower(country_code));
CREATE INDEX catalog_products_brand_idx ON catalog_products (catalog_id, lower(brand));
CREATE INDEX catalog_products_category_idx ON catalog_products (catalog_id, lower(main_category));
CREATE INDEX catalog_products_tags_idx ON catalog_products USING gin (tags);

-- +goose Down
-- codeport:destroys SELECT count(*) FROM catalogs
-- codeport:destroys SELECT count(*) FROM catalog_products
DROP TABLE catalog_products;
ALTER TABLE partners DROP CONSTRAINT partners_catalog_fk;
DROP TABLE catalogs;
