package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ErrNotFound is returned when a row looked up by key does not exist.
var ErrNotFound = errors.New("not found")

// catalogColumns and productColumns are the columns the Catalog and CatalogProduct models hold;
// numerics are read as the decimal text the models keep, and tags as the text form its
// TextArray parses.
const (
	catalogColumns = `id, namespace, name, description, valid_from, valid_to, catalog_type_id,
	default_discount_percentage::text AS default_discount_percentage, stock_low_threshold, created_at, updated_at,
	deleted_at`
	productColumns = `catalog_id, product_code, position, ean, name, short_name, image, brand, publisher,
	country_code, currency_code, buying_currency_code, denomination_type, price, buying_price, rrp,
	denomination_min, denomination_max, denomination_step, denomination_default,
	discount_percentage::text AS discount_percentage, main_category, sub_category, product_category, product_type,
	platform, type, tags::text AS tags, languages, promotion, service_fee, status, preorder, first_sale,
	playable_on, expires, expiry_policy, created_at, updated_at`
)

// LoadCatalog returns a catalog and its products in catalog order.
func LoadCatalog(ctx context.Context, q Querier, id uuid.UUID) (Catalog, []CatalogProduct, error) {
	rows, err := q.Query(ctx, `SELECT `+catalogColumns+` FROM catalogs WHERE id = $1 AND deleted_at IS NULL`,
		pgUUID(id))
	if err != nil {
		return Catalog{}, nil, fmt.Errorf("load catalog %s: %w", id, err)
	}
	c, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Catalog])
	if errors.Is(err, pgx.ErrNoRows) {
		return Catalog{}, nil, fmt.Errorf("catalog %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Catalog{}, nil, fmt.Errorf("load catalog %s: %w", id, err)
	}
	products, err := queryProducts(ctx, q, id, "")
	if err != nil {
		return Catalog{}, nil, err
	}
	return c, products, nil
}

// LoadProducts returns the products of a catalog among codes, in catalog order; a code with no
// row (a deleted product) is absent.
func LoadProducts(ctx context.Context, q Querier, catalogID uuid.UUID, codes []string) ([]CatalogProduct, error) {
	return queryProducts(ctx, q, catalogID, "AND product_code = ANY($2)", codes)
}

// queryProducts returns the products of a catalog that the condition (on parameters $2...)
// selects, in catalog order.
func queryProducts(
	ctx context.Context, q Querier, catalogID uuid.UUID, condition string, args ...any,
) ([]CatalogProduct, error) {
	rows, err := q.Query(ctx, `SELECT `+productColumns+` FROM catalog_products WHERE catalog_id = $1 `+condition+`
		ORDER BY position, product_code`, append([]any{pgUUID(catalogID)}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("load products of catalog %s: %w", catalogID, err)
	}
	products, err := pgx.CollectRows(rows, pgx.RowToStructByName[CatalogProduct])
	if err != nil {
		return nil, fmt.Errorf("load products of catalog %s: %w", catalogID, err)
	}
	return products, nil
}
