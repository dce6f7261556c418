package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ApiKeyType is the kind of credential.
// +kubebuilder:validation:Enum=apiKey;bearerToken
type ApiKeyType string

// The kinds of credential: an x-api-key for /v2, a bearer token for the legacy /v1.
const (
	ApiKeyTypeAPIKey      ApiKeyType = "apiKey"
	ApiKeyTypeBearerToken ApiKeyType = "bearerToken"
)

// ApiKeySpec requests a credential for one environment of a Partner.
type ApiKeySpec struct {
	// PartnerRef names the Partner (same namespace) the key belongs to. Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="partnerRef is immutable"
	PartnerRef LocalObjectReference `json:"partnerRef"`

	// Environment the key works in: sandbox keys start cp_test_, production keys cp_live_.
	// A key is rejected by the other environment. Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="environment is immutable"
	Environment Environment `json:"environment"`

	// Type is apiKey (the v2 x-api-key header) or bearerToken (legacy v1 Authorization: Bearer).
	// +kubebuilder:default=apiKey
	// +optional
	Type ApiKeyType `json:"type,omitempty"`

	// SecretName is the Secret (same namespace, owned by this ApiKey) that receives the key:
	// data keys apiKey, environment and baseUrl. The plaintext exists nowhere else.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	SecretName string `json:"secretName"`

	// Rotation: raise it to rotate. A new key is issued into the Secret and the previous key is
	// revoked at once (or after previousKeyGracePeriod). It may only increase.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self >= oldSelf",message="rotation may only increase"
	Rotation int64 `json:"rotation,omitempty"`

	// PreviousKeyGracePeriod keeps the key a rotation replaces valid for this long (e.g. "1h"), so
	// that the partner can deploy the new key before the old one stops working; when it stops is
	// status.previousKeyExpiresAt. 0, the default, revokes it at once, as the partner API contract
	// says. At most 168h. Only rotations get a grace period: a key whose Secret was deleted or
	// overwritten is revoked at once, and so is a key still in an earlier rotation's grace period.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('168h')",message="previousKeyGracePeriod must be between 0s and 168h"
	PreviousKeyGracePeriod *metav1.Duration `json:"previousKeyGracePeriod,omitempty"`
}

// ApiKeyStatus is the observed state of an ApiKey.
type ApiKeyStatus struct {
	// KeyPrefix is the first characters of the active key, to recognise it without revealing it.
	// +optional
	KeyPrefix string `json:"keyPrefix,omitempty"`
	// IssuedAt is when the active key was issued.
	// +optional
	IssuedAt *metav1.Time `json:"issuedAt,omitempty"`
	// Rotation is the spec.rotation the active key was issued for.
	// +optional
	Rotation int64 `json:"rotation,omitempty"`
	// PreviousKeyPrefix is the first characters of the key the last rotation replaced, while it
	// is still valid (spec.previousKeyGracePeriod).
	// +optional
	PreviousKeyPrefix string `json:"previousKeyPrefix,omitempty"`
	// PreviousKeyExpiresAt is when that key stops working; the operator then revokes it and
	// clears both fields.
	// +optional
	PreviousKeyExpiresAt *metav1.Time `json:"previousKeyExpiresAt,omitempty"`
	// Conditions: Ready is True when the key in the Secret is active in the data plane.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// ApiKey is a partner credential for one environment. The operator generates it once, stores
// only its SHA-256 digest in the database and the plaintext only in the Secret.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=cpkey,categories=codeport
// +kubebuilder:printcolumn:name="Partner",type=string,JSONPath=`.spec.partnerRef.name`
// +kubebuilder:printcolumn:name="Environment",type=string,JSONPath=`.spec.environment`
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Secret",type=string,JSONPath=`.spec.secretName`
// +kubebuilder:printcolumn:name="Prefix",type=string,JSONPath=`.status.keyPrefix`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ApiKey struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ApiKeySpec   `json:"spec"`
	Status ApiKeyStatus `json:"status,omitempty"`
}

// ApiKeyList is a list of ApiKeys.
// +kubebuilder:object:root=true
type ApiKeyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ApiKey `json:"items"`
}
