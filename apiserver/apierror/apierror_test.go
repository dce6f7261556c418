package apierror_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/codeport/codeport/apiserver/apierror"
)

// TestBodiesInTheContractsShape: every error the API answers is the contract's body
// {"statusCode","error","message"}, in that order, with the status's standard label and the
// message of the spec's table, word for word; the 500 omits its label as the contract's do.
func TestBodiesInTheContractsShape(t *testing.T) {
	const p = "10000000000001"
	tests := []struct {
		err  *apierror.Error
		body string
	}{
		{apierror.MissingAPIKey(), `{"statusCode":401,"error":"Unauthorized","message":"Missing API key"}`},
		{apierror.InvalidAPIKey(), `{"statusCode":401,"error":"Unauthorized","message":"Invalid API key"}`},
		{apierror.MissingBearerToken(), `{"statusCode":401,"error":"Unauthorized","message":"Missing bearer token"}`},
		{apierror.InvalidBearerToken(), `{"statusCode":401,"error":"Unauthorized","message":"Invalid bearer token"}`},
		{apierror.IPNotWhitelisted("203.0.113.9"), `{"statusCode":403,"error":"Forbidden","message":` +
			`"Requests from IP address 203.0.113.9 are not allowed for this account. ` +
			`Ask your account manager to whitelist it."}`},
		{apierror.AccountSuspended(), `{"statusCode":403,"error":"Forbidden",` +
			`"message":"Your account is suspended. Contact support for assistance."}`},
		{apierror.OrderingDisabled(), `{"statusCode":403,"error":"Forbidden",` +
			`"message":"API ordering is disabled for your account. Contact support for assistance."}`},
		{apierror.MethodNotAllowed(), `{"statusCode":405,"error":"Method Not Allowed","message":"Method not allowed"}`},
		{apierror.ProductNotFound(p), `{"statusCode":404,"error":"Not Found",` +
			`"message":"Product 10000000000001 was not found in your catalog"}`},
		{apierror.OrderNotFound("ext-1"), `{"statusCode":404,"error":"Not Found","message":"Order ext-1 not found"}`},
		{apierror.RouteNotFound("GET", "/v2/nowhere"),
			`{"statusCode":404,"error":"Not Found","message":"Cannot GET /v2/nowhere"}`},
		{apierror.RootNotFound("GET"), `{"statusCode":404,"error":"Not Found",` +
			`"message":"Cannot GET /: the partner API is under /v2 (legacy /v1), its reference at /docs"}`},
		{apierror.EmptyOrderProducts(), `{"statusCode":400,"error":"Bad Request",` +
			`"message":"orderProducts must not be empty"}`},
		{apierror.InvalidLine(), `{"statusCode":400,"error":"Bad Request",` +
			`"message":"Each line requires a productCode and a quantity of at least 1"}`},
		{apierror.CurrencyMismatch(p, "EUR", "USD"), `{"statusCode":400,"error":"Bad Request",` +
			`"message":"Product 10000000000001 is priced in EUR, not USD"}`},
		{apierror.OpenDenominationRequiresPrice(p), `{"statusCode":400,"error":"Bad Request",` +
			`"message":"Product 10000000000001 is open-denomination and requires a price"}`},
		{apierror.PriceBelowMinimum(p, 500), `{"statusCode":400,"error":"Bad Request",` +
			`"message":"Price for product 10000000000001 is below the minimum allowed (500)"}`},
		{apierror.PriceAboveMaximum(p, 10000), `{"statusCode":400,"error":"Bad Request",` +
			`"message":"Price for product 10000000000001 exceeds the maximum allowed (10000)"}`},
		{apierror.PriceMismatch(p, 2000), `{"statusCode":400,"error":"Bad Request",` +
			`"message":"Product 10000000000001 price mismatch: expected 2000"}`},
		{apierror.OrderPriceMismatch(4000), `{"statusCode":400,"error":"Bad Request",` +
			`"message":"Order price mismatch: expected total 4000"}`},
		{apierror.NotOrderableCountryOrCurrency(p), `{"statusCode":400,"error":"Bad Request","message":` +
			`"Product 10000000000001 is not available for ordering with the supplied country or currency."}`},
		{apierror.ProductNotCurrentlyAvailable(p), `{"statusCode":400,"error":"Bad Request",` +
			`"message":"Product 10000000000001 is not currently available."}`},
		{apierror.WrongOrderCurrency(p), `{"statusCode":400,"error":"Bad Request",` +
			`"message":"Product 10000000000001 cannot be ordered in the requested currency."}`},
		{apierror.OrderInvalid(), `{"statusCode":400,"error":"Bad Request",` +
			`"message":"The order could not be validated. Check product codes, prices, and currency."}`},
		{apierror.BadRequest("take must be an integer between 1 and 100"), `{"statusCode":400,"error":"Bad Request",` +
			`"message":"take must be an integer between 1 and 100"}`},
		{apierror.DuplicateExternalOrderCode(), `{"statusCode":409,"error":"Conflict",` +
			`"message":"An order with this external order code already exists."}`},
		{apierror.BodyTooLarge(1 << 20), `{"statusCode":413,"error":"Request Entity Too Large",` +
			`"message":"Request body exceeds the limit of 1048576 bytes"}`},
		{apierror.UnsupportedMediaType(), `{"statusCode":415,"error":"Unsupported Media Type",` +
			`"message":"Content-Type must be application/json"}`},
		{apierror.UnsupportedContentEncoding("gzip"), `{"statusCode":415,"error":"Unsupported Media Type",` +
			`"message":"Content-Encoding gzip is not supported; send the body uncompressed."}`},
		{apierror.UnsupportedContentEncoding(""), `{"statusCode":415,"error":"Unsupported Media Type",` +
			`"message":"Content-Encoding is not supported; send the body uncompressed."}`},
		{apierror.OrderLimitExceeded(), `{"statusCode":422,"error":"Unprocessable Entity",` +
			`"message":"Your account order limit has been exceeded. Contact support for assistance."}`},
		{apierror.InsufficientFunds(), `{"statusCode":422,"error":"Unprocessable Entity",` +
			`"message":"Insufficient funds. Please top up your wallet and try again."}`},
		{apierror.RateLimited(17), `{"statusCode":429,"error":"Too Many Requests",` +
			`"message":"Rate limit exceeded. Retry after 17s."}`},
		{apierror.ProcessingUnavailable(), `{"statusCode":502,"error":"Bad Gateway",` +
			`"message":"Order processing is temporarily unavailable. Please try again later."}`},
		{apierror.OrderCreationFailed(), `{"statusCode":502,"error":"Bad Gateway",` +
			`"message":"Order could not be created. Please try again later."}`},
		{apierror.Internal(), `{"statusCode":500,"message":"Internal server error"}`},
		{apierror.Unavailable("database unreachable"), `{"statusCode":503,"error":"Service Unavailable",` +
			`"message":"database unreachable"}`},
	}
	for _, tt := range tests {
		body, err := json.Marshal(tt.err)
		if err != nil {
			t.Fatal(err)
		}
		if string(body) != tt.body {
			t.Errorf("got  %s\nwant %s", body, tt.body)
		}
	}
}

// TestAsFindsTheErrorInsideAWrap: a handler's *Error keeps its status and words when a caller
// wraps it, and an error nobody words is not mistaken for one.
func TestAsFindsTheErrorInsideAWrap(t *testing.T) {
	e, ok := apierror.As(fmt.Errorf("list products: %w", apierror.BadRequest("skip must be an integer")))
	if !ok || e.Status != 400 || e.Message != "skip must be an integer" {
		t.Errorf("As = %+v, %v; want the wrapped 400", e, ok)
	}
	if e, ok := apierror.As(fmt.Errorf("read wallet: %w", errors.New("connection reset"))); ok {
		t.Errorf("As = %+v for an error of no package; want it left to the internal error", e)
	}
}
