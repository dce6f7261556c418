package v1

import (
	"fmt"
	"html"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"

	"github.com/codeport/codeport/apiserver/apierror"
	"github.com/codeport/codeport/apiserver/principal"
	"github.com/codeport/codeport/internal/apitime"
	"github.com/codeport/codeport/internal/catalog"
	"github.com/codeport/codeport/internal/money"
	"github.com/codeport/codeport/internal/queryparam"
)

// Handlers serves /v1.
type Handlers struct {
	catalogs *catalog.Cache
}

// NewHandlers builds the v1 handlers.
func NewHandlers(catalogs *catalog.Cache) *Handlers { return &Handlers{catalogs: catalogs} }

func (h *Handlers) snapshot(c *fiber.Ctx) (*catalog.Snapshot, error) {
	snap, err := h.catalogs.ForAccount(c.UserContext(), principal.FromRequest(c).Account)
	if err != nil {
		return nil, fmt.Errorf("catalog snapshot: %w", err)
	}
	return snap, nil
}

type catalogJSON struct {
	ID            string        `json:"id"`
	Name          string        `json:"name"`
	FromDate      apitime.Time  `json:"fromDate"`
	ToDate        *apitime.Time `json:"toDate"`
	Status        string        `json:"status"`
	Description   string        `json:"description"`
	CatalogTypeID int           `json:"catalogTypeId"`
	ResellerID    string        `json:"resellerId"`
	CreatedAt     apitime.Time  `json:"createdAt"`
	UpdatedAt     apitime.Time  `json:"updatedAt"`
	DeletedAt     *apitime.Time `json:"deletedAt"`
}

// Catalog serves GET /v1/catalog: the reseller's catalog record.
func (h *Handlers) Catalog(c *fiber.Ctx) error {
	snap, err := h.snapshot(c)
	if err != nil {
		return err
	}
	if snap.Catalog == nil {
		return apierror.New(fiber.StatusNotFound, "No catalog is assigned to your account")
	}
	cat := snap.Catalog
	status := "inactive"
	if snap.Active {
		status = "active"
	}
	return c.JSON(catalogJSON{ID: cat.ID.String(), Name: cat.Name, FromDate: apitime.Of(cat.ValidFrom),
		ToDate: optionalTime(cat.ValidTo), Status: status, Description: cat.Description,
		CatalogTypeID: cat.CatalogTypeID, ResellerID: principal.FromRequest(c).Account.PartnerID.String(),
		CreatedAt: apitime.Of(cat.CreatedAt), UpdatedAt: apitime.Of(cat.UpdatedAt), DeletedAt: optionalTime(cat.DeletedAt)})
}

// optionalTime is t as the API writes it, nil when t is.
func optionalTime(t *time.Time) *apitime.Time {
	if t == nil {
		return nil
	}
	at := apitime.Of(*t)
	return &at
}

// Products serves GET /v1/catalog/products?skip=&take= (defaults 0 and 20).
func (h *Handlers) Products(c *fiber.Ctx) error {
	// Only paging applies in v1; the v2 parser enforces the same bounds.
	var parser catalog.QueryParser
	for k, v := range c.Context().QueryArgs().All() {
		if key := utils.UnsafeString(k); key == "skip" || key == "take" {
			parser.Add(key, utils.UnsafeString(v))
		}
	}
	q, apiErr := parser.Query()
	if apiErr != nil {
		return apiErr
	}
	snap, err := h.snapshot(c)
	if err != nil {
		return err
	}
	all := snap.Products()
	page := []legacyProduct{}
	for i := q.Skip; i < len(all) && len(page) < q.Take; i++ {
		page = append(page, legacy(all[i]))
	}
	return c.JSON(fiber.Map{"count": len(all), "take": q.Take, "skip": q.Skip, "products": page})
}

// Product serves GET /v1/catalog/product?ean= (or ?sku={CC}-{LL}-{productCode}).
func (h *Handlers) Product(c *fiber.Ctx) error {
	// Either names the product: one sent empty is missing, and the other must be there.
	args := c.Context().QueryArgs()
	ean, _ := queryparam.Get(args, "ean")
	sku, _ := queryparam.Get(args, "sku")
	ean, sku = strings.TrimSpace(ean), strings.TrimSpace(sku)
	if ean == "" && sku == "" {
		return apierror.BadRequest("ean is required (or sku in the form {CC}-{LL}-{productCode})")
	}
	snap, err := h.snapshot(c)
	if err != nil {
		return err
	}
	for _, p := range snap.Products() {
		if ean != "" && p.EAN == ean {
			return c.JSON(legacy(p))
		}
		if sku != "" {
			for _, l := range p.Languages {
				if strings.EqualFold(catalog.SKU(p.CountryCode, l.LanguageCode, p.ProductCode), sku) {
					return c.JSON(legacy(p))
				}
			}
		}
	}
	if ean != "" {
		return apierror.New(fiber.StatusNotFound, "Product with ean "+ean+" was not found in your catalog")
	}
	return apierror.New(fiber.StatusNotFound, "Product with sku "+sku+" was not found in your catalog")
}

