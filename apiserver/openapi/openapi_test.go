package openapi_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/uuid"

	"github.com/codeport/codeport/apiserver/openapi"
	"github.com/codeport/codeport/internal/apitime"
	"github.com/codeport/codeport/internal/notify"
)

// TestRendererIsTheLockedRelease: the embedded renderer is byte for byte the file of the release
// ui/scalar.lock records, as `make docs-ui-verify` also checks without Go.
func TestRendererIsTheLockedRelease(t *testing.T) {
	if err := openapi.VerifyRenderer(); err != nil {
		t.Fatal(err)
	}
	if pkg, version := openapi.RendererRelease(); pkg != "@scalar/api-reference" || version == "" {
		t.Fatalf("renderer release %q %q", pkg, version)
	}
}

// TestWithServersChangesOnlyServers: the served document is the kept one but for its servers, in
// the same key order (which is the order a renderer shows).
func TestWithServersChangesOnlyServers(t *testing.T) {
	for name, doc := range map[string][]byte{"v2": openapi.V2(), "v1": openapi.V1()} {
		server := openapi.Server{URL: "https://sandbox.example/" + name, Description: `a "quoted" one`}
		served, err := openapi.WithServers(doc, []openapi.Server{server})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var parsed struct{ Servers []openapi.Server }
		if err := json.Unmarshal(served, &parsed); err != nil {
			t.Fatalf("%s: served document is not JSON: %v", name, err)
		}
		if len(parsed.Servers) != 1 || parsed.Servers[0].URL != "https://sandbox.example/"+name {
			t.Errorf("%s: servers %+v", name, parsed.Servers)
		}
		before, _, _ := bytes.Cut(doc, []byte(`"servers"`))
		_, after, _ := bytes.Cut(doc, []byte(`"paths"`))
		if !bytes.HasPrefix(served, before) || !bytes.HasSuffix(served, after) {
			t.Errorf("%s: more than servers changed", name)
		}
	}
	if _, err := openapi.WithServers([]byte(`{"openapi": "3.1.0", "paths": {}}`), nil); err == nil ||
		!strings.Contains(err.Error(), "no top-level servers") {
		t.Errorf("a document without servers: %v", err)
	}
}

// TestDateTimeExamplesAsServed: every date-time in the documents' examples is written as the API
// writes instants (apitime.Layout: RFC 3339, UTC, milliseconds), so that a partner's parser
// built on the examples reads what the server sends.
func TestDateTimeExamplesAsServed(t *testing.T) {
	dateTime := regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T`)
	for name, raw := range map[string][]byte{"v2": openapi.V2(), "v1": openapi.V1()} {
		var doc any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		var walk func(value any, at string)
		walk = func(value any, at string) {
			switch v := value.(type) {
			case map[string]any:
				for key, inner := range v {
					walk(inner, at+"/"+key)
				}
			case []any:
				for i, inner := range v {
					walk(inner, at+"/"+strconv.Itoa(i))
				}
			case string:
				if !dateTime.MatchString(v) {
					return
				}
				parsed, err := time.Parse(time.RFC3339Nano, v)
				if err != nil || apitime.Of(parsed).String() != v {
					t.Errorf("%s %s: %q, want a date-time such as %q", name, at, v, apitime.Of(parsed))
				}
			}
		}
		walk(doc, "")
	}
}

// keysInOrder returns the keys of a JSON object in the order the document has them.
func keysInOrder(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// contractOrder is the order of statuses in the reference: successes, then the contract's error
// table (400, 401, 403, 404, 409, 422, 429, 502, 500) with the statuses it does not list where
// their numbers fall.
var contractOrder = []string{
	"202", "200", "304", "400", "401", "403", "404", "409", "413", "415", "422", "429", "502", "504", "500",
}

// TestResponsesInContractOrder: every operation lists its responses in the contract's order,
// which is the order the reference page shows them in.
func TestResponsesInContractOrder(t *testing.T) {
	for name, raw := range map[string][]byte{"v2": openapi.V2(), "v1": openapi.V1()} {
		var doc struct {
			Paths map[string]map[string]json.RawMessage `json:"paths"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		for path, item := range doc.Paths {
			for method, rawOp := range item {
				var op struct {
					Responses json.RawMessage `json:"responses"`
				}
				if strings.HasPrefix(method, "x-") || json.Unmarshal(rawOp, &op) != nil {
					continue // an extension of the path, such as the environments that serve it
				}
				codes := keysInOrder(t, op.Responses)
				last := -1
				for _, code := range codes {
					i := slices.Index(contractOrder, code)
					if i <= last {
						t.Errorf("%s %s %s: responses %v, want them in the order %v", name, method, path, codes, contractOrder)
						break
					}
					last = i
				}
			}
		}
	}
}

