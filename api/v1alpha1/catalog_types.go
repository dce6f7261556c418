package v1alpha1

import (
	"encoding/json"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Percentage is a decimal number from 0 to 100, written as a plain YAML number (7.5). It keeps
// the exact text so money computed from it is never subject to float rounding.
// +kubebuilder:validation:Type=number
// +kubebuilder:validation:Minimum=0
// +kubebuilder:validation:Maximum=100
type Percentage string

// MarshalJSON writes the percentage as a JSON number.
func (p Percentage) MarshalJSON() ([]byte, error) {
	if p == "" {
		return []byte("0"), nil
	}
	return []byte(p), nil
}

// UnmarshalJSON accepts a JSON number (or a numeric string, for hand-written manifests).
func (p *Percentage) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("percentage must be a number: %w", err)
	}
	if _, err := strconv.ParseFloat(string(n), 64); err != nil {
		return fmt.Errorf("percentage %q is not a number", n)
	}
	*p = Percentage(n)
	return nil
}

// DenominationType says how a product is priced.
// +kubebuilder:validation:Enum=fixed;open
type DenominationType string

// The denominations: a fixed price, or an amount the partner chooses within bounds.
const (
	DenominationFixed DenominationType = "fixed"
	DenominationOpen  DenominationType = "open"
)

// ProductStatus is a product's availability.
// +kubebuilder:validation:Enum=active;inactive;preorder
type ProductStatus string

// CatalogSpec is a product catalog that Partners reference.
// +kubebuilder:validation:XValidation:rule="!has(self.validTo) || self.validTo > self.validFrom",message="validTo must be after validFrom"
type CatalogSpec struct {
	// Description is shown in the legacy v1 catalog resource.
	// +optional
	// +kubebuilder:validation:MaxLength=1000
	Description string `json:"description,omitempty"`

	// ValidFrom is when the catalog becomes orderable (RFC 3339).
	ValidFrom metav1.Time `json:"validFrom"`

	// ValidTo is when the catalog stops being orderable; omit for no end.
	// +optional
	ValidTo *metav1.Time `json:"validTo,omitempty"`

	// CatalogTypeID is reported as catalogTypeId by the legacy v1 API.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	CatalogTypeID int32 `json:"catalogTypeId,omitempty"`

	// DefaultDiscountPercentage is the partner's commission on products without their own
	// discountPercentage: buyingPrice = price - round(price * pct / 100).
	// +optional
	DefaultDiscountPercentage Percentage `json:"defaultDiscountPercentage,omitempty"`

	// StockLowThreshold is the number of available production codes under which a product of
	// this catalog is low: status.stock counts it, and the partners' endpoints that list
	// stock.low hear of it once each time it falls under. Omit it for the operator's
	// --stock-low-threshold; 0 turns the rule off. The bound keeps each delivery's count of
	// what is left small.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	StockLowThreshold *int32 `json:"stockLowThreshold,omitempty"`

	// Products listed inline, for small catalogs. Large catalogs put their products in
	// CatalogShards that name this catalog (spec.catalogRef); the catalog serves the union of
	// its inline products, its productsFrom ConfigMaps and its shards. A catalog with none of
	// them is in service with no products (e.g. until its shards are applied).
	// +optional
	// +listType=map
	// +listMapKey=productCode
	// +kubebuilder:validation:MaxItems=2000
	Products []CatalogProduct `json:"products,omitempty"`

	// ProductsFrom loads more products from ConfigMaps (a JSON list of the same objects as
	// products), watched for changes. The API server does not validate their content; prefer
	// CatalogShards, which it does.
	// +optional
	// +kubebuilder:validation:MaxItems=50
	ProductsFrom []ProductsSource `json:"productsFrom,omitempty"`
}

// ProductsSource names a ConfigMap key holding a JSON list of products.
type ProductsSource struct {
	// ConfigMapRef selects the ConfigMap (same namespace) and key.
	ConfigMapRef ConfigMapKeyRef `json:"configMapRef"`
}

// ConfigMapKeyRef selects one key of a ConfigMap in the same namespace.
type ConfigMapKeyRef struct {
	// Name of the ConfigMap.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Key of the ConfigMap's data holding the JSON list.
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
}

