package catalog

import (
	"github.com/codeport/codeport/internal/store"
)

// Outcome is the scripted fulfilment of a sandbox test product.
type Outcome string

const (
	// OutcomeSuccess delivers every unit.
	OutcomeSuccess Outcome = "success"
	// OutcomeFailure delivers nothing.
	OutcomeFailure Outcome = "failure"
	// OutcomePartial delivers half of the units (rounded down, at least one) when two or more
	// are ordered.
	OutcomePartial Outcome = "partial"
	// OutcomeSlow delivers every unit after the configured delay (about 10 s).
	OutcomeSlow Outcome = "slow"
)

// Product codes of the built-in test products. They sit in a range real catalogs do not use
// and are identical for every partner.
const (
	TestSuccessFixed = "99000000000001"
	TestSuccessOpen  = "99000000000002"
	TestFailure      = "99000000000003"
	TestPartial      = "99000000000004"
	TestSlow         = "99000000000005"
)

// testCurrency is the currency of every test product; sample order lines are priced in it.
const testCurrency = "EUR"

const testBrand = "codeport Test"

type testProduct struct {
	code, name, description, expected string
	outcome                           Outcome
	price                             int64
	open                              bool
	sampleQuantity                    int
}

func testProductTable() []testProduct {
	return []testProduct{
		{code: TestSuccessFixed, name: "Success (Fixed)", outcome: OutcomeSuccess, price: 1000, sampleQuantity: 1,
			expected: "completed", description: "Fixed-price product: the order completes with one SANDBOX- code per unit."},
		{code: TestSuccessOpen, name: "Success (Open)", outcome: OutcomeSuccess, price: 2500, open: true, sampleQuantity: 1,
			expected: "completed", description: "Open-denomination product (5.00 to 500.00 EUR in steps of 1.00): " +
				"send the unit price; the order completes."},
		{code: TestFailure, name: "Async failure", outcome: OutcomeFailure, price: 1000, sampleQuantity: 1,
			expected: "failed", description: "The order fails with no codes and its value is refunded to the wallet. " +
				"Ordered together with a success product, the order is partially_completed."},
		{code: TestPartial, name: "Partial", outcome: OutcomePartial, price: 1000, sampleQuantity: 2,
			expected: "partially_completed", description: "With a quantity of 2 or more, half of the units (rounded down) " +
				"are delivered and the rest refunded; a quantity of 1 completes."},
		{code: TestSlow, name: "Slow", outcome: OutcomeSlow, price: 1000, sampleQuantity: 1,
			expected: "completed", description: "The order stays processing for about processingSeconds, then completes."},
	}
}

// TestProducts returns the built-in test products that every sandbox catalog includes.
func TestProducts() []Product {
	table := testProductTable()
	out := make([]Product, 0, len(table))
	for i, t := range table {
		p := store.CatalogProduct{
			ProductCode:        t.code,
			Position:           1_000_000 + i,
			Name:               "Test " + t.name,
			ShortName:          t.name,
			Brand:              testBrand,
			Publisher:          "codeport",
			CountryCode:        "DE",
			CurrencyCode:       testCurrency,
			BuyingCurrencyCode: testCurrency,
			DiscountPercentage: "0",
			MainCategory:       "Test",
			SubCategory:        "Sandbox",
			ProductCategory:    "Test",
			ProductType:        "Digital Code",
			Platform:           "Any",
			Type:               "digital",
			Tags:               []string{"sandbox", "test"},
			Languages:          store.JSONSlice[store.ProductLanguage]{{LanguageCode: "en", Name: "English"}},
			Status:             StatusActive,
			ExpiryPolicy:       "Test codes cannot be redeemed",
		}
		price := t.price
		if t.open {
			p.DenominationType = DenominationOpen
			lo, hi, step, def := int64(500), int64(50000), int64(100), price
			p.DenominationMin, p.DenominationMax, p.DenominationStep, p.DenominationDefault = &lo, &hi, &step, &def
		} else {
			p.DenominationType = DenominationFixed
			p.Price, p.BuyingPrice = &price, &price
		}
		out = append(out, Product{CatalogProduct: p, IsSandboxProduct: true, Outcome: t.outcome})
	}
	return out
}

// Scenario is one entry of GET /sandbox/scenarios.
type Scenario struct {
	Name              string          `json:"name"`
	Description       string          `json:"description"`
	ProductCode       string          `json:"productCode"`
	ExpectedStatus    string          `json:"expectedStatus"`
	SampleOrderLine   SampleOrderLine `json:"sampleOrderLine"`
	Currency          string          `json:"currency"`
	ProcessingSeconds int             `json:"processingSeconds,omitempty"`
}

// SampleOrderLine is an order line that can be sent as it stands.
type SampleOrderLine struct {
	ProductCode string `json:"productCode"`
	Quantity    int    `json:"quantity"`
	Price       int64  `json:"price"`
}

// Scenarios lists the test products with sample order lines; slowSeconds is how long the Slow
// product stays processing.
func Scenarios(slowSeconds int) []Scenario {
	table := testProductTable()
	out := make([]Scenario, 0, len(table))
	for _, t := range table {
		s := Scenario{
			Name: t.name, Description: t.description, ProductCode: t.code, ExpectedStatus: t.expected,
			SampleOrderLine: SampleOrderLine{ProductCode: t.code, Quantity: t.sampleQuantity, Price: t.price},
			Currency:        testCurrency,
		}
		if t.outcome == OutcomeSlow {
			s.ProcessingSeconds = slowSeconds
		}
		out = append(out, s)
	}
	return out
}

// TestOutcome returns the scripted outcome of a test product code.
func TestOutcome(productCode string) (Outcome, bool) {
	for _, t := range testProductTable() {
		if t.code == productCode {
			return t.outcome, true
		}
	}
	return "", false
}
