package apierror

import (
	"bufio"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/codeport/codeport/internal/catalog"
	"github.com/codeport/codeport/internal/listing"
	"github.com/codeport/codeport/internal/notify"
	"github.com/codeport/codeport/internal/orders"
)

// reference is the partner API reference: partners match on the messages it quotes, so each
// must be one the server sends, word for word, and each message the server sends must be there.
const reference = "../../docs/partner-api.md"

// documented is one row of a message table of the reference.
type documented struct {
	status  int
	message string
	pattern *regexp.Regexp
}

// placeholder is a value of the request inside a documented message: {productCode}, {min}.
var placeholder = regexp.MustCompile(`\{[A-Za-z]+\}`)

// readReference returns the rows of every table of the reference whose last column is
// "Message"; a row's first column is its status and its last a message in backticks.
func readReference(t *testing.T) []documented {
	t.Helper()
	f, err := os.Open(reference)
	if err != nil {
		t.Fatalf("open the reference: %v", err)
	}
	defer func() { _ = f.Close() }()
	var rows []documented
	inTable := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "|") {
			inTable = false
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		last := strings.TrimSpace(cells[len(cells)-1])
		switch {
		case last == "Message":
			inTable = true
			continue
		case !inTable || strings.HasPrefix(last, "---"):
			continue
		}
		status, err := strconv.Atoi(strings.TrimSpace(cells[0]))
		message, quoted := strings.CutPrefix(last, "`")
		message, closed := strings.CutSuffix(message, "`")
		if err != nil || !quoted || !closed {
			t.Fatalf("reference row %q: want | status | … | `message` |", line)
		}
		rows = append(rows, documented{status: status, message: message, pattern: patternOf(message)})
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read the reference: %v", err)
	}
	if len(rows) < 50 {
		t.Fatalf("the reference has %d messages: its message tables were not found", len(rows))
	}
	return rows
}

// patternOf matches the messages a documented message stands for: its text exactly, any value
// for each placeholder.
func patternOf(message string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	rest := message
	for _, loc := range placeholder.FindAllStringIndex(message, -1) {
		b.WriteString(regexp.QuoteMeta(message[len(message)-len(rest) : loc[0]]))
		b.WriteString(".*")
		rest = message[loc[1]:]
	}
	b.WriteString(regexp.QuoteMeta(rest))
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// sent is every error this package can answer with, by the function that builds it, with
// sample values for what the request supplies. Wrappers whose message is their caller's
// (New, BadRequest, Unavailable, As) have none of their own.
func sent() map[string][]*Error {
	const p = "10000000000001"
	var domain []*Error
	word := func(err error) {
		if e, ok := FromDomain(err); ok {
			domain = append(domain, e)
		}
	}
	for _, reason := range orders.Reasons() {
		for _, r := range []orders.Refusal{
			{Product: p, Amount: 500, Step: 100, ProductCurrency: "EUR", Requested: "USD", Key: "note", Field: "note"},
			{Key: "quantity", Location: "orderProducts[1]", Field: "quantity"},
			{Location: "metadata", InKey: true},
			{Location: "metadata.note"},
			{InKey: true},
			{Location: "orderProducts[0].quantity", Expected: "an integer", Amount: 9007199254740991},
			{Location: "price", Amount: -9007199254740991},
		} {
			r.Reason = reason
			word(&r)
		}
	}
	word(&orders.NotFoundError{Reference: "ext-1"})
	word(orders.ErrFulfilmentUnavailable)
	word(orders.ErrNotPlaced)
	word(&catalog.PagingError{Param: "skip"})
	word(&catalog.PagingError{Param: "skip", TooLarge: true})
	word(&catalog.PagingError{Param: "take"})
	for param := range listQueryMessages {
		word(&listing.QueryError{Param: param})
	}
	for _, e := range []notify.ParamError{
		{Param: "since", Problem: notify.ParamMissing}, {Param: "since"}, {Param: "until"},
		{Param: "until", Problem: notify.ParamEmptyWindow}, {Param: "limit"}, {Param: "type"}, {Param: "cursor"},
	} {
		word(&e)
	}
	word(notify.ErrNoEndpoint)
	return map[string][]*Error{
		"MissingAPIKey":                 {MissingAPIKey()},
		"InvalidAPIKey":                 {InvalidAPIKey()},
		"MissingBearerToken":            {MissingBearerToken()},
		"InvalidBearerToken":            {InvalidBearerToken()},
		"IPNotWhitelisted":              {IPNotWhitelisted("203.0.113.9")},
		"AccountSuspended":              {AccountSuspended()},
		"OrderingDisabled":              {OrderingDisabled()},
		"MethodNotAllowed":              {MethodNotAllowed()},
		"ProductNotFound":               {ProductNotFound(p)},
		"OrderNotFound":                 {OrderNotFound("ext-1")},
		"RouteNotFound":                 {RouteNotFound("GET", "/v2/nowhere")},
		"RootNotFound":                  {RootNotFound("GET")},
		"EmptyOrderProducts":            {EmptyOrderProducts()},
		"InvalidLine":                   {InvalidLine()},
		"CurrencyMismatch":              {CurrencyMismatch(p, "EUR", "USD")},
		"OpenDenominationRequiresPrice": {OpenDenominationRequiresPrice(p)},
		"PriceBelowMinimum":             {PriceBelowMinimum(p, 500)},
		"PriceAboveMaximum":             {PriceAboveMaximum(p, 10000)},
		"PriceMismatch":                 {PriceMismatch(p, 2000)},
		"OrderPriceMismatch":            {OrderPriceMismatch(4000)},
		"NotOrderableCountryOrCurrency": {NotOrderableCountryOrCurrency(p)},
		"ProductNotCurrentlyAvailable":  {ProductNotCurrentlyAvailable(p)},
		"WrongOrderCurrency":            {WrongOrderCurrency(p)},
		"OrderInvalid":                  {OrderInvalid()},
		"AlreadyPlaced":                 {AlreadyPlaced()},
		"DuplicateExternalOrderCode":    {DuplicateExternalOrderCode()},
		"NoWebhookEndpoint":             {NoWebhookEndpoint()},
		"BodyTooLarge":                  {BodyTooLarge(1 << 20)},
		"UnsupportedMediaType":          {UnsupportedMediaType()},
		"UnsupportedContentEncoding":    {UnsupportedContentEncoding("gzip"), UnsupportedContentEncoding("")},
		"OrderLimitExceeded":            {OrderLimitExceeded()},
		"InsufficientFunds":             {InsufficientFunds()},
		"RateLimited":                   {RateLimited(42)},
		"ProcessingUnavailable":         {ProcessingUnavailable()},
		"OrderCreationFailed":           {OrderCreationFailed()},
		"Internal":                      {Internal()},
		"UnknownSandboxScenario":        {UnknownSandboxScenario("nap", []string{"timeout", "server-error"})},
		"GatewayTimeout":                {GatewayTimeout()},
		"FromDomain":                    domain,
		"New":                           nil,
		"BadRequest":                    nil,
		"Unavailable":                   nil,
		"As":                            nil,
	}
}

// TestEveryConstructorIsInTheReferenceCheck keeps sent complete: an error function added to
// this package must be added there, and so its message to the reference.
func TestEveryConstructorIsInTheReferenceCheck(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var builders []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !fn.Name.IsExported() || fn.Type.Results == nil {
				continue
			}
			if star, ok := fn.Type.Results.List[0].Type.(*ast.StarExpr); ok {
				if id, ok := star.X.(*ast.Ident); ok && id.Name == "Error" {
					builders = append(builders, fn.Name.Name)
				}
			}
		}
	}
	known := sent()
	for _, name := range builders {
		if _, ok := known[name]; !ok {
			t.Errorf("%s builds an error the reference check does not know: add it to sent()", name)
		}
	}
	for name := range known {
		if !slices.Contains(builders, name) {
			t.Errorf("sent() names %s, which this package no longer has", name)
		}
	}
}

