package apierror_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/codeport/codeport/apiserver/apierror"
	"github.com/codeport/codeport/internal/catalog"
	"github.com/codeport/codeport/internal/listing"
	"github.com/codeport/codeport/internal/orders"
)

// TestRefusalsInTheContractsWords: every reason an order is refused for has its status and
// message of the contract, with what the refusal names filled in.
func TestRefusalsInTheContractsWords(t *testing.T) {
	const p = "10000000000001"
	cases := map[orders.Reason]struct {
		refusal orders.Refusal
		status  int
		message string
	}{
		orders.BodyNotAnObject:          {orders.Refusal{}, 400, "Request body must be a JSON object"},
		orders.BodyNotSingleObject:      {orders.Refusal{}, 400, "Request body must be a single JSON object"},
		orders.ExternalOrderCodeMissing: {orders.Refusal{}, 400, "externalOrderCode is required"},
		orders.ExternalOrderCodeTooLong: {orders.Refusal{}, 400, "externalOrderCode must be at most 100 characters"},
		orders.CurrencyMissing:          {orders.Refusal{}, 400, "currency is required"},
		orders.CurrencyNotISO:           {orders.Refusal{}, 400, "currency must be an ISO 4217 currency code"},
		orders.NoLines:                  {orders.Refusal{}, 400, "orderProducts must not be empty"},
		orders.TooManyLines:             {orders.Refusal{}, 400, "orderProducts must not have more than 500 lines"},
		orders.InvalidLine: {orders.Refusal{}, 400,
			"Each line requires a productCode and a quantity of at least 1"},
		orders.NotValidated: {orders.Refusal{}, 400,
			"The order could not be validated. Check product codes, prices, and currency."},
		orders.ProductNotFound: {orders.Refusal{Product: p}, 404,
			"Product 10000000000001 was not found in your catalog"},
		orders.ProductNotAvailable: {orders.Refusal{Product: p}, 400,
			"Product 10000000000001 is not currently available."},
		orders.LineCurrencyMismatch: {orders.Refusal{Product: p, ProductCurrency: "EUR", Requested: "USD"}, 400,
			"Product 10000000000001 is priced in EUR, not USD"},
		orders.WrongOrderCurrency: {orders.Refusal{Product: p}, 400,
			"Product 10000000000001 cannot be ordered in the requested currency."},
		orders.NotOrderableInCountry: {orders.Refusal{Product: p}, 400,
			"Product 10000000000001 is not available for ordering with the supplied country or currency."},
		orders.PriceRequired: {orders.Refusal{Product: p}, 400,
			"Product 10000000000001 is open-denomination and requires a price"},
		orders.PriceBelowMinimum: {orders.Refusal{Product: p, Amount: 500}, 400,
			"Price for product 10000000000001 is below the minimum allowed (500)"},
		orders.PriceAboveMaximum: {orders.Refusal{Product: p, Amount: 50000}, 400,
			"Price for product 10000000000001 exceeds the maximum allowed (50000)"},
		orders.PriceOffStep: {orders.Refusal{Product: p, Amount: 500, Step: 100}, 400,
			"Price for product 10000000000001 must be 500 plus a multiple of 100"},
		orders.PriceMismatch: {orders.Refusal{Product: p, Amount: 2500}, 400,
			"Product 10000000000001 price mismatch: expected 2500"},
		orders.TotalMismatch: {orders.Refusal{Amount: 7500}, 400, "Order price mismatch: expected total 7500"},
		orders.LimitExceeded: {orders.Refusal{}, 422,
			"Your account order limit has been exceeded. Contact support for assistance."},
		orders.OrderingDisabled: {orders.Refusal{}, 403,
			"API ordering is disabled for your account. Contact support for assistance."},
		orders.InsufficientFunds: {orders.Refusal{}, 422,
			"Insufficient funds. Please top up your wallet and try again."},
		orders.ExternalOrderCodeReusedOther: {orders.Refusal{}, 409,
			"An order with this external order code already exists."},
		orders.AlreadyPlacedArchived: {orders.Refusal{}, 400, "This order has already been placed."},
		orders.MetadataNotObject: {orders.Refusal{}, 400,
			"metadata must be an object of string keys and string values"},
		orders.MetadataTooManyKeys: {orders.Refusal{}, 400, "metadata must not have more than 20 keys"},
		orders.MetadataKeyLength:   {orders.Refusal{}, 400, "metadata keys must be 1 to 40 characters"},
		orders.MetadataValueNotString: {orders.Refusal{Key: "invoice"}, 400,
			`metadata value of key "invoice" must be a string`},
		orders.MetadataValueTooLong: {orders.Refusal{Key: "invoice"}, 400,
			`metadata value of key "invoice" must be at most 500 characters`},
		orders.DuplicateKey: {orders.Refusal{Key: "quantity", Location: "orderProducts[1]"}, 400,
			`Request body has the key "quantity" more than once in orderProducts[1]; send each key once`},
		orders.TextNotStorable: {orders.Refusal{Location: "metadata.note"}, 400,
			"metadata.note must be valid UTF-8 text without NUL characters"},
		orders.FieldNameCase: {orders.Refusal{Key: "ExternalOrderCode", Field: "externalOrderCode"}, 400,
			`Unknown field "ExternalOrderCode": field names are case-sensitive; did you mean "externalOrderCode"?`},
		orders.NullField: {orders.Refusal{Key: "sku", Location: "orderProducts[1]"}, 400,
			"orderProducts[1].sku must not be null; omit the field to leave it unset"},
		orders.WrongType: {orders.Refusal{Location: "orderProducts[1].quantity", Expected: "an integer"}, 400,
			"orderProducts[1].quantity must be an integer"},
		orders.IntegerOutOfRange: {orders.Refusal{Location: "price", Amount: -9007199254740991}, 400,
			"price must be at least -9007199254740991"},
	}
	for _, reason := range orders.Reasons() {
		tc, ok := cases[reason]
		if !ok {
			t.Errorf("reason %q has no case here", reason)
			continue
		}
		refusal := tc.refusal
		refusal.Reason = reason
		// Wrapped, as a caller adding context would.
		e, ok := apierror.FromDomain(fmt.Errorf("place: %w", &refusal))
		if !ok || e.Status != tc.status || e.Message != tc.message || e.Label == "" {
			t.Errorf("%q: got %+v, want %d %q", reason, e, tc.status, tc.message)
		}
	}
	if len(cases) != len(orders.Reasons()) {
		t.Errorf("%d cases for %d reasons", len(cases), len(orders.Reasons()))
	}
}

