package store

// TakeStockSQL is takeStockSQL, for the tests that read its plan.
const TakeStockSQL = takeStockSQL