// reserved are the messages the contract defines that this server does not send today (its
// validation answers with more precise ones): the reference lists them as reserved, and they are
// held to it here rather than kept as constructors nothing calls.
func reserved() []*Error {
	const p = "10000000000001"
	return []*Error{
		New(http.StatusBadRequest, fmt.Sprintf("Product %s is open-denomination and requires a price.", p)),
		New(http.StatusBadRequest, "The order could not be placed. Check your request and try again."),
		New(http.StatusUnprocessableEntity, fmt.Sprintf("Product %s is not available for purchase.", p)),
	}
}

// TestEveryMessageSentIsInTheReference: each error this package can answer with, and each
// reserved one, matches a message of the reference, with its status.
func TestEveryMessageSentIsInTheReference(t *testing.T) {
	rows := readReference(t)
	reported := map[Error]bool{}
	quoted := sent()
	quoted["reserved"] = reserved()
	for name, errs := range quoted {
		for _, e := range errs {
			if reported[*e] {
				continue
			}
			reported[*e] = true
			if !slices.ContainsFunc(rows, func(d documented) bool {
				return d.status == e.Status && d.pattern.MatchString(e.Message)
			}) {
				t.Errorf("%s: %d %q is not in docs/partner-api.md", name, e.Status, e.Message)
			}
		}
	}
}

// TestEveryMessageInTheReferenceIsSent: each message the reference quotes is one this package
// builds, with the same status, or one the HTTP layer writes itself (its text then appears in
// apiserver's source, around the placeholders).
func TestEveryMessageInTheReferenceIsSent(t *testing.T) {
	all := reserved()
	for _, errs := range sent() {
		all = append(all, errs...)
	}
	literals := sourceLiterals(t, "..")
	for _, d := range readReference(t) {
		if slices.ContainsFunc(all, func(e *Error) bool { return e.Status == d.status && d.pattern.MatchString(e.Message) }) {
			continue
		}
		for _, fixed := range placeholder.Split(d.message, -1) {
			if fixed != "" && !slices.ContainsFunc(literals, func(l string) bool { return strings.Contains(l, fixed) }) {
				t.Errorf("docs/partner-api.md quotes %d %q, which the server never sends (%q is in no message)",
					d.status, d.message, fixed)
				break
			}
		}
	}
}

// sourceLiterals are the string literals of the non-test Go files under dir, with a %q verb
// written as the quotes it prints.
func sourceLiterals(t *testing.T, dir string) []string {
	t.Helper()
	var literals []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					literals = append(literals, strings.ReplaceAll(s, "%q", `"%q"`))
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatalf("read apiserver's source: %v", err)
	}
	if len(literals) == 0 {
		t.Fatal(errors.New("no string literals found in apiserver's source"))
	}
	return literals
}
