package orders

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/catalog"
	"github.com/codeport/codeport/internal/money"
	"github.com/codeport/codeport/internal/strictjson"
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
	// Metadata is the partner's key/value pairs, nil when none were sent.
	Metadata map[string]string
}

type rawLine struct {
	ProductCode json.RawMessage `json:"productCode"`
	ProductID   json.RawMessage `json:"productId"`
	Quantity    json.RawMessage `json:"quantity"`
	Price       json.RawMessage `json:"price"`
	Currency    json.RawMessage `json:"currency"`
	SKU         json.RawMessage `json:"sku"`
}

type rawRequest struct {
	ExternalOrderCode json.RawMessage `json:"externalOrderCode"`
	Currency          json.RawMessage `json:"currency"`
	Price             json.RawMessage `json:"price"`
	OrderProducts     json.RawMessage `json:"orderProducts"`
	Metadata          json.RawMessage `json:"metadata"`
}

// MaxInteger bounds every integer of a body, either way: I-JSON's range (RFC 7493), within
// which every JSON reader, JavaScript's included, holds an integer exactly, so that the value
// judged here is the one the partner's client wrote. The documents state it as the fields'
// minimum and maximum.
const MaxInteger = 1<<53 - 1

// The JSON types a field takes, as its refusal names them.
const (
	aString   = "a string"
	anInteger = "an integer"
	anArray   = "an array"
	anObject  = "an object"
)

// integer reads the JSON number at field as JSON Schema's integer type does: a number with no
// fractional part, so 10, 10.0 and 1e1 are all ten; absent is nil. Another JSON type or a
// fraction is refused as WrongType, a value beyond ±MaxInteger as IntegerOutOfRange; both name
// field.
func integer(raw json.RawMessage, field string) (*int64, *Refusal) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, nil
	}
	if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return nil, wrongType(field, anInteger)
	}
	// A float64 holds every integer within ±MaxInteger exactly, and one beyond is refused
	// whichever float it rounds to; JSON Schema validators read numbers the same way.
	f, err := strconv.ParseFloat(string(raw), 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return nil, wrongType(field, anInteger)
	case math.IsInf(f, 0) || math.Abs(f) > MaxInteger:
		return nil, &Refusal{Reason: IntegerOutOfRange, Location: field, Amount: int64(math.Copysign(MaxInteger, f))}
	case f != math.Trunc(f):
		return nil, wrongType(field, anInteger)
	}
	n := int64(f)
	return &n, nil
}

// text reads the JSON string at field; absent is "". Another JSON type is refused as WrongType.
func text(raw json.RawMessage, field string) (string, *Refusal) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", nil
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", wrongType(field, aString)
	}
	return s, nil
}

func wrongType(field, expected string) *Refusal {
	return &Refusal{Reason: WrongType, Location: field, Expected: expected}
}

// The contract's spellings of the body's fields, from the tags encoding/json reads them by.
var (
	requestFields = jsonNames(rawRequest{})
	lineFields    = jsonNames(rawLine{})
)

func jsonNames(v any) []string {
	t := reflect.TypeOf(v)
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		names = append(names, name)
	}
	return names
}

// exactFieldNames refuses a key of the request or of a line that is one of the contract's
// fields in other letter case: encoding/json would take "ExternalOrderCode" for
// externalOrderCode, and a partner's typo would then work by accident here and nowhere else.
func exactFieldNames(parents []string, key string) error {
	var fields []string
	switch {
	case len(parents) == 0:
		fields = requestFields
	case len(parents) == 1 && parents[0] == "orderProducts":
		fields = lineFields
	default:
		return nil
	}
	for _, f := range fields {
		if key == f {
			return nil
		}
		if strings.EqualFold(key, f) {
			return &Refusal{Reason: FieldNameCase, Key: key, Field: f}
		}
	}
	return nil
}

