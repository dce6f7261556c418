package controllers

// WalletRefreshMaxWait is walletRefreshMaxWait, for the tests of the package's users.
const WalletRefreshMaxWait = walletRefreshMaxWait

// StockOnly is stockOnly, for the tests of which updates reach the catalog's reconciler.
var StockOnly = stockOnly

// NewReadinessCollector is newReadinessCollector, for a test's own namespace.
var NewReadinessCollector = newReadinessCollector
