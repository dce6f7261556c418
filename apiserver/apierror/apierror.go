package apierror

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Error is an API error rendered as the contract's body: {statusCode, error, message}.
type Error struct {
	Status  int    `json:"statusCode"`
	Label   string `json:"error,omitempty"`
	Message string `json:"message"`
}

// Error renders the status, label and message on one line, for logs.
func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Label, e.Message) }

// New builds an error with the standard label of status.
func New(status int, message string) *Error {
	return &Error{Status: status, Label: http.StatusText(status), Message: message}
}

// As returns the contract's answer to err: the *Error inside it, or the wording of a domain
// package's error (FromDomain). ok is false for any other error.
func As(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return FromDomain(err)
}

// MissingAPIKey is the 401 of a /v2 request without an x-api-key header.
func MissingAPIKey() *Error { return New(http.StatusUnauthorized, "Missing API key") }

// InvalidAPIKey is the 401 of a key that grants nothing here, whatever the reason
// (auth.ErrInvalidKey).
func InvalidAPIKey() *Error { return New(http.StatusUnauthorized, "Invalid API key") }

// MissingBearerToken is the legacy v1 interface's 401 of a request without a bearer token.
func MissingBearerToken() *Error {
	return New(http.StatusUnauthorized, "Missing bearer token")
}

// InvalidBearerToken is the legacy v1 interface's 401 of a token that grants nothing here.
func InvalidBearerToken() *Error {
	return New(http.StatusUnauthorized, "Invalid bearer token")
}

// IPNotWhitelisted is the 403 of a client address outside the account's allowlist.
func IPNotWhitelisted(ip string) *Error {
	return New(http.StatusForbidden, fmt.Sprintf("Requests from IP address %s are not allowed for this account. "+
		"Ask your account manager to whitelist it.", ip))
}

// AccountSuspended is the 403 of a suspended account or partner.
func AccountSuspended() *Error {
	return New(http.StatusForbidden, "Your account is suspended. Contact support for assistance.")
}

// OrderingDisabled is the 403 of an order placed by an account that may not order.
func OrderingDisabled() *Error {
	return New(http.StatusForbidden, "API ordering is disabled for your account. Contact support for assistance.")
}

// MethodNotAllowed is the 405 of a method the route does not take, or one the server does not know
// at all.
func MethodNotAllowed() *Error { return New(http.StatusMethodNotAllowed, "Method not allowed") }

// ProductNotFound is the 404 of a product code the account's catalog does not list.
func ProductNotFound(productCode string) *Error {
	return New(http.StatusNotFound, fmt.Sprintf("Product %s was not found in your catalog", productCode))
}

// OrderNotFound is the 404 of an order reference the account has no order of.
func OrderNotFound(reference string) *Error {
	return New(http.StatusNotFound, fmt.Sprintf("Order %s not found", reference))
}

// RouteNotFound is the 404 of a path no route serves.
func RouteNotFound(method, path string) *Error {
	return New(http.StatusNotFound, fmt.Sprintf("Cannot %s %s", method, path))
}

// RootNotFound answers the server's root, where someone who was given only the server's address
// looks first: it names where the API and its reference are.
func RootNotFound(method string) *Error {
	return New(http.StatusNotFound,
		fmt.Sprintf("Cannot %s /: the partner API is under /v2 (legacy /v1), its reference at /docs", method))
}

// The 400s of order validation, in the contract's words.

// EmptyOrderProducts is the 400 of an order without lines.
func EmptyOrderProducts() *Error {
	return New(http.StatusBadRequest, "orderProducts must not be empty")
}

// InvalidLine is the 400 of an order line without a productCode or with a quantity below 1.
func InvalidLine() *Error {
	return New(http.StatusBadRequest, "Each line requires a productCode and a quantity of at least 1")
}

// CurrencyMismatch is the 400 of a line whose product is priced in another currency than requested.
func CurrencyMismatch(productCode, productCurrency, requested string) *Error {
	return New(http.StatusBadRequest,
		fmt.Sprintf("Product %s is priced in %s, not %s", productCode, productCurrency, requested))
}

// OpenDenominationRequiresPrice is the 400 of a line of an open-denomination product without a
// price.
func OpenDenominationRequiresPrice(productCode string) *Error {
	return New(http.StatusBadRequest, fmt.Sprintf("Product %s is open-denomination and requires a price", productCode))
}

// PriceBelowMinimum is the 400 of an open-denomination price below the product's minimum.
func PriceBelowMinimum(productCode string, minimum int64) *Error {
	return New(http.StatusBadRequest,
		fmt.Sprintf("Price for product %s is below the minimum allowed (%d)", productCode, minimum))
}

// PriceAboveMaximum is the 400 of an open-denomination price above the product's maximum.
func PriceAboveMaximum(productCode string, maximum int64) *Error {
	return New(http.StatusBadRequest,
		fmt.Sprintf("Price for product %s exceeds the maximum allowed (%d)", productCode, maximum))
}

// PriceMismatch is the 400 of a line whose price differs from the catalog's.
func PriceMismatch(productCode string, expected int64) *Error {
	return New(http.StatusBadRequest, fmt.Sprintf("Product %s price mismatch: expected %d", productCode, expected))
}