// TestDomainFailuresInTheContractsWords: the order and catalog packages' other errors.
func TestDomainFailuresInTheContractsWords(t *testing.T) {
	cause := errors.New("connection reset")
	cases := []struct {
		err     error
		status  int
		message string
	}{
		{&orders.NotFoundError{Reference: "ext-1"}, 404, "Order ext-1 not found"},
		{fmt.Errorf("%w: %w", orders.ErrNotPlaced, cause), 502, "Order could not be created. Please try again later."},
		{fmt.Errorf("%w: %w", orders.ErrFulfilmentUnavailable, cause), 502,
			"Order processing is temporarily unavailable. Please try again later."},
		{&catalog.PagingError{Param: "skip"}, 400, "skip must be an integer greater than or equal to 0"},
		{&catalog.PagingError{Param: "take"}, 400, "take must be an integer between 1 and 100"},
		{&catalog.PagingError{Param: "skip", TooLarge: true}, 400, "skip must be at most 9007199254740991"},
		{&listing.QueryError{Param: listing.ParamCurrency}, 400, "currency must be an ISO 4217 currency code"},
		{&listing.QueryError{Param: listing.ParamStatus}, 400,
			"status must be one of processing, completed, partially_completed, failed"},
		{&listing.QueryError{Param: listing.ParamFrom}, 400, "from must be an RFC 3339 date-time or a date (YYYY-MM-DD)"},
		{&listing.QueryError{Param: listing.ParamTo}, 400, "to must be an RFC 3339 date-time or a date (YYYY-MM-DD)"},
		{&listing.QueryError{Param: listing.ParamRange}, 400, "from must be earlier than to"},
		{&listing.QueryError{Param: listing.ParamLimit}, 400, "limit must be an integer between 1 and 1000"},
		{fmt.Errorf("statement: %w", &listing.QueryError{Param: listing.ParamCursor}), 400,
			"cursor is not valid for this list; use a nextCursor this list returned"},
		{&listing.QueryError{Param: listing.ParamExternalOrderCode}, 400,
			"externalOrderCode must be 1 to 100 characters"},
	}
	for _, tc := range cases {
		e, ok := apierror.As(tc.err)
		if !ok || e.Status != tc.status || e.Message != tc.message {
			t.Errorf("%v: got %+v, want %d %q", tc.err, e, tc.status, tc.message)
		}
	}
	if e, ok := apierror.As(cause); ok {
		t.Errorf("an error no package names answered %+v; want it left to the internal error", e)
	}
}
