package v1alpha1

// Environment is one of the two deployments of the partner API.
// +kubebuilder:validation:Enum=sandbox;production
type Environment string

// The environments of every partner: the sandbox and production.
const (
	EnvironmentSandbox    Environment = "sandbox"
	EnvironmentProduction Environment = "production"
)

// LocalObjectReference names another object in the same namespace.
type LocalObjectReference struct {
	// Name of the referenced object, in the same namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SecretKeySelector selects one key of a Secret in the same namespace.
type SecretKeySelector struct {
	// Name of the Secret, in the same namespace.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Key inside the Secret's data.
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
}

// Condition types shared by the kinds.
const (
	// ConditionReady is True when the resource is fully applied to the data plane.
	ConditionReady = "Ready"
	// ConditionCatalogResolved is True when a Partner's catalogRef names an existing, valid Catalog.
	ConditionCatalogResolved = "CatalogResolved"
	// ConditionTopUpsReconciled is False when top-ups were removed from a Wallet after being applied.
	ConditionTopUpsReconciled = "TopUpsReconciled"
)

// Condition reasons.
const (
	ReasonReconciled      = "Reconciled"
	ReasonReconcileError  = "ReconcileError"
	ReasonCatalogNotFound = "CatalogNotFound"
	ReasonCatalogNotReady = "CatalogNotReady"
	ReasonNoCatalog       = "NoCatalog"
	ReasonInvalidProducts = "InvalidProducts"
	// ReasonDuplicateProducts: a productCode appears in more than one of a Catalog's sources
	// (the catalog itself, its ConfigMaps, its shards); the last good catalog stays in service.
	ReasonDuplicateProducts = "DuplicateProducts"
	ReasonConfigMapNotFound = "ConfigMapNotFound"
	// ReasonOutsideValidityWindow: a Catalog's products are provisioned, but now is before its
	// validFrom or after its validTo, so the API serves none of them; the status turns at each
	// edge of the window. On a Partner's CatalogResolved (True: the binding stands) it says the
	// bound Catalog is outside its window.
	ReasonOutsideValidityWindow = "OutsideValidityWindow"
	ReasonPartnerNotFound       = "PartnerNotFound"
	ReasonPartnerNotReady       = "PartnerNotReady"
	ReasonSecretConflict        = "SecretConflict"
	ReasonTopUpRemoved          = "TopUpRemoved"
	// ReasonInvalidTopUp: a top-up breaks the rule every credit passes (an active ISO 4217
	// currency, a positive amount with no more decimals than the currency has, at most the
	// operator's --max-top-up); it is not applied, and not retried.
	ReasonInvalidTopUp = "InvalidTopUp"
	// ReasonBalanceOverflow: crediting a WalletTopUp would take its balance past the largest the
	// ledger can hold; it is not applied, and not retried.
	ReasonBalanceOverflow = "BalanceOverflow"
	// ReasonDuplicateWallet: another Wallet already manages the wallet of the same partner and
	// environment; this one is not applied.
	ReasonDuplicateWallet = "DuplicateWallet"
	// ReasonWalletNotFound and ReasonWalletNotReady: a WalletTopUp's wallet does not exist or is
	// not in service (a duplicate, or its partner is not provisioned); it is applied once it is.
	ReasonWalletNotFound = "WalletNotFound"
	ReasonWalletNotReady = "WalletNotReady"
	// ReasonTopUpConflict: the top-up's id is already in the wallet's ledger, recorded by another
	// top-up or with another amount; this one is not applied.
	ReasonTopUpConflict = "TopUpConflict"
	// ReasonApplied: a WalletTopUp's credit is in the ledger.
	ReasonApplied   = "Applied"
	ReasonSuspended = "Suspended"
	// ReasonDeleting: the resource is being deleted and its data-plane side could not be undone
	// yet (the message says why); the finalizer holds the deletion until it can.
	ReasonDeleting = "Deleting"
	// ReasonDatabaseError: the data plane's database failed or refused a read or write; the
	// reconcile is retried with backoff and the message carries the database's error.
	ReasonDatabaseError = "DatabaseError"
	// ReasonSecretError: reading or writing an ApiKey's Secret through the Kubernetes API failed.
	ReasonSecretError = "SecretError"
	// ReasonWebhookSecretNotFound: a Partner's webhook secretRef names a Secret or key that does
	// not exist; no events are sent until it does.
	ReasonWebhookSecretNotFound = "WebhookSecretNotFound"
)
