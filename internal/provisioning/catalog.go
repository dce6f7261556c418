package provisioning

import (
	"context"
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"gorm.io/gorm"
	"sigs.k8s.io/yaml"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/catalog"
	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/money"
	"github.com/codeport/codeport/internal/notify"
	"github.com/codeport/codeport/internal/provisioning/configdb"
	"github.com/codeport/codeport/internal/store"
)

// Provisioner writes partner configuration into the data plane's database.
type Provisioner struct {
	db *store.DB
	// config is GORM over db's pool, for the configuration upserts (configdb).
	config *gorm.DB
	// secrets seals webhook signing secrets; without it, partners cannot have webhooks.
	secrets *codes.Cipher
	// events raises the product events of catalog changes; the API processes deliver them.
	events *notify.Notifier
	// stockLowThreshold is the threshold of catalogs that do not set spec.stockLowThreshold.
	stockLowThreshold int
	// maxTopUp is the largest top-up credited, in major units of its currency.
	maxTopUp int64
	now      func() time.Time
}

// DefaultStockLowThreshold is the low-stock threshold of catalogs that set none, unless the
// operator is given another (--stock-low-threshold).
const DefaultStockLowThreshold = 100

// WithStockLowThreshold sets the threshold of catalogs whose spec sets none.
func (p *Provisioner) WithStockLowThreshold(n int) *Provisioner {
	p.stockLowThreshold = n
	return p
}

// StockLowThreshold is the threshold a catalog applies: its own, or the provisioner's.
func (p *Provisioner) StockLowThreshold(c *v1alpha1.Catalog) int {
	if c.Spec.StockLowThreshold != nil {
		return int(*c.Spec.StockLowThreshold)
	}
	return p.stockLowThreshold
}

// New returns a provisioner on db that seals webhook secrets with secrets (the codes key) and
// raises catalog changes' product events through events, the process's notifier.
func New(db *store.DB, secrets *codes.Cipher, events *notify.Notifier) (*Provisioner, error) {
	config, err := configdb.Open(db)
	if err != nil {
		return nil, err
	}
	return &Provisioner{db: db, config: config, secrets: secrets, events: events,
		stockLowThreshold: DefaultStockLowThreshold, maxTopUp: money.DefaultMaxTopUp, now: time.Now}, nil
}

// CatalogResult is what applying a catalog did.
type CatalogResult struct {
	ID       uuid.UUID
	Products int
	// Change is what was written: the rows added, updated and removed, with their old and new
	// content.
	Change store.CatalogChange
	// Invalid lists products that failed validation; when any did, nothing was applied and the
	// catalog previously in service stays.
	Invalid []v1alpha1.InvalidProduct
}

var (
	productCodePattern = regexp.MustCompile(`^[0-9]{14}$`)
	countryPattern     = regexp.MustCompile(`^[A-Z]{2}$`)
	datePattern        = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
)

// ApplyCatalog validates the catalog's products (inline plus those read from ConfigMaps by the
// caller) and, when all are valid, replaces the catalog's products in one transaction.
func (p *Provisioner) ApplyCatalog(
	ctx context.Context, c *v1alpha1.Catalog, products []v1alpha1.CatalogProduct,
) (CatalogResult, error) {
	defaultPct := string(c.Spec.DefaultDiscountPercentage)
	if defaultPct == "" {
		defaultPct = "0"
	}
	rows := make([]store.CatalogProduct, 0, len(products))
	var invalid []v1alpha1.InvalidProduct
	seen := map[string]bool{}
	for i := range products {
		row, reason := productRow(&products[i], defaultPct, i)
		if reason == "" && seen[row.ProductCode] {
			reason = "duplicate productCode"
		}
		if reason == "" && isTestProduct(row.ProductCode) {
			reason = "productCode is reserved for sandbox test products"
		}
		if reason != "" {
			invalid = append(invalid, v1alpha1.InvalidProduct{ProductCode: products[i].ProductCode, Reason: reason})
			continue
		}
		seen[row.ProductCode] = true
		rows = append(rows, row)
	}
	if len(invalid) > 0 {
		return CatalogResult{Invalid: invalid}, nil
	}
	model := store.Catalog{
		Namespace: c.Namespace, Name: c.Name, Description: c.Spec.Description,
		ValidFrom: c.Spec.ValidFrom.Time, CatalogTypeID: int(c.Spec.CatalogTypeID), DefaultDiscountPercentage: defaultPct,
		StockLowThreshold: p.StockLowThreshold(c),
	}
	if model.ValidFrom.IsZero() {
		model.ValidFrom = time.Unix(0, 0)
	}
	if model.CatalogTypeID == 0 {
		model.CatalogTypeID = 1
	}
	if c.Spec.ValidTo != nil {
		t := c.Spec.ValidTo.Time
		model.ValidTo = &t
	}
	var change store.CatalogChange
	err := p.db.InTx(ctx, func(tx store.Tx) error {
		var err error
		if change, err = store.UpsertCatalog(ctx, tx, &model, rows); err != nil {
			return err
		}
		return p.events.CatalogChanged(ctx, tx, change, p.now())
	})
	if err != nil {
		return CatalogResult{}, err
	}
	return CatalogResult{ID: change.ID, Products: len(rows), Change: change}, nil
}

