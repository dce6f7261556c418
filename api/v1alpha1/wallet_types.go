package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WalletSpec is the prepaid balance of one environment of a Partner.
type WalletSpec struct {
	// PartnerRef names the Partner (same namespace). Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="partnerRef is immutable"
	PartnerRef LocalObjectReference `json:"partnerRef"`

	// Environment of the account whose wallet this is. Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="environment is immutable"
	Environment Environment `json:"environment"`

	// LowBalanceThreshold, in major units ("100.00"), applies to each currency: when a balance
	// crosses below it the partner is alerted once (e-mail and balance.low webhook).
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]{1,3})?$`
	LowBalanceThreshold string `json:"lowBalanceThreshold,omitempty"`

	// TopUps are credits to the wallet. Each is applied exactly once, by id, as a ledger entry.
	// The ledger is append-only: removing a top-up from this list does not reverse it.
	//
	// Deprecated: create WalletTopUp resources instead, which RBAC can grant apart from the
	// Wallet's settings; an operator run with --wallet-spec-top-ups=false applies no new entry
	// of this list.
	//
	// +optional
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=1000
	TopUps []TopUp `json:"topUps,omitempty"`
}

// TopUp is one credit to a wallet.
type TopUp struct {
	// ID identifies the top-up (e.g. the bank transfer reference); unique within the wallet.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	ID string `json:"id"`
	// Currency is the active ISO 4217 code of the balance credited.
	Currency CurrencyCode `json:"currency"`
	// Amount in major units as a decimal string, e.g. "5000.00"; at most as many decimals as
	// the currency has.
	// +kubebuilder:validation:MaxLength=24
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]{1,3})?$`
	// +kubebuilder:validation:XValidation:rule="self.matches('[1-9]')",message="amount must be positive"
	Amount string `json:"amount"`
	// Note is free text kept on the ledger entry.
	// +optional
	// +kubebuilder:validation:MaxLength=500
	Note string `json:"note,omitempty"`
}

// WalletStatus is the observed state of a Wallet, refreshed as orders spend money.
type WalletStatus struct {
	// Balances per currency, major units as decimal strings.
	// +optional
	Balances map[string]string `json:"balances,omitempty"`
	// LowBalance is true while any balance is below the threshold.
	// +optional
	LowBalance bool `json:"lowBalance,omitempty"`
	// AppliedTopUps is the number of top-ups recorded in the ledger.
	// +optional
	AppliedTopUps int32 `json:"appliedTopUps,omitempty"`
	// Conditions: Ready (False with InvalidTopUp when entries of spec.topUps cannot be credited,
	// which it names), and TopUpsReconciled (False when entries cannot be credited, or when
	// applied top-ups were removed from spec).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// Wallet is the prepaid, per-currency balance that orders of one partner environment are paid from.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=cpwallet,categories=codeport
// +kubebuilder:printcolumn:name="Partner",type=string,JSONPath=`.spec.partnerRef.name`
// +kubebuilder:printcolumn:name="Environment",type=string,JSONPath=`.spec.environment`
// +kubebuilder:printcolumn:name="Balances",type=string,JSONPath=`.status.balances`
// +kubebuilder:printcolumn:name="Low",type=boolean,JSONPath=`.status.lowBalance`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Wallet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WalletSpec   `json:"spec"`
	Status WalletStatus `json:"status,omitempty"`
}

// WalletList is a list of Wallets.
// +kubebuilder:object:root=true
type WalletList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Wallet `json:"items"`
}