// TestWebhooksAreTheEventsRaised: the document's webhooks are the event types the service
// raises, in the contract's order, and a body the service sends validates against each.
func TestWebhooksAreTheEventsRaised(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(openapi.V2())
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Webhooks json.RawMessage `json:"webhooks"`
	}
	if err := json.Unmarshal(openapi.V2(), &raw); err != nil {
		t.Fatal(err)
	}
	if got := keysInOrder(t, raw.Webhooks); !slices.Equal(got, notify.EventTypes) {
		t.Fatalf("webhooks %v, want the events raised %v", got, notify.EventTypes)
	}
	bodies := map[string]any{
		notify.EventOrderCompleted: notify.OrderData{OrderID: uuid.New(), ExternalOrderCode: "po-1", Status: "completed",
			Metadata: map[string]string{"invoice": "1"}},
		notify.EventBalanceLow:     notify.BalanceData{Currency: "EUR", Balance: "85.50", Threshold: "100"},
		notify.EventCatalogUpdated: notify.CatalogData{Added: 1, Updated: 2, Removed: 3},
		notify.EventStockLow:       notify.StockData{ProductCode: "10000000000001", Available: 42, Threshold: 100},
	}
	for eventType, data := range bodies {
		body, err := json.Marshal(notify.Event{ID: "evt_1", Type: eventType, Environment: "sandbox",
			CreatedAt: apitime.Of(time.Now()), Data: data})
		if err != nil {
			t.Fatal(err)
		}
		var value any
		if err := json.Unmarshal(body, &value); err != nil {
			t.Fatal(err)
		}
		item := doc.Webhooks[eventType]
		if item == nil || item.Post == nil || item.Post.RequestBody == nil {
			t.Fatalf("webhook %s: no POST with a body", eventType)
		}
		schema := item.Post.RequestBody.Value.Content.Get("application/json").Schema.Value
		if err := schema.VisitJSON(value, openapi3.EnableJSONSchema2020()); err != nil {
			t.Errorf("a %s body the service sends does not match the document: %v\n%s", eventType, err, body)
		}
	}
}

// TestPatternsMeanTheSameEverywhere: a pattern is read by the partners' validators in
// ECMAScript's dialect and by the contract tests in Go's, whose \s and \S differ (Go's \s is
// ASCII alone, ECMAScript's Unicode's whitespace), so no pattern uses them; and "not all
// whitespace" is stated with the servers' whitespace, that of strings.TrimSpace: a value of
// no-break spaces is blank to both.
func TestPatternsMeanTheSameEverywhere(t *testing.T) {
	notBlank := map[string]*openapi3.Schema{}
	for name, raw := range map[string][]byte{"v2": openapi.V2(), "v1": openapi.V1()} {
		var doc any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		walkPatterns(doc, name, func(at, pattern string) {
			if strings.Contains(pattern, `\s`) || strings.Contains(pattern, `\S`) {
				t.Errorf("%s: pattern %q uses \\s or \\S, which validators read differently", at, pattern)
			}
			if strings.HasPrefix(pattern, "[^") && strings.HasSuffix(pattern, "]") {
				notBlank[at] = &openapi3.Schema{Pattern: pattern}
			}
		})
	}
	if len(notBlank) < 4 {
		t.Fatalf("found %d not-blank patterns (externalOrderCode twice, productCode, productId): %v",
			len(notBlank), notBlank)
	}
	for at, s := range notBlank {
		for r := rune(0); r <= 0xFFFF; r++ {
			if r >= 0xD800 && r <= 0xDFFF {
				continue
			}
			if admitted := s.VisitJSON(string(r)) == nil; admitted == unicode.IsSpace(r) {
				t.Errorf("%s: %U admitted %v, but the servers read it as whitespace: %v", at, r, admitted,
					unicode.IsSpace(r))
			}
		}
	}
}

func walkPatterns(v any, at string, visit func(at, pattern string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if p, ok := child.(string); ok && k == "pattern" {
				visit(at, p)
			} else if k != "examples" && k != "example" {
				walkPatterns(child, at+"/"+k, visit)
			}
		}
	case []any:
		for i, child := range v {
			walkPatterns(child, at+"/"+strconv.Itoa(i), visit)
		}
	}
}