func isTestProduct(code string) bool {
	_, ok := catalog.TestOutcome(code)
	return ok
}

// DeleteCatalog retires a catalog.
func (p *Provisioner) DeleteCatalog(ctx context.Context, namespace, name string) error {
	return configdb.DeleteCatalog(ctx, p.config, namespace, name)
}

// BuyingPrice applies a discount percentage: price - round(price * pct / 100), rounding half
// away from zero, exactly.
func BuyingPrice(price int64, pct string) (int64, error) {
	r, ok := new(big.Rat).SetString(pct)
	if !ok || r.Sign() < 0 || r.Cmp(big.NewRat(100, 1)) > 0 {
		return 0, fmt.Errorf("discount percentage %q must be between 0 and 100", pct)
	}
	discount := new(big.Rat).Mul(new(big.Rat).SetInt64(price), r)
	discount.Quo(discount, big.NewRat(100, 1))
	// Round half away from zero: floor(x + 1/2) for x >= 0.
	discount.Add(discount, big.NewRat(1, 2))
	rounded := new(big.Int).Quo(discount.Num(), discount.Denom())
	return price - rounded.Int64(), nil
}

// productRow validates one product and converts it to its row; reason is non-empty when the
// product is invalid.
func productRow(in *v1alpha1.CatalogProduct, defaultPct string, position int) (store.CatalogProduct, string) {
	row := store.CatalogProduct{
		ProductCode: in.ProductCode, Position: position, EAN: in.EAN, Name: strings.TrimSpace(in.Name),
		ShortName: in.ShortName, Image: in.Image, Brand: in.Brand, Publisher: in.Publisher,
		CountryCode: in.CountryCode, CurrencyCode: string(in.CurrencyCode), BuyingCurrencyCode: string(in.CurrencyCode),
		RRP: in.RRP, MainCategory: in.MainCategory, SubCategory: in.SubCategory,
		ProductCategory: in.ProductCategory, ProductType: in.ProductType, Platform: in.Platform,
		Type: in.Type, Tags: append([]string{}, in.Tags...), Status: string(in.Status),
		Expires: in.Expires, ExpiryPolicy: in.ExpiryPolicy,
	}
	if row.Type == "" {
		row.Type = "digital"
	}
	if row.Status == "" {
		row.Status = catalog.StatusActive
	}
	row.Preorder = row.Status == catalog.StatusPreorder
	switch {
	case !productCodePattern.MatchString(in.ProductCode):
		return row, "productCode must be 14 digits"
	case row.Name == "":
		return row, "name is required"
	case !countryPattern.MatchString(in.CountryCode):
		return row, "countryCode must be an ISO 3166-1 alpha-2 code"
	case row.Status != catalog.StatusActive && row.Status != catalog.StatusInactive &&
		row.Status != catalog.StatusPreorder:
		return row, "status must be active, inactive or preorder"
	}
	if err := money.CheckCurrency(row.CurrencyCode); err != nil {
		return row, "currencyCode: " + err.Error()
	}
	pct := defaultPct
	if in.DiscountPercentage != nil {
		pct = string(*in.DiscountPercentage)
	}
	row.DiscountPercentage = pct
	if reason := denomination(in, &row, pct); reason != "" {
		return row, reason
	}
	for _, d := range []struct {
		value string
		into  *pgtype.Date
		field string
	}{{in.FirstSale, &row.FirstSale, "firstSale"}, {in.PlayableOn, &row.PlayableOn, "playableOn"}} {
		if d.value == "" {
			continue
		}
		t, err := time.Parse(time.DateOnly, d.value)
		if err != nil || !datePattern.MatchString(d.value) {
			return row, d.field + " must be a date (YYYY-MM-DD)"
		}
		*d.into = pgtype.Date{Time: t, Valid: true}
	}
	langs := make(store.JSONSlice[store.ProductLanguage], 0, len(in.Languages))
	for _, l := range in.Languages {
		if l.LanguageCode == "" {
			return row, "every language needs a languageCode"
		}
		langs = append(langs, store.ProductLanguage{LanguageCode: l.LanguageCode, Name: l.Name, Image: l.Image,
			Description: l.Description, Tnc: l.Tnc, RedemptionInstructions: l.RedemptionInstructions})
	}
	row.Languages = langs
	if in.Promotion != nil {
		for _, d := range []string{in.Promotion.StartDate, in.Promotion.EndDate} {
			if d != "" && !datePattern.MatchString(d) {
				return row, "promotion dates must be YYYY-MM-DD"
			}
		}
		promo := store.NewJSONObject(store.ProductPromotion{Type: in.Promotion.Type, Details: in.Promotion.Details,
			StartDate: in.Promotion.StartDate, EndDate: in.Promotion.EndDate})
		row.Promotion = &promo
	}
	if in.ServiceFee != nil {
		fee := store.NewJSONObject(store.ProductServiceFee{Type: in.ServiceFee.Type, Value: in.ServiceFee.Value})
		row.ServiceFee = &fee
	}
	return row, ""
}

