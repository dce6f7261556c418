package apierror

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/codeport/codeport/internal/catalog"
	"github.com/codeport/codeport/internal/listing"
	"github.com/codeport/codeport/internal/notify"
	"github.com/codeport/codeport/internal/orders"
)

// FromDomain words an error of the domain packages as the contract does: the one place where
// their rules become a status and a message. ok is false for an error they do not name, which
// the caller answers as an internal error.
func FromDomain(err error) (e *Error, ok bool) {
	var (
		refusal  *orders.Refusal
		notFound *orders.NotFoundError
		paging   *catalog.PagingError
		query    *listing.QueryError
		param    *notify.ParamError
	)
	switch {
	case errors.As(err, &refusal):
		if word, known := refusals[refusal.Reason]; known {
			return word(refusal), true
		}
		return OrderInvalid(), true
	case errors.As(err, &notFound):
		return OrderNotFound(notFound.Reference), true
	case errors.Is(err, orders.ErrFulfilmentUnavailable):
		return ProcessingUnavailable(), true
	case errors.Is(err, orders.ErrNotPlaced):
		return OrderCreationFailed(), true
	case errors.As(err, &paging) && paging.TooLarge:
		return BadRequest(fmt.Sprintf("%s must be at most %d", paging.Param, catalog.MaxSkip)), true
	case errors.As(err, &paging) && paging.Param == "skip":
		return BadRequest("skip must be an integer greater than or equal to 0"), true
	case errors.As(err, &paging):
		return BadRequest(fmt.Sprintf("take must be an integer between 1 and %d", catalog.MaxTake)), true
	case errors.As(err, &query):
		return BadRequest(listQueryMessages[query.Param]), true
	case errors.As(err, &param):
		return eventParam(param), true
	case errors.Is(err, notify.ErrNoEndpoint):
		return NoWebhookEndpoint(), true
	}
	return nil, false
}

// refusals words each reason an order is refused for.
var refusals = map[orders.Reason]func(*orders.Refusal) *Error{
	orders.BodyNotAnObject:          badRequest("Request body must be a JSON object"),
	orders.BodyNotSingleObject:      badRequest("Request body must be a single JSON object"),
	orders.ExternalOrderCodeMissing: badRequest("externalOrderCode is required"),
	orders.ExternalOrderCodeTooLong: badRequest(
		fmt.Sprintf("externalOrderCode must be at most %d characters", orders.MaxExternalOrderCodeLength)),
	orders.CurrencyMissing:   badRequest("currency is required"),
	orders.CurrencyNotISO:    badRequest("currency must be an ISO 4217 currency code"),
	orders.NoLines:           func(*orders.Refusal) *Error { return EmptyOrderProducts() },
	orders.TooManyLines:      badRequest(fmt.Sprintf("orderProducts must not have more than %d lines", orders.MaxLines)),
	orders.InvalidLine:       func(*orders.Refusal) *Error { return InvalidLine() },
	orders.NotValidated:      func(*orders.Refusal) *Error { return OrderInvalid() },
	orders.MetadataNotObject: badRequest("metadata must be an object of string keys and string values"),
	orders.MetadataTooManyKeys: badRequest(
		fmt.Sprintf("metadata must not have more than %d keys", orders.MaxMetadataKeys)),
	orders.MetadataKeyLength: badRequest(
		fmt.Sprintf("metadata keys must be 1 to %d characters", orders.MaxMetadataKeyLength)),
	orders.MetadataValueNotString: func(r *orders.Refusal) *Error {
		return BadRequest(fmt.Sprintf("metadata value of key %q must be a string", r.Key))
	},
	orders.MetadataValueTooLong: func(r *orders.Refusal) *Error {
		return BadRequest(fmt.Sprintf("metadata value of key %q must be at most %d characters", r.Key,
			orders.MaxMetadataValueLength))
	},
	orders.DuplicateKey: func(r *orders.Refusal) *Error {
		return BadRequest(fmt.Sprintf("Request body has the key %q more than once%s; send each key once", r.Key,
			within(r.Location)))
	},
	orders.TextNotStorable: func(r *orders.Refusal) *Error {
		switch {
		case r.InKey && r.Location == "":
			return BadRequest("Request body keys must be valid UTF-8 text without NUL characters")
		case r.InKey:
			return BadRequest("Keys in " + r.Location + " must be valid UTF-8 text without NUL characters")
		}
		return BadRequest(r.Location + " must be valid UTF-8 text without NUL characters")
	},
	orders.FieldNameCase: func(r *orders.Refusal) *Error {
		return BadRequest(fmt.Sprintf("Unknown field %q%s: field names are case-sensitive; did you mean %q?", r.Key,
			within(r.Location), r.Field))
	},
	orders.WrongType: func(r *orders.Refusal) *Error { return BadRequest(r.Location + " must be " + r.Expected) },
	orders.IntegerOutOfRange: func(r *orders.Refusal) *Error {
		if r.Amount < 0 {
			return BadRequest(fmt.Sprintf("%s must be at least %d", r.Location, r.Amount))
		}
		return BadRequest(fmt.Sprintf("%s must be at most %d", r.Location, r.Amount))
	},
	orders.NullField: func(r *orders.Refusal) *Error {
		field := r.Key
		if r.Location != "" {
			field = r.Location + "." + r.Key
		}
		return BadRequest(field + " must not be null; omit the field to leave it unset")
	},

	orders.ProductNotFound:     func(r *orders.Refusal) *Error { return ProductNotFound(r.Product) },
	orders.ProductNotAvailable: func(r *orders.Refusal) *Error { return ProductNotCurrentlyAvailable(r.Product) },
	orders.LineCurrencyMismatch: func(r *orders.Refusal) *Error {
		return CurrencyMismatch(r.Product, r.ProductCurrency, r.Requested)
	},
	orders.WrongOrderCurrency:    func(r *orders.Refusal) *Error { return WrongOrderCurrency(r.Product) },
	orders.NotOrderableInCountry: func(r *orders.Refusal) *Error { return NotOrderableCountryOrCurrency(r.Product) },
	orders.PriceRequired:         func(r *orders.Refusal) *Error { return OpenDenominationRequiresPrice(r.Product) },
	orders.PriceBelowMinimum:     func(r *orders.Refusal) *Error { return PriceBelowMinimum(r.Product, r.Amount) },
	orders.PriceAboveMaximum:     func(r *orders.Refusal) *Error { return PriceAboveMaximum(r.Product, r.Amount) },
	orders.PriceOffStep: func(r *orders.Refusal) *Error {
		return BadRequest(fmt.Sprintf("Price for product %s must be %d plus a multiple of %d", r.Product, r.Amount, r.Step))
	},
	orders.PriceMismatch: func(r *orders.Refusal) *Error { return PriceMismatch(r.Product, r.Amount) },
	orders.TotalMismatch: func(r *orders.Refusal) *Error { return OrderPriceMismatch(r.Amount) },

	orders.OrderingDisabled:             func(*orders.Refusal) *Error { return OrderingDisabled() },
	orders.LimitExceeded:                func(*orders.Refusal) *Error { return OrderLimitExceeded() },
	orders.InsufficientFunds:            func(*orders.Refusal) *Error { return InsufficientFunds() },
	orders.ExternalOrderCodeReusedOther: func(*orders.Refusal) *Error { return DuplicateExternalOrderCode() },
	orders.AlreadyPlacedArchived:        func(*orders.Refusal) *Error { return AlreadyPlaced() },
}

