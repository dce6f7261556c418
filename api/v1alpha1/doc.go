// Package v1alpha1 contains the codeport.dev/v1alpha1 API: Partner, Catalog, CatalogShard, ApiKey,
// Wallet and WalletTopUp, the resources platform engineers use to onboard partners onto the codeport partner API.
// +kubebuilder:object:generate=true
// +groupName=codeport.dev
package v1alpha1
