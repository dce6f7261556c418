package configdb

import (
	"time"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/store"
)

// Partner is a row of partners as provisioning writes it.
type Partner struct {
	ID           uuid.UUID `gorm:"type:uuid;primaryKey;default:gen_random_uuid()"`
	Namespace    string
	Name         string
	DisplayName  string
	ContactEmail string
	CatalogID    *uuid.UUID `gorm:"type:uuid"`
	Suspended    bool
	CreatedAt    time.Time
	UpdatedAt    time.Time
	DeletedAt    *time.Time
}

// Account is a row of accounts as provisioning writes it; the wallet threshold is written by
// the wallet's own statements (internal/store).
type Account struct {
	ID                  uuid.UUID `gorm:"type:uuid;primaryKey;default:gen_random_uuid()"`
	PartnerID           uuid.UUID `gorm:"type:uuid"`
	Environment         string
	IPWhitelist         store.TextArray `gorm:"type:cidr[]"`
	RateLimitPerMinute  int
	OrderingEnabled     bool
	WalletEnabled       bool
	MaxQuantityPerOrder *int
	// DailySpendLimits maps currency to minor units.
	DailySpendLimits store.JSONMap `gorm:"type:jsonb"`
	Suspended        bool
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// APIKey is a row of api_keys.
type APIKey struct {
	ID        uuid.UUID `gorm:"type:uuid;primaryKey;default:gen_random_uuid()"`
	AccountID uuid.UUID `gorm:"type:uuid"`
	Kind      string
	Digest    []byte
	KeyPrefix string
	Source    string
	Rotation  int64
	CreatedAt time.Time
	RevokedAt *time.Time
	// ExpiresAt ends a key replaced by a rotation with a grace period; nil never expires.
	ExpiresAt *time.Time
}

// TableName is api_keys, which GORM would otherwise spell a_p_i_keys.
func (APIKey) TableName() string { return "api_keys" }

// WebhookEndpoint is a row of webhook_endpoints.
type WebhookEndpoint struct {
	PartnerID   uuid.UUID `gorm:"type:uuid;primaryKey"`
	Environment string    `gorm:"primaryKey"`
	URL         string    `gorm:"column:url"`
	// SealedSecret is the signing secret sealed with the codes key for store.WebhookSecretOwner;
	// nil until the operator has sealed it.
	SealedSecret []byte
	// SecretKeyRef names the codes key SealedSecret is sealed under.
	SecretKeyRef store.KeyRef
	EventTypes   store.TextArray `gorm:"type:text[]"`
	Enabled      bool
	UpdatedAt    time.Time
}