// nullRefusal is the body's one rule for JSON null: null is a value, never "absent", and no
// field of the contract takes it. A required field sent null is missing, refused with the
// message of its absence; metadata and its values, with their messages for a value of the wrong
// type; any other field (the order's price, a line's price, currency and sku) as NullField, by
// name. Unknown fields are ignored, null or not, as they always are.
func nullRefusal(parents []string, key string) *Refusal {
	switch {
	case len(parents) == 0:
		switch key {
		case "externalOrderCode":
			return refuse(ExternalOrderCodeMissing)
		case "currency":
			return refuse(CurrencyMissing)
		case "orderProducts":
			return refuse(NoLines)
		case "metadata":
			return refuse(MetadataNotObject)
		case "price":
			return &Refusal{Reason: NullField, Key: key}
		}
	case len(parents) == 1 && parents[0] == "orderProducts":
		switch key {
		case "productCode", "productId", "quantity":
			return refuse(InvalidLine)
		case "price", "currency", "sku":
			return &Refusal{Reason: NullField, Key: key}
		}
	case len(parents) == 1 && parents[0] == "metadata":
		return &Refusal{Reason: MetadataValueNotString, Key: key}
	}
	return nil
}

// checkKey is the rule of every key of the body: the contract's spelling, and no null.
func checkKey(parents []string, key string, null bool) error {
	if err := exactFieldNames(parents, key); err != nil {
		return err
	}
	if !null {
		return nil
	}
	if r := nullRefusal(parents, key); r != nil {
		return r
	}
	return nil
}

// checkBody refuses what encoding/json would let pass: duplicate keys, text PostgreSQL cannot
// store, fields in the wrong letter case, null read as absent. malformed reports a body it could
// not read, which the decoder then refuses in its own words.
func checkBody(body []byte) (malformed bool, refusal *Refusal) {
	err := strictjson.Check(body, checkKey)
	var e *strictjson.Error
	if !errors.As(err, &e) {
		return false, nil
	}
	switch e.Problem {
	case strictjson.DuplicateKey:
		return false, &Refusal{Reason: DuplicateKey, Key: e.Key, Location: e.Location}
	case strictjson.InvalidText:
		return false, &Refusal{Reason: TextNotStorable, Location: e.Location, InKey: e.InKey}
	case strictjson.Refused:
		var r *Refusal
		if errors.As(e.Err, &r) {
			r.Location = e.Location
			return false, r
		}
	}
	return true, nil
}

// Decode parses a PlaceOrder body. Every problem is a *Refusal; nothing here can panic.
func Decode(body []byte) (Request, error) {
	var raw rawRequest
	if trimmed := bytes.TrimSpace(body); len(trimmed) == 0 || trimmed[0] != '{' {
		return Request{}, refuse(BodyNotAnObject)
	}
	malformed, refusal := checkBody(body)
	if refusal != nil {
		return Request{}, refusal
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&raw); err != nil {
		return Request{}, refuse(BodyNotAnObject)
	}
	if dec.More() {
		return Request{}, refuse(BodyNotSingleObject)
	}
	if malformed {
		// Unreachable while the check reads JSON as encoding/json does; if they ever disagree,
		// a body the check could not read is not taken.
		return Request{}, refuse(BodyNotAnObject)
	}
	req, refusal := decodeOrder(&raw)
	if refusal != nil {
		return Request{}, refusal
	}
	return req, nil
}

