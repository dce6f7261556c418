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

// 401
func MissingAPIKey() *Error { return New(http.StatusUnauthorized, "Missing API key") }
func InvalidAPIKey() *Error { return New(http.StatusUnauthorized, "Invalid API key") }

// MissingBearerToken and InvalidBearerToken are the legacy v1 interface's 401s.
func MissingBearerToken() *Error {
	return New(http.StatusUnauthorized, "Missing bearer token")
}
func InvalidBearerToken() *Error {
	return New(http.StatusUnauthorized, "Invalid bearer token")
}

// 403
func IPNotWhitelisted(ip string) *Error {
	return New(http.StatusForbidden, fmt.Sprintf("Requests from IP address %s are not allowed for this account. "+
		"Ask your account manager to whitelist it.", ip))
}
func AccountSuspended() *Error {
	return New(http.StatusForbidden, "Your account is suspended. Contact support for assistance.")
}
func OrderingDisabled() *Error {
	return New(http.StatusForbidden, "API ordering is disabled for your account. Contact support for assistance.")
}

// 405: a method the route does not take, or one the server does not know at all.
func MethodNotAllowed() *Error { return New(http.StatusMethodNotAllowed, "Method not allowed") }

// 404
func ProductNotFound(productCode string) *Error {
	return New(http.StatusNotFound, fmt.Sprintf("Product %s was not found in your catalog", productCode))
}
func OrderNotFound(reference string) *Error {
	return New(http.StatusNotFound, fmt.Sprintf("Order %s not found", reference))
}
func RouteNotFound(method, path string) *Error {
	return New(http.StatusNotFound, fmt.Sprintf("Cannot %s %s", method, path))
}

// RootNotFound answers the server's root, where someone who was given only the server's address
// looks first: it names where the API and its reference are.
func RootNotFound(method string) *Error {
	return New(http.StatusNotFound,
		fmt.Sprintf("Cannot %s /: the partner API is under /v2 (legacy /v1), its reference at /docs", method))
}

// 400: order validation, in the contract's words.
func EmptyOrderProducts() *Error {
	return New(http.StatusBadRequest, "orderProducts must not be empty")
}
func InvalidLine() *Error {
	return New(http.StatusBadRequest, "Each line requires a productCode and a quantity of at least 1")
}
func CurrencyMismatch(productCode, productCurrency, requested string) *Error {
	return New(http.StatusBadRequest,
		fmt.Sprintf("Product %s is priced in %s, not %s", productCode, productCurrency, requested))
}
func OpenDenominationRequiresPrice(productCode string) *Error {
	return New(http.StatusBadRequest, fmt.Sprintf("Product %s is open-denomination and requires a price", productCode))
}
func PriceBelowMinimum(productCode string, minimum int64) *Error {
	return New(http.StatusBadRequest,
		fmt.Sprintf("Price for product %s is below the minimum allowed (%d)", productCode, minimum))
}
func PriceAboveMaximum(productCode string, maximum int64) *Error {
	return New(http.StatusBadRequest,
		fmt.Sprintf("Price for product %s exceeds the maximum allowed (%d)", productCode, maximum))
}
func PriceMismatch(productCode string, expected int64) *Error {
	return New(http.StatusBadRequest, fmt.Sprintf("Product %s price mismatch: expected %d", productCode, expected))
}
func OrderPriceMismatch(expected int64) *Error {
	return New(http.StatusBadRequest, fmt.Sprintf("Order price mismatch: expected total %d", expected))
}
func NotOrderableCountryOrCurrency(productCode string) *Error {
	return New(http.StatusBadRequest,
		fmt.Sprintf("Product %s is not available for ordering with the supplied country or currency.", productCode))
}
func ProductNotCurrentlyAvailable(productCode string) *Error {
	return New(http.StatusBadRequest, fmt.Sprintf("Product %s is not currently available.", productCode))
}
func WrongOrderCurrency(productCode string) *Error {
	return New(http.StatusBadRequest, fmt.Sprintf("Product %s cannot be ordered in the requested currency.", productCode))
}
func OpenDenominationRequiresPriceRejection(productCode string) *Error {
	return New(http.StatusBadRequest, fmt.Sprintf("Product %s is open-denomination and requires a price.", productCode))
}
func OrderInvalid() *Error {
	return New(http.StatusBadRequest, "The order could not be validated. Check product codes, prices, and currency.")
}
func AlreadyPlaced() *Error { return New(http.StatusBadRequest, "This order has already been placed.") }
func OrderRejected() *Error {
	return New(http.StatusBadRequest, "The order could not be placed. Check your request and try again.")
}

// BadRequest is a 400 for malformed input outside the order rules (query parameters, JSON syntax).
func BadRequest(message string) *Error { return New(http.StatusBadRequest, message) }

// 409, 413, 415
func DuplicateExternalOrderCode() *Error {
	return New(http.StatusConflict, "An order with this external order code already exists.")
}

// NoWebhookEndpoint is a webhook replay of an account with no endpoint to deliver to.
func NoWebhookEndpoint() *Error {
	return New(http.StatusConflict, "No webhook endpoint is configured for this environment. "+
		"Ask your account manager to set one up, then replay.")
}
func BodyTooLarge(limit int) *Error {
	return New(http.StatusRequestEntityTooLarge, fmt.Sprintf("Request body exceeds the limit of %d bytes", limit))
}
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

// 422
func OrderLimitExceeded() *Error {
	return New(http.StatusUnprocessableEntity,
		"Your account order limit has been exceeded. Contact support for assistance.")
}
func InsufficientFunds() *Error {
	return New(http.StatusUnprocessableEntity, "Insufficient funds. Please top up your wallet and try again.")
}
func NotPurchasable(productCode string) *Error {
	return New(http.StatusUnprocessableEntity, fmt.Sprintf("Product %s is not available for purchase.", productCode))
}

// 429
func RateLimited(retryAfterSeconds int64) *Error {
	return New(http.StatusTooManyRequests, fmt.Sprintf("Rate limit exceeded. Retry after %ds.", retryAfterSeconds))
}

// 502
func ProcessingUnavailable() *Error {
	return New(http.StatusBadGateway, "Order processing is temporarily unavailable. Please try again later.")
}
func OrderCreationFailed() *Error {
	return New(http.StatusBadGateway, "Order could not be created. Please try again later.")
}

// 500: the label is omitted, as on the contract's 500 responses.
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

// 503 for the probes outside /v2.
func Unavailable(message string) *Error { return New(http.StatusServiceUnavailable, message) }