// CatalogProduct is one orderable product. Prices are integers in minor units (cents) of
// currencyCode.
// +kubebuilder:validation:XValidation:rule="self.denomination.type != 'fixed' || has(self.price)",message="fixed-denomination products need a price"
// +kubebuilder:validation:XValidation:rule="self.denomination.type != 'open' || (has(self.denomination.min) && has(self.denomination.max))",message="open-denomination products need denomination.min and denomination.max"
type CatalogProduct struct {
	// ProductCode is the stable 14-digit identifier partners order by; identical in sandbox and
	// production.
	// +kubebuilder:validation:Pattern=`^[0-9]{14}$`
	ProductCode string `json:"productCode"`

	// EAN is the product's 8- or 13-digit barcode, used by the legacy v1 lookup.
	// +optional
	// +kubebuilder:validation:Pattern=`^([0-9]{8}|[0-9]{13})$`
	EAN string `json:"ean,omitempty"`

	// Name is the display name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=300
	Name string `json:"name"`

	// ShortName is a short display name.
	// +optional
	// +kubebuilder:validation:MaxLength=100
	ShortName string `json:"shortName,omitempty"`

	// Image is the URL of the product image.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Image string `json:"image,omitempty"`

	// Brand of the product, e.g. the platform whose credit it is.
	// +optional
	Brand string `json:"brand,omitempty"`

	// Publisher of the product.
	// +optional
	Publisher string `json:"publisher,omitempty"`

	// CountryCode is the ISO 3166-1 alpha-2 market the product is sold for (redeemable there).
	// +kubebuilder:validation:Pattern=`^[A-Z]{2}$`
	CountryCode string `json:"countryCode"`

	// CurrencyCode is the selling currency, an active ISO 4217 code; orders must use it.
	CurrencyCode CurrencyCode `json:"currencyCode"`

	// Price is the selling price of a fixed-denomination product, in minor units.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Price *int64 `json:"price,omitempty"`

	// RRP is the recommended retail price in minor units, shown by the legacy v1 API.
	// +optional
	// +kubebuilder:validation:Minimum=0
	RRP *int64 `json:"rrp,omitempty"`

	// Denomination says whether the price is fixed or chosen per order within a range.
	// +kubebuilder:default={type: fixed}
	Denomination Denomination `json:"denomination,omitempty"`

	// MainCategory, e.g. Gaming; the catalog's category filter matches it.
	// +optional
	MainCategory string `json:"mainCategory,omitempty"`
	// SubCategory, e.g. Wallet.
	// +optional
	SubCategory string `json:"subCategory,omitempty"`
	// ProductCategory, e.g. Credit.
	// +optional
	ProductCategory string `json:"productCategory,omitempty"`
	// ProductType, e.g. Digital Code.
	// +optional
	ProductType string `json:"productType,omitempty"`
	// Platform, e.g. PC.
	// +optional
	Platform string `json:"platform,omitempty"`
	// Type of product as reported to partners; default digital.
	// +optional
	Type string `json:"type,omitempty"`

	// Tags for filtering (tag query parameter).
	// +optional
	// +listType=atomic
	Tags []string `json:"tags,omitempty"`

	// Languages the product is localised in; each yields a SKU {CC}-{LL}-{productCode}.
	// +optional
	// +listType=map
	// +listMapKey=languageCode
	Languages []ProductLanguage `json:"languages,omitempty"`

	// DiscountPercentage overrides the catalog's defaultDiscountPercentage for this product.
	// +optional
	DiscountPercentage *Percentage `json:"discountPercentage,omitempty"`

	// Promotion currently or soon applying to the product.
	// +optional
	Promotion *Promotion `json:"promotion,omitempty"`

	// ServiceFee charged on the product.
	// +optional
	ServiceFee *ServiceFee `json:"serviceFee,omitempty"`

	// Status: active products are orderable; inactive ones are listed but rejected ("not
	// currently available"); preorder ones are listed as preorder.
	// +kubebuilder:default=active
	Status ProductStatus `json:"status,omitempty"`

	// FirstSale is the release date (YYYY-MM-DD).
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`
	FirstSale string `json:"firstSale,omitempty"`

	// PlayableOn is the date the product becomes usable (YYYY-MM-DD).
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`
	PlayableOn string `json:"playableOn,omitempty"`

	// Expires is true when delivered codes expire.
	// +optional
	Expires bool `json:"expires,omitempty"`

	// ExpiryPolicy describes the expiry in free text.
	// +optional
	ExpiryPolicy string `json:"expiryPolicy,omitempty"`
}

// Denomination describes fixed or open pricing.
// +kubebuilder:validation:XValidation:rule="self.type != 'open' || !has(self.min) || !has(self.max) || self.min <= self.max",message="denomination.min must not exceed denomination.max"
// +kubebuilder:validation:XValidation:rule="self.type != 'open' || !has(self.default) || !has(self.min) || !has(self.max) || (self.default >= self.min && self.default <= self.max)",message="denomination.default must lie between min and max"
type Denomination struct {
	// Type is fixed (price set by the catalog) or open (the partner chooses the amount per line
	// within min..max).
	// +kubebuilder:default=fixed
	Type DenominationType `json:"type"`
	// Min is the lowest open amount, minor units.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Min *int64 `json:"min,omitempty"`
	// Max is the highest open amount, minor units.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Max *int64 `json:"max,omitempty"`
	// Step is the increment between allowed open amounts, minor units (default 1).
	// +optional
	// +kubebuilder:validation:Minimum=1
	Step *int64 `json:"step,omitempty"`
	// Default is the suggested open amount, minor units.
	// +optional
	Default *int64 `json:"default,omitempty"`
}