// decodeOrder judges the fields of a body in the order of the contract's message table.
func decodeOrder(raw *rawRequest) (Request, *Refusal) {
	var req Request
	code, refusal := text(raw.ExternalOrderCode, "externalOrderCode")
	if refusal != nil {
		return Request{}, refusal
	}
	// The length is the code's as sent, as the documents' maxLength counts it; surrounding
	// whitespace is not part of the code (docs/partner-api.md, "Values as sent").
	req.ExternalOrderCode = strings.TrimSpace(code)
	switch {
	case req.ExternalOrderCode == "":
		return Request{}, refuse(ExternalOrderCodeMissing)
	case utf8.RuneCountInString(code) > MaxExternalOrderCodeLength, !utf8.ValidString(code):
		return Request{}, refuse(ExternalOrderCodeTooLong)
	}
	// A currency code is judged as sent, in any letter case: " EUR " is not one.
	currency, refusal := text(raw.Currency, "currency")
	switch {
	case refusal != nil:
		return Request{}, refusal
	case currency == "":
		return Request{}, refuse(CurrencyMissing)
	}
	if req.Currency = strings.ToUpper(currency); !money.Active(req.Currency) {
		return Request{}, refuse(CurrencyNotISO)
	}
	if req.Price, refusal = integer(raw.Price, "price"); refusal != nil {
		return Request{}, refusal
	}
	if req.Metadata, refusal = decodeMetadata(raw.Metadata); refusal != nil {
		return Request{}, refusal
	}
	var lines []json.RawMessage
	if trimmed := bytes.TrimSpace(raw.OrderProducts); len(trimmed) > 0 {
		if trimmed[0] != '[' || json.Unmarshal(trimmed, &lines) != nil {
			return Request{}, wrongType("orderProducts", anArray)
		}
	}
	if len(lines) == 0 {
		return Request{}, refuse(NoLines)
	}
	if len(lines) > MaxLines {
		return Request{}, refuse(TooManyLines)
	}
	req.Lines = make([]LineRequest, 0, len(lines))
	for i, rawItem := range lines {
		line, refusal := decodeLine(rawItem, fmt.Sprintf("orderProducts[%d]", i))
		if refusal != nil {
			return Request{}, refusal
		}
		req.Lines = append(req.Lines, line)
	}
	return req, nil
}