// within names where in the body a key is, for messages: " in orderProducts[1]".
func within(location string) string {
	if location == "" {
		return ""
	}
	return " in " + location
}

func badRequest(message string) func(*orders.Refusal) *Error {
	return func(*orders.Refusal) *Error { return New(http.StatusBadRequest, message) }
}

// listQueryMessages word the refused query parameters of the cursor-paged lists.
var listQueryMessages = map[listing.Param]string{
	listing.ParamCurrency: "currency must be an ISO 4217 currency code",
	listing.ParamStatus:   "status must be one of " + strings.Join(listing.Statuses, ", "),
	listing.ParamFrom:     "from must be an RFC 3339 date-time or a date (YYYY-MM-DD)",
	listing.ParamTo:       "to must be an RFC 3339 date-time or a date (YYYY-MM-DD)",
	listing.ParamRange:    "from must be earlier than to",
	listing.ParamLimit:    fmt.Sprintf("limit must be an integer between 1 and %d", listing.MaxLimit),
	listing.ParamCursor:   "cursor is not valid for this list; use a nextCursor this list returned",
	listing.ParamExternalOrderCode: fmt.Sprintf("externalOrderCode must be 1 to %d characters",
		listing.MaxExternalOrderCodeLength),
}

// eventParam words a refused query parameter of the webhook event listing or replay.
func eventParam(e *notify.ParamError) *Error {
	switch {
	case e.Problem == notify.ParamMissing:
		return BadRequest(e.Param + " is required: an RFC 3339 date-time")
	case e.Problem == notify.ParamEmptyWindow:
		return BadRequest("until must be later than since")
	case e.Param == "limit":
		return BadRequest(fmt.Sprintf("limit must be an integer from 1 to %d", notify.MaxEventPage))
	case e.Param == "type":
		return BadRequest("type must be one of " + strings.Join(notify.EventTypes, ", "))
	case e.Param == "cursor":
		return BadRequest("cursor is not valid: pass the nextCursor of a previous page")
	case e.Param == "since":
		return BadRequest("since must be an RFC 3339 date-time, e.g. 2026-11-25T08:00:00Z")
	}
	return BadRequest(e.Param + " must be an RFC 3339 date-time, e.g. 2026-11-25T09:00:00Z")
}
