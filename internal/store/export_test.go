package store

// ClaimStockSQL is claimStockSQL, for the tests that read its plan.
const ClaimStockSQL = claimStockSQL

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