// OrderPriceMismatch is the 400 of an order whose stated total differs from its lines'.
func OrderPriceMismatch(expected int64) *Error {
	return New(http.StatusBadRequest, fmt.Sprintf("Order price mismatch: expected total %d", expected))
}

// NotOrderableCountryOrCurrency is the 400 of a product not sold for the country or currency given.
func NotOrderableCountryOrCurrency(productCode string) *Error {
	return New(http.StatusBadRequest,
		fmt.Sprintf("Product %s is not available for ordering with the supplied country or currency.", productCode))
}

// ProductNotCurrentlyAvailable is the 400 of a product outside its sale period.
func ProductNotCurrentlyAvailable(productCode string) *Error {
	return New(http.StatusBadRequest, fmt.Sprintf("Product %s is not currently available.", productCode))
}

// WrongOrderCurrency is the 400 of a product that cannot be ordered in the currency requested.
func WrongOrderCurrency(productCode string) *Error {
	return New(http.StatusBadRequest, fmt.Sprintf("Product %s cannot be ordered in the requested currency.", productCode))
}

// OrderInvalid is the 400 of an order that could not be validated as a whole.
func OrderInvalid() *Error {
	return New(http.StatusBadRequest, "The order could not be validated. Check product codes, prices, and currency.")
}

// AlreadyPlaced is the 400 of a re-post of an order whose details were archived: the order was
// placed, but its representation is no longer online to replay.
func AlreadyPlaced() *Error { return New(http.StatusBadRequest, "This order has already been placed.") }

// BadRequest is a 400 for malformed input outside the order rules (query parameters, JSON syntax).
func BadRequest(message string) *Error { return New(http.StatusBadRequest, message) }

// DuplicateExternalOrderCode is the 409 of an externalOrderCode used before with another body.
func DuplicateExternalOrderCode() *Error {
	return New(http.StatusConflict, "An order with this external order code already exists.")
}

// NoWebhookEndpoint is a webhook replay of an account with no endpoint to deliver to.
func NoWebhookEndpoint() *Error {
	return New(http.StatusConflict, "No webhook endpoint is configured for this environment. "+
		"Ask your account manager to set one up, then replay.")
}

// BodyTooLarge is the 413 of a body over limit bytes.
func BodyTooLarge(limit int) *Error {
	return New(http.StatusRequestEntityTooLarge, fmt.Sprintf("Request body exceeds the limit of %d bytes", limit))
}

// UnsupportedMediaType is the 415 of a POST whose body is not JSON.
func UnsupportedMediaType() *Error {
	return New(http.StatusUnsupportedMediaType, "Content-Type must be application/json")
}

// UnsupportedContentEncoding refuses a body sent with a content coding (gzip, br, ...); coding is
// the first one that is not identity, or "" when it is not a token fit to repeat.
func UnsupportedContentEncoding(coding string) *Error {
	if coding == "" {
		return New(http.StatusUnsupportedMediaType,
			"Content-Encoding is not supported; send the body uncompressed.")
	}
	return New(http.StatusUnsupportedMediaType,
		fmt.Sprintf("Content-Encoding %s is not supported; send the body uncompressed.", coding))
}

// OrderLimitExceeded is the 422 of an order over the account's daily spend limit.
func OrderLimitExceeded() *Error {
	return New(http.StatusUnprocessableEntity,
		"Your account order limit has been exceeded. Contact support for assistance.")
}

// InsufficientFunds is the 422 of an order its wallet cannot pay.
func InsufficientFunds() *Error {
	return New(http.StatusUnprocessableEntity, "Insufficient funds. Please top up your wallet and try again.")
}

// RateLimited is the 429 of a key over its rate limit, with the seconds until it may retry.
func RateLimited(retryAfterSeconds int64) *Error {
	return New(http.StatusTooManyRequests, fmt.Sprintf("Rate limit exceeded. Retry after %ds.", retryAfterSeconds))
}

// ProcessingUnavailable is the 502 of an order the database could not take in time.
func ProcessingUnavailable() *Error {
	return New(http.StatusBadGateway, "Order processing is temporarily unavailable. Please try again later.")
}

// OrderCreationFailed is the 502 of an order whose placement failed after its retries.
func OrderCreationFailed() *Error {
	return New(http.StatusBadGateway, "Order could not be created. Please try again later.")
}

// Internal is the 500; its label is omitted, as on the contract's 500 responses.
func Internal() *Error {
	return &Error{Status: http.StatusInternalServerError, Message: "Internal server error"}
}

// UnknownSandboxScenario is an X-Sandbox-Scenario value the sandbox does not know.
func UnknownSandboxScenario(value string, valid []string) *Error {
	return New(http.StatusBadRequest, fmt.Sprintf("Unknown X-Sandbox-Scenario %q. Valid scenarios: %s.",
		value, strings.Join(valid, ", ")))
}

// GatewayTimeout is the sandbox's timeout scenario: the answer a gateway gives when the service
// behind it did not answer in time.
func GatewayTimeout() *Error {
	return New(http.StatusGatewayTimeout, "The request timed out. Its outcome is unknown: "+
		"retry it (orders with the same externalOrderCode) to find out.")
}

// Unavailable is the 503 of the probes outside /v2.
func Unavailable(message string) *Error { return New(http.StatusServiceUnavailable, message) }
