package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PartnerSpec is a partner's access to the partner API: who they are, which catalog they buy
// from, where they may call from, how fast, and how they may order.
type PartnerSpec struct {
	// DisplayName is the partner's legal or trading name, shown in notifications.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	DisplayName string `json:"displayName"`

	// ContactEmail receives operational e-mail such as low-balance alerts.
	// +kubebuilder:validation:Pattern=`^[^@\s]+@[^@\s]+\.[^@\s]+$`
	ContactEmail string `json:"contactEmail"`

	// CatalogRef names the Catalog (same namespace) whose products this partner can browse and
	// order. Without it the partner's catalog is empty (sandbox still lists the test products).
	// +optional
	CatalogRef *LocalObjectReference `json:"catalogRef,omitempty"`

	// AccessPolicy holds the settings that may be overridden per environment.
	AccessPolicy `json:",inline"`

	// Environments overrides the settings above for one environment (sandbox or production).
	// Fields left out inherit the partner-wide value.
	// +optional
	Environments *EnvironmentOverrides `json:"environments,omitempty"`

	// Suspended blocks every API request of the partner (403) without revoking its keys.
	// +optional
	Suspended bool `json:"suspended,omitempty"`
}

// AccessPolicy is the part of a Partner that can differ between sandbox and production.
type AccessPolicy struct {
	// IPWhitelist lists the partner's egress addresses, as IPs or CIDRs (IPv4 or IPv6), e.g.
	// 203.0.113.0/24. Requests from anywhere else get 403. An empty list admits nobody.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:XValidation:rule="isIP(self) || isCIDR(self)",message="must be an IP address or CIDR, e.g. 203.0.113.0/24"
	IPWhitelist []string `json:"ipWhitelist,omitempty"`

	// RateLimit caps requests per API key.
	// +optional
	RateLimit *RateLimitSpec `json:"rateLimit,omitempty"`

	// Ordering controls whether and how much the partner may order through the API.
	// +optional
	Ordering *OrderingSpec `json:"ordering,omitempty"`

	// Webhook is where signed event notifications (order.completed, order.failed,
	// order.partially_completed, balance.low) are delivered. Every event names its environment.
	// Set partner-wide, one endpoint serves both environments; set under environments, that
	// environment's events go to its own endpoint. Omit to poll only.
	// +optional
	Webhook *WebhookSpec `json:"webhook,omitempty"`
}

// EnvironmentOverrides holds per-environment overrides of a Partner's access policy.
type EnvironmentOverrides struct {
	// Sandbox overrides for the sandbox environment.
	// +optional
	Sandbox *AccessPolicy `json:"sandbox,omitempty"`
	// Production overrides for the production environment.
	// +optional
	Production *AccessPolicy `json:"production,omitempty"`
}

// RateLimitSpec is a fixed-window request allowance.
type RateLimitSpec struct {
	// RequestsPerMinute is the number of requests each key may make per calendar minute
	// (fixed 60-second window). Further requests get 429 with Retry-After. Default 600.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	RequestsPerMinute int32 `json:"requestsPerMinute"`
}

// OrderingSpec controls API ordering.
type OrderingSpec struct {
	// Enabled allows placing orders through the API. When false, POST /orders answers 403
	// "API ordering is disabled for your account." Default true.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// WalletEnabled debits each order's total from the partner's wallet in the order's currency;
	// orders the wallet can't cover get 422 "Insufficient funds". Default true.
	// +optional
	WalletEnabled *bool `json:"walletEnabled,omitempty"`

	// Limits caps order size and daily spend; exceeding them gets 422 "Your account order
	// limit has been exceeded."
	// +optional
	Limits *OrderLimits `json:"limits,omitempty"`
}

// OrderLimits caps ordering.
type OrderLimits struct {
	// MaxQuantityPerOrder is the most code units one order may contain (all lines together).
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxQuantityPerOrder *int32 `json:"maxQuantityPerOrder,omitempty"`

	// DailySpend caps, per currency (an active ISO 4217 code), the total ordered per UTC day, in
	// minor units (cents): {EUR: 5000000} is EUR 50,000.00.
	// +optional
	// +kubebuilder:validation:MaxProperties=50
	// +kubebuilder:validation:XValidation:rule="self.all(k, self[k] >= 0)",message="dailySpend amounts must not be negative"
	DailySpend MinorUnitsByCurrency `json:"dailySpend,omitempty"`
}

// WebhookSpec is a partner's event endpoint.
// +kubebuilder:validation:XValidation:rule="self.url.startsWith('https://') || self.url.startsWith('http://')",message="webhook.url must be an http(s) URL"
type WebhookSpec struct {
	// URL receives a POST per event, signed per the Standard Webhooks scheme.
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url"`

	// SecretRef selects the Secret key holding the signing secret (Standard Webhooks "whsec_"
	// base64 form, or any string of at least 24 bytes).
	SecretRef SecretKeySelector `json:"secretRef"`

	// Events limits delivery to these event types; empty delivers the order and balance events.
	// The catalog events (product.updated, product.removed, catalog.updated) and stock.low are
	// delivered only when listed here.
	// +optional
	// +listType=set
	Events []WebhookEventType `json:"events,omitempty"`
}

// WebhookEventType is an event a partner can subscribe to.
// +kubebuilder:validation:Enum=order.completed;order.failed;order.partially_completed;balance.low;product.updated;product.removed;catalog.updated;stock.low
type WebhookEventType string

// PartnerAccounts are the data-plane account ids of a partner.
type PartnerAccounts struct {
	// Sandbox is the id of the sandbox account.
	// +optional
	Sandbox string `json:"sandbox,omitempty"`
	// Production is the id of the production account.
	// +optional
	Production string `json:"production,omitempty"`
}

// PartnerStatus is the observed state of a Partner.
type PartnerStatus struct {
	// Conditions: Ready (applied to the data plane) and CatalogResolved.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the generation last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Accounts are the partner's data-plane account ids, one per environment.
	// +optional
	Accounts PartnerAccounts `json:"accounts,omitempty"`
}

// Partner is a company that buys codes through the partner API. It owns two accounts, sandbox
// and production, each with its keys, wallet and orders.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName={cpptn,ptn},categories=codeport
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Catalog",type=string,JSONPath=`.spec.catalogRef.name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Partner struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PartnerSpec   `json:"spec"`
	Status PartnerStatus `json:"status,omitempty"`
}

// PartnerList is a list of Partners.
// +kubebuilder:object:root=true
type PartnerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Partner `json:"items"`
}