func denomination(in *v1alpha1.CatalogProduct, row *store.CatalogProduct, pct string) string {
	switch in.Denomination.Type {
	case v1alpha1.DenominationOpen:
		d := in.Denomination
		if d.Min == nil || d.Max == nil {
			return "open denomination needs min and max"
		}
		if *d.Min < 0 || *d.Min > *d.Max {
			return "denomination min must be between 0 and max"
		}
		if d.Step != nil && *d.Step <= 0 {
			return "denomination step must be positive"
		}
		if d.Default != nil && (*d.Default < *d.Min || *d.Default > *d.Max) {
			return "denomination default must be between min and max"
		}
		row.DenominationType = catalog.DenominationOpen
		row.DenominationMin, row.DenominationMax = d.Min, d.Max
		row.DenominationStep, row.DenominationDefault = d.Step, d.Default
		if _, err := BuyingPrice(0, pct); err != nil {
			return err.Error()
		}
	case v1alpha1.DenominationFixed, "":
		if in.Price == nil || *in.Price < 0 {
			return "fixed products need a price of at least 0"
		}
		buying, err := BuyingPrice(*in.Price, pct)
		if err != nil {
			return err.Error()
		}
		row.DenominationType = catalog.DenominationFixed
		price := *in.Price
		row.Price, row.BuyingPrice = &price, &buying
	default:
		return "denomination type must be fixed or open"
	}
	return ""
}

// ParseProductFeed reads the products of a productsFrom source: a JSON (or YAML) list in the
// same shape as spec.products.
func ParseProductFeed(data []byte) ([]v1alpha1.CatalogProduct, error) {
	var products []v1alpha1.CatalogProduct
	if err := yaml.UnmarshalStrict(data, &products); err != nil {
		return nil, fmt.Errorf("product feed is not a list of catalog products: %w", err)
	}
	return products, nil
}

// lowestStock is how many of its lowest products a Catalog's status lists.
const lowestStock = 5

// CatalogStock counts the production stock of catalog namespace/name's products for its status;
// store.ErrNotFound when the catalog is not in service.
func (p *Provisioner) CatalogStock(ctx context.Context, namespace, name string) (store.CatalogStock, error) {
	return store.ReadCatalogStock(ctx, p.db.Pool, namespace, name, lowestStock)
}
