// Package orders owns order placement and retrieval: decoding and validating a PlaceOrder
// request against the account's catalog, the idempotent placement transaction (order, wallet
// debit, fulfilment job), and the order representation partners poll.
package orders

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/codeport/codeport/apiserver/apierror"
	"github.com/codeport/codeport/apiserver/auth"
	"github.com/codeport/codeport/apiserver/catalog"
	"github.com/codeport/codeport/apiserver/money"
)

// Bounds of a request that the spec leaves open; generous for real use, small enough that one
// request cannot exhaust the server.
const (
	MaxExternalOrderCodeLength = 100
	MaxLines                   = 500
)

// LineRequest is one orderProducts item as sent.
type LineRequest struct {
	ProductCode string
	Quantity    int64
	Price       *int64
	Currency    string
	SKU         string
}

// Request is a decoded PlaceOrder body.
type Request struct {
	ExternalOrderCode string
	Currency          string
	Price             *int64
	Lines             []LineRequest
}

type rawLine struct {
	ProductCode *string         `json:"productCode"`
	ProductID   *string         `json:"productId"`
	Quantity    json.RawMessage `json:"quantity"`
	Price       json.RawMessage `json:"price"`
	Currency    *string         `json:"currency"`
	SKU         *string         `json:"sku"`
}

type rawRequest struct {
	ExternalOrderCode *string         `json:"externalOrderCode"`
	Currency          *string         `json:"currency"`
	Price             json.RawMessage `json:"price"`
	OrderProducts     json.RawMessage `json:"orderProducts"`
}

var errNotInteger = errors.New("not an integer")

// integer parses a JSON integer literal; null or absent is nil. 10 and 10.0 are accepted,
// 10.5, "10" and 1e400 are not.
func integer(raw json.RawMessage) (*int64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return nil, errNotInteger
	}
	s := string(raw)
	if whole, frac, ok := strings.Cut(s, "."); ok && strings.Trim(frac, "0") == "" && frac != "" {
		s = whole
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil, errNotInteger
	}
	return &n, nil
}

func text(s *string) string {
	if s == nil {
		return ""
	}
	return strings.TrimSpace(*s)
}

// Decode parses a PlaceOrder body. Every problem is a 400 with the contract's message where the
// spec has one; nothing here can panic or produce a 5xx.
func Decode(body []byte) (Request, *apierror.Error) {
	var raw rawRequest
	if trimmed := bytes.TrimSpace(body); len(trimmed) == 0 || trimmed[0] != '{' {
		return Request{}, apierror.BadRequest("Request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&raw); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return Request{}, apierror.OrderInvalid()
		}
		return Request{}, apierror.BadRequest("Request body must be a JSON object")
	}
	if dec.More() {
		return Request{}, apierror.BadRequest("Request body must be a single JSON object")
	}
	req := Request{ExternalOrderCode: text(raw.ExternalOrderCode), Currency: strings.ToUpper(text(raw.Currency))}
	switch {
	case req.ExternalOrderCode == "":
		return Request{}, apierror.BadRequest("externalOrderCode is required")
	case utf8.RuneCountInString(req.ExternalOrderCode) > MaxExternalOrderCodeLength || !utf8.ValidString(req.ExternalOrderCode):
		return Request{}, apierror.BadRequest(fmt.Sprintf("externalOrderCode must be at most %d characters", MaxExternalOrderCodeLength))
	case req.Currency == "":
		return Request{}, apierror.BadRequest("currency is required")
	}
	if _, err := money.Digits(req.Currency); err != nil || len(req.Currency) != 3 {
		return Request{}, apierror.BadRequest("currency must be an ISO 4217 currency code")
	}
	price, err := integer(raw.Price)
	if err != nil {
		return Request{}, apierror.OrderInvalid()
	}
	req.Price = price

	var lines []json.RawMessage
	trimmed := bytes.TrimSpace(raw.OrderProducts)
	if len(trimmed) > 0 && string(trimmed) != "null" {
		if err := json.Unmarshal(trimmed, &lines); err != nil {
			return Request{}, apierror.OrderInvalid()
		}
	}
	if len(lines) == 0 {
		return Request{}, apierror.EmptyOrderProducts()
	}
	if len(lines) > MaxLines {
		return Request{}, apierror.BadRequest(fmt.Sprintf("orderProducts must not have more than %d lines", MaxLines))
	}
	req.Lines = make([]LineRequest, 0, len(lines))
	for _, rawItem := range lines {
		var item rawLine
		if err := json.Unmarshal(rawItem, &item); err != nil {
			return Request{}, apierror.InvalidLine()
		}
		line := LineRequest{ProductCode: text(item.ProductCode), Currency: strings.ToUpper(text(item.Currency)), SKU: text(item.SKU)}
		if line.ProductCode == "" {
			// Some partners' integrations send productId, as an example in the spec does.
			line.ProductCode = text(item.ProductID)
		}
		qty, err := integer(item.Quantity)
		if err != nil || qty == nil || *qty < 1 || line.ProductCode == "" {
			return Request{}, apierror.InvalidLine()
		}
		line.Quantity = *qty
		if line.Price, err = integer(item.Price); err != nil {
			return Request{}, apierror.OrderInvalid()
		}
		req.Lines = append(req.Lines, line)
	}
	return req, nil
}