// ProductLanguage is one localisation of a product.
type ProductLanguage struct {
	// LanguageCode is the ISO 639-1 code, e.g. en.
	// +kubebuilder:validation:Pattern=`^[a-z]{2}$`
	LanguageCode string `json:"languageCode"`
	// Name of the language, e.g. English.
	// +optional
	Name string `json:"name,omitempty"`
	// Image localised for this language.
	// +optional
	Image string `json:"image,omitempty"`
	// Description of the product in this language (plain text; the v1 API also serves it as HTML).
	// +optional
	Description string `json:"description,omitempty"`
	// Tnc is the terms and conditions text.
	// +optional
	Tnc string `json:"tnc,omitempty"`
	// RedemptionInstructions tell the end customer how to redeem a code.
	// +optional
	RedemptionInstructions string `json:"redemptionInstructions,omitempty"`
}

// Promotion on a product.
type Promotion struct {
	// Type of promotion.
	// +kubebuilder:validation:Enum=Discount;Value Off;Added Value
	Type string `json:"type"`
	// Details: a percentage, an amount off, or a bonus description.
	// +optional
	Details string `json:"details,omitempty"`
	// StartDate is the first day of the promotion (YYYY-MM-DD).
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`
	StartDate string `json:"startDate,omitempty"`
	// EndDate is the last day of the promotion (YYYY-MM-DD).
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`
	EndDate string `json:"endDate,omitempty"`
}

// ServiceFee on a product.
type ServiceFee struct {
	// Type is Percentage (of the sell price) or Amount (fixed, minor units).
	// +kubebuilder:validation:Enum=Percentage;Amount
	Type string `json:"type"`
	// Value: percent for Percentage, minor units for Amount, as a decimal string.
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	Value string `json:"value"`
}

// InvalidProduct names a product the catalog could not accept.
type InvalidProduct struct {
	// ProductCode of the offending product.
	ProductCode string `json:"productCode"`
	// Reason it was rejected.
	Reason string `json:"reason"`
}

// CatalogStatus is the observed state of a Catalog.
type CatalogStatus struct {
	// Conditions: Ready is False with reason InvalidProducts while any product is invalid, and
	// with reason DuplicateProducts while a productCode appears in more than one source (the
	// catalog itself, a ConfigMap, a shard); the last valid version of the catalog stays in
	// service meanwhile.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ProductCount is the number of products in service.
	// +optional
	ProductCount int32 `json:"productCount,omitempty"`
	// ShardCount is the number of CatalogShards naming this catalog that the last reconcile read.
	// +optional
	ShardCount int32 `json:"shardCount,omitempty"`
	// InvalidProducts lists the products rejected by the last reconcile.
	// +optional
	InvalidProducts []InvalidProduct `json:"invalidProducts,omitempty"`
	// Stock is the production code stock of the catalog's products, counted every
	// --stock-refresh (stock changes with orders, not with the Catalog).
	// +optional
	Stock *CatalogStock `json:"stock,omitempty"`
}

// CatalogStock counts a catalog's products by their available production codes.
type CatalogStock struct {
	// LowThreshold is the threshold the counts were made with (spec.stockLowThreshold or the
	// operator's default).
	LowThreshold int32 `json:"lowThreshold"`
	// Low is the number of products with fewer available codes than lowThreshold, out of
	// stock ones included.
	Low int32 `json:"low"`
	// OutOfStock is the number of products with no available code.
	OutOfStock int32 `json:"outOfStock"`
	// Lowest are up to five of the low products (or, with lowThreshold 0, out of stock ones),
	// fewest codes first.
	// +optional
	// +listType=atomic
	Lowest []ProductStock `json:"lowest,omitempty"`
}

// ProductStock is one product's available production codes.
type ProductStock struct {
	// ProductCode of the product.
	ProductCode string `json:"productCode"`
	// Available codes, not yet delivered.
	Available int32 `json:"available"`
}

// Catalog is a set of products, with prices and the partner's discount, that Partners reference.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=cpcat,categories=codeport
// +kubebuilder:printcolumn:name="Products",type=integer,JSONPath=`.status.productCount`
// +kubebuilder:printcolumn:name="Shards",type=integer,JSONPath=`.status.shardCount`
// +kubebuilder:printcolumn:name="Low",type=integer,JSONPath=`.status.stock.low`,description="Products under the low-stock threshold"
// +kubebuilder:printcolumn:name="Out",type=integer,JSONPath=`.status.stock.outOfStock`,description="Products out of stock"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Catalog struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CatalogSpec   `json:"spec"`
	Status CatalogStatus `json:"status,omitempty"`
}

// CatalogList is a list of Catalogs.
// +kubebuilder:object:root=true
type CatalogList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Catalog `json:"items"`
}
