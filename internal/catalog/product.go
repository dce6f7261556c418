package catalog

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"golang.org/x/text/language"
	"golang.org/x/text/language/display"

	"github.com/codeport/codeport/internal/money"
	"github.com/codeport/codeport/internal/store"
)

// Product statuses.
const (
	StatusActive   = "active"
	StatusInactive = "inactive"
	StatusPreorder = "preorder"
)

// Denomination types.
const (
	DenominationFixed = "fixed"
	DenominationOpen  = "open"
)

// Product is one catalog entry as the data plane serves and orders it.
type Product struct {
	store.CatalogProduct
	// IsSandboxProduct marks the built-in test products of every sandbox catalog.
	IsSandboxProduct bool
	// Outcome is the scripted fulfilment of a test product; empty for ordinary products.
	Outcome Outcome
}

// OpenDenomination reports whether the partner chooses the amount.
func (p *Product) OpenDenomination() bool { return p.DenominationType == DenominationOpen }

// Orderable reports whether the product may be ordered at all; inactive products may not.
func (p *Product) Orderable() bool { return p.Status != StatusInactive }

// SKU is the locale SKU of one of the product's languages: {CC}-{LL}-{productCode}.
func SKU(countryCode, languageCode, productCode string) string {
	return strings.ToUpper(countryCode) + "-" + strings.ToUpper(languageCode) + "-" + productCode
}

// Redeemable is the market name partners see for a country code ("DE" -> "Germany").
func Redeemable(countryCode string) string {
	region, err := language.ParseRegion(countryCode)
	if err != nil {
		return countryCode
	}
	if name := display.English.Regions().Name(region); name != "" {
		return name
	}
	return countryCode
}

// productJSON is a v2 list item. Field order and names are the contract's.
type productJSON struct {
	ProductCode        string      `json:"productCode"`
	Name               string      `json:"name"`
	ShortName          string      `json:"shortName"`
	Image              string      `json:"image"`
	Price              *int64      `json:"price"`
	CurrencyCode       string      `json:"currencyCode"`
	BuyingPrice        *int64      `json:"buyingPrice"`
	BuyingCurrencyCode string      `json:"buyingCurrencyCode"`
	DiscountAmount     *int64      `json:"discountAmount"`
	DiscountPercentage json.Number `json:"discountPercentage"`
	CurrencyMismatch   bool        `json:"currencyMismatch"`
	DenominationType   string      `json:"denominationType"`
	Brand              string      `json:"brand"`
	Publisher          string      `json:"publisher"`
	CountryCode        string      `json:"countryCode"`
	MainCategory       string      `json:"mainCategory"`
	SubCategory        string      `json:"subCategory"`
	ProductCategory    string      `json:"productCategory"`
	ProductType        string      `json:"productType"`
	Platform           string      `json:"platform"`
	Redeemable         string      `json:"redeemable"`
	Preorder           bool        `json:"preorder"`
	PreorderCode       bool        `json:"preorderCode"`
	FirstSale          *string     `json:"firstSale"`
	PlayableOn         *string     `json:"playableOn"`
	Expires            bool        `json:"expires"`
	ExpiryPolicy       string      `json:"expiryPolicy"`
	Tags               []string    `json:"tags"`
	Status             string      `json:"status"`
	Promotion          bool        `json:"promotion"`
	PromotionType      string      `json:"promotionType,omitempty"`
	PromotionDetails   string      `json:"promotionDetails,omitempty"`
	PromotionStartDate string      `json:"promotionStartDate,omitempty"`
	PromotionEndDate   string      `json:"promotionEndDate,omitempty"`
	ServiceFee         bool        `json:"serviceFee"`
	ServiceFeeType     string      `json:"serviceFeeType,omitempty"`
	ServiceFeeValue    string      `json:"serviceFeeValue,omitempty"`
	Type               string      `json:"type"`
	IsSandboxProduct   bool        `json:"isSandboxProduct,omitempty"`
}

// detailJSON is the single-product response: the list item plus denomination bounds and locales.
type detailJSON struct {
	productJSON
	DenominationMinValue     *int64         `json:"denominationMinValue"`
	DenominationMaxValue     *int64         `json:"denominationMaxValue"`
	DenominationStep         *int64         `json:"denominationStep"`
	DenominationDefaultValue *int64         `json:"denominationDefaultValue"`
	Languages                []languageJSON `json:"languages"`
}