// decodeLine reads the order line at field (orderProducts[i]).
func decodeLine(rawItem json.RawMessage, field string) (LineRequest, *Refusal) {
	var item rawLine
	switch trimmed := bytes.TrimSpace(rawItem); {
	case string(trimmed) == "null":
		// A line sent null is a line without product or quantity (nullRefusal's rule).
		return LineRequest{}, refuse(InvalidLine)
	case len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(trimmed, &item) != nil:
		return LineRequest{}, wrongType(field, anObject)
	}
	var line LineRequest
	texts := []struct {
		raw  json.RawMessage
		name string
		into *string
	}{
		{item.ProductCode, "productCode", &line.ProductCode},
		{item.ProductID, "productId", nil},
		{item.Currency, "currency", &line.Currency},
		{item.SKU, "sku", &line.SKU},
	}
	var productID string
	for _, f := range texts {
		v, refusal := text(f.raw, field+"."+f.name)
		if refusal != nil {
			return LineRequest{}, refusal
		}
		// The line's identifiers take any text the documents admit, read without the
		// whitespace around it.
		v = strings.TrimSpace(v)
		if f.into == nil {
			productID = v
		} else {
			*f.into = v
		}
	}
	line.Currency = strings.ToUpper(line.Currency)
	if line.ProductCode == "" {
		// Some partners' integrations send productId, as an example in the spec does.
		line.ProductCode = productID
	}
	qty, refusal := integer(item.Quantity, field+".quantity")
	switch {
	case refusal != nil && (refusal.Reason != IntegerOutOfRange || refusal.Amount > 0):
		return LineRequest{}, refusal
	case refusal != nil, qty == nil || *qty < 1 || line.ProductCode == "":
		// A quantity below 1, however far, has the contract's message for it.
		return LineRequest{}, refuse(InvalidLine)
	}
	line.Quantity = *qty
	if line.Price, refusal = integer(item.Price, field+".price"); refusal != nil {
		return LineRequest{}, refusal
	}
	return line, nil
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
		// Omitted when empty, so orders without metadata hash as they always have. Map keys
		// are encoded sorted: the order in which a partner sends them does not matter.
		M map[string]string `json:"m,omitempty"`
	}{E: r.ExternalOrderCode, C: r.Currency, A: r.Price, M: r.Metadata}
	for _, l := range r.Lines {
		canonical.L = append(canonical.L,
			line{P: l.ProductCode, Q: l.Quantity, A: l.Price, C: l.Currency, S: strings.ToUpper(l.SKU)})
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
// spec's message table, line by line. A refusal names the productCode as sent.
func Validate(req *Request, snap *catalog.Snapshot, acct *auth.Account) (Plan, error) {
	plan := Plan{Currency: req.Currency, Lines: make([]PlannedLine, 0, len(req.Lines))}
	for _, l := range req.Lines {
		p, ok := snap.Get(l.ProductCode)
		if !ok {
			return Plan{}, refuseProduct(ProductNotFound, l.ProductCode, 0)
		}
		if !p.Orderable() {
			return Plan{}, refuseProduct(ProductNotAvailable, l.ProductCode, 0)
		}
		lineCurrency := l.Currency
		if lineCurrency == "" {
			lineCurrency = req.Currency
		}
		if lineCurrency != p.CurrencyCode {
			return Plan{}, &Refusal{Reason: LineCurrencyMismatch, Product: l.ProductCode, ProductCurrency: p.CurrencyCode,
				Requested: lineCurrency}
		}
		if req.Currency != p.CurrencyCode {
			return Plan{}, refuseProduct(WrongOrderCurrency, l.ProductCode, 0)
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
			return Plan{}, refuse(NotValidated)
		}
		if plan.Total, err = money.Add(plan.Total, lineTotal); err != nil {
			return Plan{}, refuse(NotValidated)
		}
		if plan.TotalQuantity, err = money.Add(plan.TotalQuantity, l.Quantity); err != nil || plan.TotalQuantity > maxUnits {
			return Plan{}, refuse(LimitExceeded)
		}
		plan.Lines = append(plan.Lines,
			PlannedLine{Product: p, UnitPrice: unit, Quantity: l.Quantity, SKU: strings.ToUpper(l.SKU)})
	}
	if req.Price != nil && *req.Price != plan.Total {
		return Plan{}, &Refusal{Reason: TotalMismatch, Amount: plan.Total}
	}
	if acct.MaxQuantityPerOrder > 0 && plan.TotalQuantity > int64(acct.MaxQuantityPerOrder) {
		return Plan{}, refuse(LimitExceeded)
	}
	return plan, nil
}

// maxUnits caps the units of one order whatever the account's limits, because every unit is a
// row of delivered codes.
const maxUnits = 100_000

func checkSKU(l LineRequest, p *catalog.Product) *Refusal {
	if l.SKU == "" {
		return nil
	}
	country, rest, ok := strings.Cut(strings.ToUpper(l.SKU), "-")
	language, code, ok2 := strings.Cut(rest, "-")
	if !ok || !ok2 || code != p.ProductCode {
		return refuse(NotValidated)
	}
	if !strings.EqualFold(country, p.CountryCode) {
		return refuseProduct(NotOrderableInCountry, l.ProductCode, 0)
	}
	for _, lang := range p.Languages {
		if strings.EqualFold(lang.LanguageCode, language) {
			return nil
		}
	}
	return refuse(NotValidated)
}

func unitPrice(l LineRequest, p *catalog.Product) (int64, *Refusal) {
	if p.OpenDenomination() {
		if l.Price == nil {
			return 0, refuseProduct(PriceRequired, l.ProductCode, 0)
		}
		price := *l.Price
		if p.DenominationMin != nil && price < *p.DenominationMin {
			return 0, refuseProduct(PriceBelowMinimum, l.ProductCode, *p.DenominationMin)
		}
		if p.DenominationMax != nil && price > *p.DenominationMax {
			return 0, refuseProduct(PriceAboveMaximum, l.ProductCode, *p.DenominationMax)
		}
		if price < 0 {
			return 0, refuseProduct(PriceBelowMinimum, l.ProductCode, 0)
		}
		if step := p.DenominationStep; step != nil && *step > 1 {
			base := int64(0)
			if p.DenominationMin != nil {
				base = *p.DenominationMin
			}
			if (price-base)%*step != 0 {
				return 0, &Refusal{Reason: PriceOffStep, Product: l.ProductCode, Amount: base, Step: *step}
			}
		}
		return price, nil
	}
	expected := int64(0)
	if p.Price != nil {
		expected = *p.Price
	}
	if l.Price != nil && *l.Price != expected {
		return 0, refuseProduct(PriceMismatch, l.ProductCode, expected)
	}
	return expected, nil
}
