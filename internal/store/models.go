package store

import (
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// Order statuses; every status but processing is terminal.
const (
	OrderProcessing         = "processing"
	OrderCompleted          = "completed"
	OrderPartiallyCompleted = "partially_completed"
	OrderFailed             = "failed"
)

// Ledger entry kinds.
const (
	EntryTopUp      = "top_up"
	EntryOrderDebit = "order_debit"
	EntryRefund     = "refund"
	EntryAdjustment = "adjustment"
)

// ChannelConfig is the NOTIFY channel raised by the schema's triggers on configuration changes.
const ChannelConfig = "codeport_config"

// Account is a row of accounts: one environment of a partner, with its access and wallet settings.
type Account struct {
	ID                  uuid.UUID
	PartnerID           uuid.UUID
	Environment         string
	IPWhitelist         TextArray
	RateLimitPerMinute  int
	OrderingEnabled     bool
	WalletEnabled       bool
	MaxQuantityPerOrder *int
	// DailySpendLimits maps currency to minor units.
	DailySpendLimits JSONMap
	// LowBalanceThreshold is a decimal in major units, applied to every currency.
	LowBalanceThreshold string
	Suspended           bool
	CreatedAt           time.Time
	UpdatedAt           time.Time
}

// Catalog is a row of catalogs.
type Catalog struct {
	ID                        uuid.UUID
	Namespace                 string
	Name                      string
	Description               string
	ValidFrom                 time.Time
	ValidTo                   *time.Time
	CatalogTypeID             int
	DefaultDiscountPercentage string
	// StockLowThreshold is the number of available codes under which a product of the catalog
	// is low (stock.low); 0 turns the rule off.
	StockLowThreshold int
	CreatedAt         time.Time
	UpdatedAt         time.Time
	DeletedAt         *time.Time
}

// CatalogProduct is a row of catalog_products: a product as one catalog sells it.
type CatalogProduct struct {
	CatalogID           uuid.UUID
	ProductCode         string
	Position            int
	EAN                 string
	Name                string
	ShortName           string
	Image               string
	Brand               string
	Publisher           string
	CountryCode         string
	CurrencyCode        string
	BuyingCurrencyCode  string
	DenominationType    string
	Price               *int64
	BuyingPrice         *int64
	RRP                 *int64
	DenominationMin     *int64
	DenominationMax     *int64
	DenominationStep    *int64
	DenominationDefault *int64
	// DiscountPercentage is a decimal string, e.g. "7.5".
	DiscountPercentage string
	MainCategory       string
	SubCategory        string
	ProductCategory    string
	ProductType        string
	Platform           string
	Type               string
	Tags               TextArray
	Languages          JSONSlice[ProductLanguage]
	Promotion          *JSONObject[ProductPromotion]
	ServiceFee         *JSONObject[ProductServiceFee]
	Status             string
	Preorder           bool
	FirstSale          pgtype.Date
	PlayableOn         pgtype.Date
	Expires            bool
	ExpiryPolicy       string
	CreatedAt          time.Time
	UpdatedAt          time.Time
}

// ProductLanguage is a product's text in one language, as catalog_products stores it in JSON.
type ProductLanguage struct {
	LanguageCode           string `json:"languageCode"`
	Name                   string `json:"name"`
	Image                  string `json:"image,omitempty"`
	Description            string `json:"description,omitempty"`
	Tnc                    string `json:"tnc,omitempty"`
	RedemptionInstructions string `json:"redemptionInstructions,omitempty"`
}

// ProductPromotion is a promotion of a product, as catalog_products stores it in JSON.
type ProductPromotion struct {
	Type      string `json:"type"`
	Details   string `json:"details"`
	StartDate string `json:"startDate,omitempty"`
	EndDate   string `json:"endDate,omitempty"`
}

// ProductServiceFee is a service fee of a product, as catalog_products stores it in JSON.
type ProductServiceFee struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// WalletBalance is a row of wallet_balances: an account's balance in one currency, in minor units.
type WalletBalance struct {
	AccountID  uuid.UUID
	Currency   string
	Balance    int64
	LowBalance bool
	UpdatedAt  time.Time
}

// WalletEntry is a row of wallet_entries, the ledger: one balance change, in minor units.
type WalletEntry struct {
	ID           int64
	AccountID    uuid.UUID
	Currency     string
	Kind         string
	Reference    string
	Amount       int64
	BalanceAfter int64
	Note         string
	CreatedAt    time.Time
}

// Order is a row of orders, with its lines when read with them.
type Order struct {
	ID                uuid.UUID
	AccountID         uuid.UUID
	ExternalOrderCode string
	PayloadHash       []byte
	Currency          string
	TotalPrice        int64
	TotalQuantity     int
	DebitedAmount     int64
	RefundedAmount    int64
	Status            string
	Delivered         int
	Reason            *string
	EstimatedReadyAt  time.Time
	CreatedAt         time.Time
	FinishedAt        *time.Time
	// Metadata is the partner's key/value pairs (jsonb, {} when none).
	Metadata map[string]string
	// ArchivedAt is when the order's details went to the archive (archive.go): it has no lines
	// then, and only its row remains online.
	ArchivedAt *time.Time
	Lines      []OrderLine
}

// OrderLine is a row of order_lines.
type OrderLine struct {
	OrderID     uuid.UUID
	LineNo      int
	ProductCode string
	UnitPrice   int64
	Quantity    int
	Currency    string
	SKU         string
}

// CodeStock is a row of code_stock: an imported code, sealed, and the order it went to once delivered.
type CodeStock struct {
	ID          int64
	ProductCode string
	KeyRef      KeyRef // the codes key the ciphertext is sealed under
	Ciphertext  []byte
	Digest      []byte
	Batch       string
	ImportedAt  time.Time
	OrderID     *uuid.UUID
	DeliveredAt *time.Time
}

// DeliveredCode is a row of delivered_codes: one unit of an order's line, sealed.
type DeliveredCode struct {
	OrderID     uuid.UUID
	LineNo      int
	UnitNo      int
	StockID     *int64
	KeyRef      KeyRef // the codes key the ciphertext is sealed under
	Ciphertext  []byte
	Digest      []byte
	DeliveredAt time.Time
}

// WebhookSecretOwner is what a partner's sealed webhook secret of an environment is bound to:
// it opens for that endpoint only.
func WebhookSecretOwner(partnerID uuid.UUID, environment string) string {
	return "webhook/" + partnerID.String() + "/" + environment
}

// WebhookEvent is a row of webhook_events.
type WebhookEvent struct {
	ID          string
	AccountID   uuid.UUID
	Type        string
	Payload     JSON
	CreatedAt   time.Time
	DeliveredAt *time.Time
	// State is WebhookPending, WebhookDelivered or WebhookFailed.
	State         string
	Attempts      int
	LastAttemptAt *time.Time
}
