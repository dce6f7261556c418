package store

import (
	"context"
	"fmt"
)

// ProductDigest is the digest provisioning stores with a product row (digester).
func ProductDigest(p *CatalogProduct) []byte {
	var d digester
	return d.sum(p)
}

// UpTo applies every pending migration up to version and returns the versions applied.
func (m *Migrator) UpTo(ctx context.Context, version int64) ([]int64, error) {
	results, err := m.provider.UpTo(ctx, version)
	if err != nil {
		return nil, fmt.Errorf("migrate up to %d: %w", version, err)
	}
	return appliedVersions(results), nil
}

// ClaimStockSQL is claimStockSQL, for the tests that read its plan.
const ClaimStockSQL = claimStockSQL

// DailySpendSQL is dailySpendSQL, for the test that reads its plan.
const DailySpendSQL = dailySpendSQL

// PlanPositions is planPositions over stored positions by productCode.
func PlanPositions(codes []string, stored map[string]int) []int {
	s := make(map[string]storedProduct, len(stored))
	for code, pos := range stored {
		s[code] = storedProduct{position: pos}
	}
	return planPositions(codes, s)
}

// NewMigratorFS is NewMigrator over the migrations of fsys, for tests of steps the embedded
// migrations do not have (a contract step).
var NewMigratorFS = newMigrator

// EmbeddedMigrations are the embedded migration files, for tests that add steps to them.
var EmbeddedMigrations = embeddedMigrations
