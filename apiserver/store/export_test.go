package store

// ClaimStockSQL is claimStockSQL, for the tests that read its plan.
const ClaimStockSQL = claimStockSQL