type languageJSON struct {
	LanguageCode string `json:"languageCode"`
	Name         string `json:"name"`
	SKU          string `json:"sku"`
	Image        string `json:"image"`
}

func dateString(d pgtype.Date) *string {
	if !d.Valid {
		return nil
	}
	s := d.Time.Format(time.DateOnly)
	return &s
}

// promotionApplies is true on the days between the promotion's first and last day (inclusive);
// an open-ended side is unbounded.
func promotionApplies(p *store.ProductPromotion, today string) bool {
	if p == nil || p.Type == "" {
		return false
	}
	if p.StartDate != "" && today < p.StartDate {
		return false
	}
	if p.EndDate != "" && today > p.EndDate {
		return false
	}
	return true
}

// DetailJSON renders a catalog row as GET /catalog/products/{productCode} shows it on day today
// (YYYY-MM-DD, which decides whether its promotion applies).
func DetailJSON(row store.CatalogProduct, today string) (json.RawMessage, error) {
	p := Product{CatalogProduct: row}
	_, detail, err := p.encode(today)
	return detail, err
}

// encode renders the product's list item and single-product bodies once, when the snapshot is
// built; requests then copy bytes.
func (p *Product) encode(today string) (list, detail []byte, err error) {
	item := productJSON{
		ProductCode:        p.ProductCode,
		Name:               p.Name,
		ShortName:          p.ShortName,
		Image:              p.Image,
		CurrencyCode:       p.CurrencyCode,
		BuyingCurrencyCode: p.BuyingCurrencyCode,
		DiscountPercentage: json.Number(money.TrimDecimal(p.DiscountPercentage)),
		CurrencyMismatch:   p.BuyingCurrencyCode != p.CurrencyCode,
		DenominationType:   p.DenominationType,
		Brand:              p.Brand,
		Publisher:          p.Publisher,
		CountryCode:        p.CountryCode,
		MainCategory:       p.MainCategory,
		SubCategory:        p.SubCategory,
		ProductCategory:    p.ProductCategory,
		ProductType:        p.ProductType,
		Platform:           p.Platform,
		Redeemable:         Redeemable(p.CountryCode),
		Preorder:           p.Preorder || p.Status == StatusPreorder,
		FirstSale:          dateString(p.FirstSale),
		PlayableOn:         dateString(p.PlayableOn),
		Expires:            p.Expires,
		ExpiryPolicy:       p.ExpiryPolicy,
		Tags:               append([]string{}, p.Tags...),
		Status:             p.Status,
		Type:               p.Type,
		IsSandboxProduct:   p.IsSandboxProduct,
	}
	if !p.OpenDenomination() {
		item.Price = p.Price
		item.BuyingPrice = p.BuyingPrice
		if p.Price != nil && p.BuyingPrice != nil && !item.CurrencyMismatch {
			d := *p.Price - *p.BuyingPrice
			item.DiscountAmount = &d
		}
	}
	if p.Promotion != nil {
		promo := p.Promotion.Data()
		item.Promotion = promotionApplies(&promo, today)
		item.PromotionType, item.PromotionDetails = promo.Type, promo.Details
		item.PromotionStartDate, item.PromotionEndDate = promo.StartDate, promo.EndDate
	}
	if p.ServiceFee != nil {
		fee := p.ServiceFee.Data()
		item.ServiceFee = fee.Type != ""
		item.ServiceFeeType, item.ServiceFeeValue = fee.Type, fee.Value
	}
	list, err = json.Marshal(item)
	if err != nil {
		return nil, nil, fmt.Errorf("encode product %s: %w", p.ProductCode, err)
	}
	full := detailJSON{productJSON: item, Languages: make([]languageJSON, 0, len(p.Languages))}
	if p.OpenDenomination() {
		full.DenominationMinValue, full.DenominationMaxValue = p.DenominationMin, p.DenominationMax
		full.DenominationStep, full.DenominationDefaultValue = p.DenominationStep, p.DenominationDefault
	}
	for _, l := range p.Languages {
		full.Languages = append(full.Languages, languageJSON{
			LanguageCode: l.LanguageCode, Name: l.Name, Image: l.Image,
			SKU: SKU(p.CountryCode, l.LanguageCode, p.ProductCode),
		})
	}
	detail, err = json.Marshal(full)
	if err != nil {
		return nil, nil, fmt.Errorf("encode product %s: %w", p.ProductCode, err)
	}
	return list, detail, nil
}
