// Package v1alpha1 contains the codeport.dev/v1alpha1 API: Partner, Catalog, CatalogShard, ApiKey,
// Wallet and WalletTopUp, the resources platform engineers use to onboard partners onto the codeport partner API.
//
// The kind ApiKey is spelled as the API published it, not as Go spells the initialism: its types
// here keep that spelling (ApiKey, ApiKeyList, ApiKeySpec, ApiKeyStatus, ApiKeyType and its
// constants), because the scheme takes the kind and list kind from the type names and the CRD's
// descriptions and `kubectl explain` show them. Every other Go identifier, in this package and
// outside it, spells it APIKey (APIKeyReconciler, tenancy.APIKey, testfixture.APIKey). The
// exception is written once, in .golangci.yml, for this package's apikey_types.go.
// +kubebuilder:object:generate=true
// +groupName=codeport.dev
package v1alpha1