// Hash is the canonical digest of a request: two bodies that mean the same order (whitespace,
// key order, productId vs productCode, 10 vs 10.0) hash alike, and any change of meaning does not.
func (r *Request) Hash() []byte {
	type line struct {
		P string `json:"p"`
		Q int64  `json:"q"`
		A *int64 `json:"a"`
		C string `json:"c"`
		S string `json:"s"`
	}
	canonical := struct {
		E string `json:"e"`
		C string `json:"c"`
		A *int64 `json:"a"`
		L []line `json:"l"`
	}{E: r.ExternalOrderCode, C: r.Currency, A: r.Price}
	for _, l := range r.Lines {
		canonical.L = append(canonical.L, line{P: l.ProductCode, Q: l.Quantity, A: l.Price, C: l.Currency, S: strings.ToUpper(l.SKU)})
	}
	b, _ := json.Marshal(canonical) // cannot fail: plain strings and integers
	sum := sha256.Sum256(b)
	return sum[:]
}

// PlannedLine is a validated line with its unit price resolved.
type PlannedLine struct {
	Product   *catalog.Product
	UnitPrice int64
	Quantity  int64
	SKU       string
}

// Plan is a validated order: what to record, debit and fulfil.
type Plan struct {
	Currency      string
	Lines         []PlannedLine
	Total         int64
	TotalQuantity int64
}

// Validate checks a request against the account's catalog and limits, in the order of the
// spec's message table, line by line. Messages name the productCode as sent.
func Validate(req *Request, snap *catalog.Snapshot, acct *auth.Account) (Plan, *apierror.Error) {
	plan := Plan{Currency: req.Currency, Lines: make([]PlannedLine, 0, len(req.Lines))}
	for _, l := range req.Lines {
		p, ok := snap.Get(l.ProductCode)
		if !ok {
			return Plan{}, apierror.ProductNotFound(l.ProductCode)
		}
		if !p.Orderable() {
			return Plan{}, apierror.ProductNotCurrentlyAvailable(l.ProductCode)
		}
		lineCurrency := l.Currency
		if lineCurrency == "" {
			lineCurrency = req.Currency
		}
		if lineCurrency != p.CurrencyCode {
			return Plan{}, apierror.CurrencyMismatch(l.ProductCode, p.CurrencyCode, lineCurrency)
		}
		if req.Currency != p.CurrencyCode {
			return Plan{}, apierror.WrongOrderCurrency(l.ProductCode)
		}
		if e := checkSKU(l, p); e != nil {
			return Plan{}, e
		}
		unit, e := unitPrice(l, p)
		if e != nil {
			return Plan{}, e
		}
		lineTotal, err := money.Mul(unit, l.Quantity)
		if err != nil {
			return Plan{}, apierror.OrderInvalid()
		}
		if plan.Total, err = money.Add(plan.Total, lineTotal); err != nil {
			return Plan{}, apierror.OrderInvalid()
		}
		if plan.TotalQuantity, err = money.Add(plan.TotalQuantity, l.Quantity); err != nil || plan.TotalQuantity > maxUnits {
			return Plan{}, apierror.OrderLimitExceeded()
		}
		plan.Lines = append(plan.Lines, PlannedLine{Product: p, UnitPrice: unit, Quantity: l.Quantity, SKU: strings.ToUpper(l.SKU)})
	}
	if req.Price != nil && *req.Price != plan.Total {
		return Plan{}, apierror.OrderPriceMismatch(plan.Total)
	}
	if acct.MaxQuantityPerOrder > 0 && plan.TotalQuantity > int64(acct.MaxQuantityPerOrder) {
		return Plan{}, apierror.OrderLimitExceeded()
	}
	return plan, nil
}

// maxUnits caps the units of one order whatever the account's limits, because every unit is a
// row of delivered codes.
const maxUnits = 100_000

func checkSKU(l LineRequest, p *catalog.Product) *apierror.Error {
	if l.SKU == "" {
		return nil
	}
	country, rest, ok := strings.Cut(strings.ToUpper(l.SKU), "-")
	language, code, ok2 := strings.Cut(rest, "-")
	if !ok || !ok2 || code != p.ProductCode {
		return apierror.OrderInvalid()
	}
	if country != strings.ToUpper(p.CountryCode) {
		return apierror.NotOrderableCountryOrCurrency(l.ProductCode)
	}
	for _, lang := range p.Languages {
		if strings.EqualFold(lang.LanguageCode, language) {
			return nil
		}
	}
	return apierror.OrderInvalid()
}

func unitPrice(l LineRequest, p *catalog.Product) (int64, *apierror.Error) {
	if p.Open() {
		if l.Price == nil {
			return 0, apierror.OpenDenominationRequiresPrice(l.ProductCode)
		}
		price := *l.Price
		if p.DenominationMin != nil && price < *p.DenominationMin {
			return 0, apierror.PriceBelowMinimum(l.ProductCode, *p.DenominationMin)
		}
		if p.DenominationMax != nil && price > *p.DenominationMax {
			return 0, apierror.PriceAboveMaximum(l.ProductCode, *p.DenominationMax)
		}
		if price < 0 {
			return 0, apierror.PriceBelowMinimum(l.ProductCode, 0)
		}
		if step := p.DenominationStep; step != nil && *step > 1 {
			base := int64(0)
			if p.DenominationMin != nil {
				base = *p.DenominationMin
			}
			if (price-base)%*step != 0 {
				return 0, apierror.BadRequest(fmt.Sprintf("Price for product %s must be %d plus a multiple of %d", l.ProductCode, base, *step))
			}
		}
		return price, nil
	}
	expected := int64(0)
	if p.Price != nil {
		expected = *p.Price
	}
	if l.Price != nil && *l.Price != expected {
		return 0, apierror.PriceMismatch(l.ProductCode, expected)
	}
	return expected, nil
}
