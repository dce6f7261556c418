package controllers

// WalletRefreshMaxWait is walletRefreshMaxWait, for the tests of the package's users.
const WalletRefreshMaxWait = walletRefreshMaxWait