type legacyLanguage struct {
	LanguageCode               string `json:"languageCode"`
	Name                       string `json:"name"`
	SKU                        string `json:"sku"`
	Image                      string `json:"image"`
	DescriptionHTML            string `json:"descriptionHtml"`
	Description                string `json:"description"`
	TncHTML                    string `json:"tncHtml"`
	Tnc                        string `json:"tnc"`
	RedemptionInstructionsHTML string `json:"redemptionInstructionsHtml"`
	RedemptionInstructions     string `json:"redemptionInstructions"`
}

type legacyProduct struct {
	ID                 string           `json:"id"`
	EAN                string           `json:"ean"`
	Name               string           `json:"name"`
	ShortName          string           `json:"shortName"`
	Image              string           `json:"image"`
	RRP                *string          `json:"rrp"`
	RRPCurrency        string           `json:"rrpCurrency"`
	Price              *int64           `json:"price"`
	CurrencyCode       string           `json:"currencyCode"`
	BuyingPrice        *int64           `json:"buyingPrice"`
	BuyingCurrencyCode string           `json:"buyingCurrencyCode"`
	IsCurrencyMismatch bool             `json:"isCurrencyMismatch"`
	Brand              string           `json:"brand"`
	Publisher          string           `json:"publisher"`
	CountryCode        string           `json:"countryCode"`
	DenominationType   string           `json:"denominationType"`
	MainCategory       string           `json:"mainCategory"`
	SubCategory        string           `json:"subCategory"`
	ProductCategory    string           `json:"productCategory"`
	ProductType        string           `json:"productType"`
	Platform           string           `json:"platform"`
	Tags               string           `json:"tags"`
	Status             string           `json:"status"`
	State              string           `json:"state"`
	Type               string           `json:"type"`
	Languages          []legacyLanguage `json:"languages"`
}

// paragraphs renders plain text as the HTML variant of the legacy fields.
func paragraphs(text string) string {
	if text == "" {
		return ""
	}
	var b strings.Builder
	for _, p := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n\n") {
		b.WriteString("<p>" + strings.ReplaceAll(html.EscapeString(strings.TrimSpace(p)), "\n", "<br>") + "</p>")
	}
	return b.String()
}

// legacy renders a product in the v1 shape: rrp as a decimal string, tags comma-joined, state.
func legacy(p *catalog.Product) legacyProduct {
	out := legacyProduct{
		ID: p.ProductCode, EAN: p.EAN, Name: p.Name, ShortName: p.ShortName, Image: p.Image,
		CurrencyCode: p.CurrencyCode, BuyingCurrencyCode: p.BuyingCurrencyCode,
		IsCurrencyMismatch: p.BuyingCurrencyCode != p.CurrencyCode,
		Brand:              p.Brand, Publisher: p.Publisher, CountryCode: p.CountryCode, DenominationType: p.DenominationType,
		MainCategory: p.MainCategory, SubCategory: p.SubCategory, ProductCategory: p.ProductCategory,
		ProductType: p.ProductType, Platform: p.Platform, Tags: strings.Join(p.Tags, ","), Status: p.Status,
		State: "available", Type: p.Type, Languages: []legacyLanguage{},
	}
	if !p.Orderable() {
		out.State = "unavailable"
	}
	if !p.OpenDenomination() {
		out.Price, out.BuyingPrice = p.Price, p.BuyingPrice
	}
	rrp := p.RRP
	if rrp == nil && !p.OpenDenomination() {
		rrp = p.Price
	}
	if rrp != nil {
		if s, err := money.Format(*rrp, p.CurrencyCode); err == nil {
			out.RRP, out.RRPCurrency = &s, p.CurrencyCode
		}
	}
	for _, l := range p.Languages {
		out.Languages = append(out.Languages, legacyLanguage{
			LanguageCode: l.LanguageCode, Name: l.Name, Image: l.Image,
			SKU:         catalog.SKU(p.CountryCode, l.LanguageCode, p.ProductCode),
			Description: l.Description, DescriptionHTML: paragraphs(l.Description),
			Tnc: l.Tnc, TncHTML: paragraphs(l.Tnc),
			RedemptionInstructions: l.RedemptionInstructions, RedemptionInstructionsHTML: paragraphs(l.RedemptionInstructions),
		})
	}
	return out
}
