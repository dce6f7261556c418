package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WalletTopUpSpec is one credit to a Wallet. Every field is immutable: the ledger entry it
// becomes is written once and never changed, so an edit could only make the resource lie about
// the money it moved. A mistaken top-up is corrected by a new one (the ledger is append-only).
// +kubebuilder:validation:XValidation:rule="has(self.note) == has(oldSelf.note) && (!has(self.note) || self.note == oldSelf.note)",message="note is immutable"
type WalletTopUpSpec struct {
	// WalletRef names the Wallet (same namespace) credited. Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="walletRef is immutable"
	WalletRef LocalObjectReference `json:"walletRef"`

	// ID identifies the top-up in the wallet's ledger (e.g. the bank transfer reference); it is
	// applied at most once per wallet. Ids are shared with the Wallet's spec.topUps: a transfer
	// recorded both ways is credited once, and the second record is refused. Immutable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="id is immutable"
	ID string `json:"id"`

	// Currency is the active ISO 4217 code of the balance credited. Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="currency is immutable"
	Currency CurrencyCode `json:"currency"`

	// Amount in major units as a decimal string, e.g. "5000.00"; at most as many decimals as the
	// currency has. Immutable.
	// +kubebuilder:validation:MaxLength=24
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]{1,3})?$`
	// +kubebuilder:validation:XValidation:rule="self.matches('[1-9]')",message="amount must be positive"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="amount is immutable"
	Amount string `json:"amount"`

	// Note is free text kept on the ledger entry. Immutable.
	// +optional
	// +kubebuilder:validation:MaxLength=500
	Note string `json:"note,omitempty"`
}

// WalletTopUpStatus is the observed state of a WalletTopUp.
type WalletTopUpStatus struct {
	// Applied is true once the credit is in the wallet's ledger; it never turns false.
	// +optional
	Applied bool `json:"applied,omitempty"`
	// AppliedAt is when the ledger entry was written.
	// +optional
	AppliedAt *metav1.Time `json:"appliedAt,omitempty"`
	// Conditions: Ready is True once applied, False with a reason (WalletNotFound,
	// WalletNotReady, InvalidTopUp, TopUpConflict, BalanceOverflow, DatabaseError) while it is not.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// WalletTopUp credits a Wallet once. It is a kind of its own so that RBAC can grant moving money
// (create wallettopups) apart from a Wallet's settings (update wallets). Deleting it does not
// reverse the credit: the ledger is append-only.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=cptopup,categories=codeport
// +kubebuilder:printcolumn:name="Wallet",type=string,JSONPath=`.spec.walletRef.name`
// +kubebuilder:printcolumn:name="Amount",type=string,JSONPath=`.spec.amount`
// +kubebuilder:printcolumn:name="Currency",type=string,JSONPath=`.spec.currency`
// +kubebuilder:printcolumn:name="Applied",type=date,JSONPath=`.status.appliedAt`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WalletTopUp struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WalletTopUpSpec   `json:"spec"`
	Status WalletTopUpStatus `json:"status,omitempty"`
}

// WalletTopUpList is a list of WalletTopUps.
// +kubebuilder:object:root=true
type WalletTopUpList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WalletTopUp `json:"items"`
}
