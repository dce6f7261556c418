package orders

import (
	"errors"
	"fmt"
)

// Reason names the rule an order request broke. This package decides which rule and what it
// concerns; the HTTP layer (apierror) words each reason as the contract does.
type Reason string

// Reasons of decoding: the body itself.
const (
	BodyNotAnObject          Reason = "body is not a JSON object"
	BodyNotSingleObject      Reason = "body holds more than one JSON value"
	ExternalOrderCodeMissing Reason = "externalOrderCode missing"
	ExternalOrderCodeTooLong Reason = "externalOrderCode too long"
	CurrencyMissing          Reason = "currency missing"
	CurrencyNotISO           Reason = "currency not ISO 4217"
	NoLines                  Reason = "no order lines"
	TooManyLines             Reason = "too many order lines"
	InvalidLine              Reason = "line without product or quantity"
	MetadataNotObject        Reason = "metadata not an object"
	MetadataTooManyKeys      Reason = "metadata has too many keys"
	MetadataKeyLength        Reason = "metadata key empty or too long"
	MetadataValueNotString   Reason = "metadata value not a string"
	MetadataValueTooLong     Reason = "metadata value too long"
	// DuplicateKey: an object of the body has Key twice, so what the partner meant is ambiguous.
	DuplicateKey Reason = "duplicate key"
	// TextNotStorable: a string at Location is not valid UTF-8 or holds NUL.
	TextNotStorable Reason = "text not valid UTF-8 or with NUL"
	// FieldNameCase: Key is a field of the contract (Field) spelled in other letter case.
	FieldNameCase Reason = "field name in the wrong letter case"
	// NullField: Key, a field of the object at Location that is not required, is null (see
	// nullRefusal).
	NullField Reason = "optional field sent as null"
	// WrongType: the field at Location is not of the JSON type the documents give it
	// (Expected, such as "an integer").
	WrongType Reason = "field of the wrong JSON type"
	// IntegerOutOfRange: the integer at Location lies beyond Amount, MaxInteger or its
	// negative.
	IntegerOutOfRange Reason = "integer out of range"
	// NotValidated is the contract's catch-all: an impossible SKU, a total that overflows.
	NotValidated Reason = "order not validated"
)

// Reasons of validation against the account's catalog and limits.
const (
	ProductNotFound              Reason = "product not in the catalog"
	ProductNotAvailable          Reason = "product not orderable"
	LineCurrencyMismatch         Reason = "line currency differs from the product's"
	WrongOrderCurrency           Reason = "order currency differs from the product's"
	NotOrderableInCountry        Reason = "SKU country differs from the product's"
	PriceRequired                Reason = "open denomination without a price"
	PriceBelowMinimum            Reason = "price below the minimum"
	PriceAboveMaximum            Reason = "price above the maximum"
	PriceOffStep                 Reason = "price off the denomination step"
	PriceMismatch                Reason = "line price differs from the catalog's"
	TotalMismatch                Reason = "order price differs from the lines' total"
	LimitExceeded                Reason = "order limit exceeded"
	OrderingDisabled             Reason = "ordering disabled for the account"
	InsufficientFunds            Reason = "wallet balance too low"
	ExternalOrderCodeReusedOther Reason = "externalOrderCode used by another order"
	AlreadyPlacedArchived        Reason = "the order was placed already and is past retention"
)

// Reasons are every reason a request can be refused for.
func Reasons() []Reason {
	return []Reason{BodyNotAnObject, BodyNotSingleObject, ExternalOrderCodeMissing, ExternalOrderCodeTooLong,
		CurrencyMissing, CurrencyNotISO, NoLines, TooManyLines, InvalidLine, NotValidated,
		MetadataNotObject, MetadataTooManyKeys, MetadataKeyLength, MetadataValueNotString, MetadataValueTooLong,
		DuplicateKey, TextNotStorable, FieldNameCase, NullField, WrongType, IntegerOutOfRange,
		ProductNotFound, ProductNotAvailable, LineCurrencyMismatch, WrongOrderCurrency, NotOrderableInCountry,
		PriceRequired, PriceBelowMinimum, PriceAboveMaximum, PriceOffStep, PriceMismatch, TotalMismatch,
		LimitExceeded, OrderingDisabled, InsufficientFunds, ExternalOrderCodeReusedOther, AlreadyPlacedArchived}
}

// Refusal is an order request the rules refuse. Reason is the rule; the other fields are what
// the partner's message names.
type Refusal struct {
	Reason Reason
	// Product is the productCode as the partner sent it, for the reasons about one product.
	Product string
	// Amount, in minor units, is what the rule expected: the minimum or maximum price, the unit
	// price, the order's total, or, with PriceOffStep, the base the price steps from.
	Amount int64
	// Step is PriceOffStep's denomination step.
	Step int64
	// ProductCurrency and Requested are LineCurrencyMismatch's currencies.
	ProductCurrency, Requested string
	// Key is the metadata key a metadata value reason concerns, or the body's key that
	// DuplicateKey, FieldNameCase or NullField names.
	Key string
	// Location is where in the body the key or text is (orderProducts[1].sku); empty for the
	// body's top level.
	Location string
	// Field is the contract's spelling of a FieldNameCase key.
	Field string
	// InKey says TextNotStorable's text is a key of the object at Location.
	InKey bool
	// Expected is the JSON type WrongType's field takes, as its message names it: "an integer".
	Expected string
}

// Error implements error.
func (r *Refusal) Error() string {
	if r.Product != "" {
		return fmt.Sprintf("order refused: %s (product %s)", r.Reason, r.Product)
	}
	return "order refused: " + string(r.Reason)
}

func refuse(reason Reason) *Refusal { return &Refusal{Reason: reason} }

func refuseProduct(reason Reason, product string, amount int64) *Refusal {
	return &Refusal{Reason: reason, Product: product, Amount: amount}
}

// NotFoundError is a reference that names none of the account's orders.
type NotFoundError struct{ Reference string }

// Error implements error.
func (e *NotFoundError) Error() string { return "order " + e.Reference + " not found" }

var (
	// ErrNotPlaced wraps a failure to record an order: nothing was written or charged, and the
	// partner may retry with the same externalOrderCode.
	ErrNotPlaced = errors.New("order not placed")
	// ErrFulfilmentUnavailable wraps a failure to name the order's fulfilment job: nothing was
	// written or charged.
	ErrFulfilmentUnavailable = errors.New("order fulfilment unavailable")
)
