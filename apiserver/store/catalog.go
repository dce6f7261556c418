package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

// ErrNotFound is returned when a row looked up by key does not exist.
var ErrNotFound = errors.New("not found")

// LoadCatalog returns a catalog and its products in catalog order.
func LoadCatalog(ctx context.Context, db *gorm.DB, id uuid.UUID) (Catalog, []CatalogProduct, error) {
	var c Catalog
	err := db.WithContext(ctx).Where("id = ? AND deleted_at IS NULL", id).Take(&c).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Catalog{}, nil, fmt.Errorf("catalog %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Catalog{}, nil, fmt.Errorf("load catalog %s: %w", id, err)
	}
	var products []CatalogProduct
	err = db.WithContext(ctx).Where("catalog_id = ?", id).Order("position, product_code").Find(&products).Error
	if err != nil {
		return Catalog{}, nil, fmt.Errorf("load products of catalog %s: %w", id, err)
	}
	return c, products, nil
}
