package apiserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// The generator's run length: CONTRACT_CASES requests per document (make fuzz raises it), drawn
// from CONTRACT_SEED (random when unset, and printed when a case fails, to draw them again).
const (
	contractCasesEnv    = "CONTRACT_CASES"
	contractSeedEnv     = "CONTRACT_SEED"
	defaultContractCase = 300
)

// TestContractGenerator draws requests from every operation of the documents each environment
// serves (v2 and v1, sandbox and production) and holds the server to them: a request the
// document admits is never refused as invalid (400), one that breaks exactly one of the
// document's rules is refused (400 in the contract's shape, naming what was wrong; 404 for a
// path parameter outside its pattern), and every answer's status, headers, content type and
// body are the document's. It follows the documents' links, so orders placed are read back.
func TestContractGenerator(t *testing.T) {
	t.Parallel()
	seed, cases := contractRunLength(t)
	s := newStack(t, stackOptions{databaseURL: storetest.New(t).URL})
	fx := newContractFixture(t, s)
	for i, target := range fx.targets(t) {
		t.Run(target.env+target.prefix, func(t *testing.T) {
			run := fx.newRun(t, target, seed, uint64(i))
			run.run(t, cases)
			reportFindings(t, seed, run.findings)
		})
	}
}

// TestContractGeneratorCatchesPlantedMismatches runs the generator against documents changed to
// say what the servers do not: it must find each change, or it has stopped checking something.
func TestContractGeneratorCatchesPlantedMismatches(t *testing.T) {
	t.Parallel()
	seed, _ := contractRunLength(t)
	s := newStack(t, stackOptions{databaseURL: storetest.New(t).URL})
	fx := newContractFixture(t, s)
	cases := []struct {
		name, env, prefix, operation string
		plant                        func(*openapi3.T)
		want                         string
	}{
		{"a bound dropped", "production", "/v2", "listWebhookEvents", func(d *openapi3.T) {
			d.Paths.Value("/webhooks/events").Get.Parameters.GetByInAndName("query", "limit").Schema.Value.Max = nil
		}, "limit"},
		{"a pattern loosened", "sandbox", "/v2", "placeOrder", func(d *openapi3.T) {
			d.Components.Schemas["PlaceOrder"].Value.Properties["currency"].Value.Pattern = "^[A-Za-z]{2,4}$"
		}, "currency"},
		{"a format dropped", "production", "/v2", "listOrders", func(d *openapi3.T) {
			for _, v := range d.Paths.Value("/orders").Get.Parameters.GetByInAndName("query", "from").Schema.Value.AnyOf {
				v.Value.Format = ""
			}
		}, "from"},
		{"a requirement dropped", "sandbox", "/v2", "placeOrder", func(d *openapi3.T) {
			d.Components.Schemas["OrderLine"].Value.AnyOf = nil
		}, "productCode"},
		{"a response field renamed", "production", "/v1", "getCatalog", func(d *openapi3.T) {
			catalog := d.Paths.Value("/catalog").Get.Responses.Status(200).Value.Content.Get("application/json").Schema.Value
			catalog.Required = append(catalog.Required, "catalogName")
		}, "catalogName"},
		{"a header value the server refuses", "sandbox", "/v2", "getWallet", func(d *openapi3.T) {
			p := d.Components.Parameters["SandboxScenario"].Value.Schema.Value
			p.Pattern = strings.Replace(p.Pattern, ")$", "|slow)$", 1)
		}, "X-Sandbox-Scenario"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var target contractTarget
			for _, tg := range fx.targets(t) {
				if tg.env == tc.env && tg.prefix == tc.prefix {
					target = tg
				}
			}
			target.doc = fx.load(t, target.raw, tc.plant)
			run := fx.newRun(t, target, seed, uint64(100+i))
			run.only = tc.operation
			// Each planted difference is met by about one request in forty of its operation.
			run.run(t, 400)
			for _, f := range run.findings {
				if strings.Contains(f, tc.want) {
					t.Logf("found (seed %d): %s", seed, f)
					return
				}
			}
			t.Fatalf("seed %d: no finding names %q after the document was changed; findings: %q", seed, tc.want, run.findings)
		})
	}
}

func contractRunLength(t *testing.T) (seed uint64, cases int) {
	t.Helper()
	seed = rand.Uint64()
	if v := os.Getenv(contractSeedEnv); v != "" {
		parsed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", contractSeedEnv, v, err)
		}
		seed = parsed
	}
	cases = defaultContractCase
	if v := os.Getenv(contractCasesEnv); v != "" {
		parsed, err := strconv.Atoi(v)
		if err != nil || parsed < 1 {
			t.Fatalf("%s=%q: want a positive count", contractCasesEnv, v)
		}
		cases = parsed
	}
	return seed, cases
}

func reportFindings(t *testing.T, seed uint64, findings []string) {
	t.Helper()
	if len(findings) == 0 {
		return
	}
	shown := findings[:min(len(findings), 40)]
	t.Errorf("%d differences between the document and the server (%s=%d draws the same requests):\n%s",
		len(findings), contractSeedEnv, seed, strings.Join(shown, "\n"))
}

// contractFixture is one partner with keys and bearer tokens of both environments, the test
// catalog and funded wallets, on a stack of both environments.
type contractFixture struct {
	s *stack
	// client is s's client: every answer is held to the served documents as well as to the
	// document a run draws from, which a planted test may have changed.
	client *http.Client
	keys   map[string]string
	hints  map[string]map[string][]any
}

func newContractFixture(t *testing.T, s *stack) *contractFixture {
	t.Helper()
	ns := "t-contract-" + strconv.FormatUint(rand.Uint64()%1e9, 36)
	c, products := testCatalog(ns)
	funds := []v1alpha1.TopUp{
		testfixture.TopUp("fund-eur", "EUR", "1000000.00"), testfixture.TopUp("fund-gbp", "GBP", "1000000.00"),
	}
	tn, err := testfixture.Onboard(context.Background(), s.prov, partnerOf(ns, "gen"),
		testfixture.WithCatalog(c, products...),
		testfixture.WithKeys(testfixture.APIKeyIn("sandbox"), testfixture.APIKeyIn("production"),
			testfixture.BearerTokenIn("sandbox"), testfixture.BearerTokenIn("production")),
		testfixture.WithBalance("sandbox", "", funds...), testfixture.WithBalance("production", "", funds...))
	if err != nil {
		t.Fatal(err)
	}
	codes := []any{}
	for _, p := range products {
		codes = append(codes, p.ProductCode)
	}
	common := map[string][]any{
		"currency": {"EUR", "GBP", "eur"},
		"country":  {"de", "gb", "DE,GB"},
		"ean":      {"5901234123457"},
		"sku":      {"DE-EN-10000000000001", "DE-DE-10000000000001", "GB-EN-10000000000004"},
		"price":    {int64(2000), int64(899), int64(1000), int64(2500)},
		"quantity": {int64(1), int64(2)},
	}
	fx := &contractFixture{s: s, client: s.client(t), keys: tn.Keys, hints: map[string]map[string][]any{}}
	for _, env := range []string{"sandbox", "production"} {
		h := map[string][]any{}
		for k, v := range common {
			h[k] = v
		}
		h["productCode"] = slices.Clone(codes)
		if env == "sandbox" {
			h["productCode"] = append(h["productCode"], "99000000000001", "99000000000002", "99000000000004")
		}
		h["productId"] = h["productCode"]
		fx.hints[env] = h
	}
	return fx
}

// contractTarget is one document as one environment serves it.
type contractTarget struct {
	env, prefix string
	raw         []byte
	doc         *openapi3.T
}

func (fx *contractFixture) targets(t *testing.T) []contractTarget {
	t.Helper()
	var out []contractTarget
	for _, env := range []string{"sandbox", "production"} {
		for _, prefix := range []string{"/v2", "/v1"} {
			resp, err := fx.client.Get(fx.s.baseURL[env] + prefix + "/openapi.json")
			if err != nil {
				t.Fatal(err)
			}
			raw, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s %s/openapi.json: %d %v", env, prefix, resp.StatusCode, err)
			}
			out = append(out, contractTarget{env: env, prefix: prefix, raw: raw, doc: fx.load(t, raw, nil)})
		}
	}
	return out
}

// load parses a served document, changed by plant when set.
func (fx *contractFixture) load(t *testing.T, raw []byte, plant func(*openapi3.T)) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if plant != nil {
		plant(doc)
	}
	return doc
}

func (fx *contractFixture) newRun(t *testing.T, target contractTarget, seed, stream uint64) *contractRun {
	t.Helper()
	doc := target.doc
	doc.Servers = openapi3.Servers{{URL: target.prefix}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(seed, stream))
	key := fx.keys[target.env]
	if target.prefix == "/v1" {
		key = "Bearer " + fx.keys["bearer:"+target.env]
	}
	hints := map[string][]any{}
	for k, v := range fx.hints[target.env] {
		hints[k] = v
	}
	return &contractRun{fx: fx, target: target, router: router, key: key, rnd: rnd,
		gen: &schemaGen{rnd: rnd, hints: hints}, linked: map[string][]any{}}
}

// contractRun draws and checks the requests of one document.
type contractRun struct {
	fx       *contractFixture
	target   contractTarget
	router   routers.Router
	key      string
	rnd      *rand.Rand
	gen      *schemaGen
	findings []string
	// only, when set, is the one operation drawn.
	only string
	// linked holds the values the documents' links carried to "operationId parameter", from
	// the answers so far.
	linked map[string][]any
}

// operation is one method of one path of the document.
type operation struct {
	method, path string
	op           *openapi3.Operation
	params       openapi3.Parameters
}

func (r *contractRun) operations() []operation {
	var ops []operation
	for _, path := range r.target.doc.Paths.InMatchingOrder() {
		item := r.target.doc.Paths.Value(path)
		for _, method := range sortedKeys(item.Operations()) {
			op := item.Operations()[method]
			params := slices.Clone(item.Parameters)
			params = append(params, op.Parameters...)
			ops = append(ops, operation{method: method, path: path, op: op, params: params})
		}
	}
	slices.SortFunc(ops, func(a, b operation) int { return strings.Compare(a.path+a.method, b.path+b.method) })
	return ops
}

// request is one drawn request and what the document says of it.
type request struct {
	op     operation
	path   map[string]string
	query  url.Values
	header http.Header
	body   any
	// broken says which rule the request breaks ("" for none), where names the parameter or
	// field, and status is what the contract answers it.
	broken, where string
	status        int
	// inWords: the rule broken is one the contract states in words, which no schema can.
	inWords bool
	// forced is a sandbox scenario the request asks for, whose answer is the scenario's.
	forced bool
	// wantType is the JSON type a body field sent with another takes, which its refusal names.
	wantType string
	// bound is the numeric bound the value is beyond, which its refusal names.
	bound string
}

func (q request) String() string {
	body, _ := json.Marshal(q.body)
	s := fmt.Sprintf("%s %s path=%v query=%s header=%v", q.op.method, q.op.path, q.path, q.query.Encode(), q.header)
	if q.body != nil {
		s += " body=" + string(body)
	}
	if q.broken != "" {
		s += fmt.Sprintf(" (breaks %s of %s)", q.broken, q.where)
	}
	return s
}

func (r *contractRun) run(t *testing.T, cases int) {
	t.Helper()
	ops := slices.DeleteFunc(r.operations(), func(op operation) bool {
		return r.only != "" && op.op.OperationID != r.only
	})
	for i := range cases {
		op := ops[r.rnd.IntN(len(ops))]
		q := r.validRequest(op, false)
		if r.rnd.IntN(2) == 0 {
			if broken, ok := r.break1(q); ok {
				q = broken
			}
		}
		r.check(t, i, q)
	}
}

// validRequest draws a request the document admits. linkedOnly leaves out the optional
// parameters, to follow a link.
func (r *contractRun) validRequest(op operation, linkedOnly bool) request {
	q := request{op: op, path: map[string]string{}, query: url.Values{}, header: http.Header{}}
	for _, p := range op.params {
		param := p.Value
		if values := r.linked[op.op.OperationID+" "+param.Name]; len(values) > 0 && param.In == "path" && r.rnd.IntN(2) == 0 {
			r.set(&q, param, values[r.rnd.IntN(len(values))])
			continue
		}
		if r.isLinkTarget(op.op.OperationID, param.Name) && param.In == "query" {
			// An opaque value such as a cursor is the server's to issue, through a link.
			continue
		}
		include := param.Required || (param.In == "query" && r.rnd.IntN(2) == 0) ||
			(param.In == "header" && r.rnd.IntN(4) == 0)
		if linkedOnly && !param.Required {
			include = false
		}
		if include {
			v := r.gen.valid(param.Name, param.Schema)
			for param.In == "header" && !headerValue(fmt.Sprint(v)) {
				v = r.gen.valid(param.Name, param.Schema)
			}
			r.set(&q, param, v)
		}
	}
	applyRelations(r, &q)
	if body := op.op.RequestBody; body != nil && body.Value.Required {
		q.body = r.gen.valid("", body.Value.Content.Get("application/json").Schema)
	}
	q.forced = q.header.Get("X-Sandbox-Scenario") != ""
	return q
}

func (r *contractRun) set(q *request, p *openapi3.Parameter, v any) {
	text := fmt.Sprint(v)
	switch p.In {
	case "path":
		q.path[p.Name] = text
	case "query":
		q.query.Set(p.Name, text)
	case "header":
		q.header.Set(p.Name, text)
	}
}

// headerValue says whether HTTP can carry v as a header's value: no control character but tab.
func headerValue(v string) bool {
	return !strings.ContainsFunc(v, func(r rune) bool { return (r < 0x20 && r != '\t') || r == 0x7f })
}

// isLinkTarget says whether a link carries a value of an answer to the parameter: a value such
// as a cursor, which is the server's to issue.
func (r *contractRun) isLinkTarget(operationID, param string) bool {
	for _, link := range r.links() {
		if expr, ok := link.Parameters[param]; ok && link.OperationID == operationID &&
			strings.HasPrefix(fmt.Sprint(expr), "$response.") {
			return true
		}
	}
	return false
}

func (r *contractRun) links() []*openapi3.Link {
	var out []*openapi3.Link
	for _, op := range r.operations() {
		for _, resp := range op.op.Responses.Map() {
			for _, l := range resp.Value.Links {
				out = append(out, l.Value)
			}
		}
	}
	return out
}

// relation is a rule between two parameters that no schema states; the documents say it in
// words, and the generator keeps to it (or breaks it on purpose).
type relation struct {
	operationID string
	// before: a's instant is earlier than b's (b defaults to now); oneOf: a or b is sent.
	kind, a, b string
}

var parameterRelations = []relation{
	{"listOrders", "before", "from", "to"},
	{"listWalletTransactions", "before", "from", "to"},
	{"replayWebhookEvents", "before", "since", "until"},
	{"getLegacyProduct", "oneOf", "ean", "sku"},
}

func applyRelations(r *contractRun, q *request) {
	for _, rel := range parameterRelations {
		if rel.operationID != q.op.op.OperationID {
			continue
		}
		switch rel.kind {
		case "before":
			a, aok := parseInstant(q.query.Get(rel.a))
			b, bok := parseInstant(q.query.Get(rel.b))
			if aok && bok && !a.Before(b) {
				av, bv := q.query.Get(rel.a), q.query.Get(rel.b)
				if a.Equal(b) {
					q.query.Del(rel.b)
				} else {
					q.query.Set(rel.a, bv)
					q.query.Set(rel.b, av)
				}
			}
		case "oneOf":
			// Sent blank, either is missing.
			for strings.TrimSpace(q.query.Get(rel.a)) == "" && strings.TrimSpace(q.query.Get(rel.b)) == "" {
				name := []string{rel.a, rel.b}[r.rnd.IntN(2)]
				p := q.op.params.GetByInAndName("query", name)
				q.query.Set(name, fmt.Sprint(r.gen.valid(name, p.Schema)))
			}
		}
	}
}

func parseInstant(s string) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, true
	}
	t, err := time.Parse(time.DateOnly, s)
	return t, err == nil
}

// break1 changes a valid request to break exactly one rule of the document; false when the
// operation has no rule to break.
func (r *contractRun) break1(q request) (request, bool) {
	type change struct {
		where, rule string
		status      int
		apply       func(*request)
		inWords     bool
		wantType    string
		bound       string
	}
	var changes []change
	for _, p := range q.op.params {
		param := p.Value
		if r.isLinkTarget(q.op.op.OperationID, param.Name) && param.In == "query" {
			continue
		}
		status := 400
		if param.In == "path" {
			status = 404
		}
		for _, v := range r.gen.violations(param.Name, param.Schema, true) {
			if param.In == "path" && fmt.Sprint(v.value) == "" {
				continue // an empty segment is another path
			}
			if text := fmt.Sprint(v.value); param.In == "header" && strings.TrimSpace(text) != text {
				continue // HTTP drops the whitespace around a header's value (RFC 9110, 5.5)
			}
			// The validator takes an empty query value for an absent one; the contract judges it
			// by the parameter's rule (docs/partner-api.md, "Empty values and null").
			empty := param.In == "query" && fmt.Sprint(v.value) == ""
			changes = append(changes, change{param.Name, v.rule, status, func(q *request) { r.set(q, param, v.value) },
				empty, "", v.bound})
		}
		if param.Required && param.In != "path" {
			changes = append(changes, change{param.Name, "required", 400, func(q *request) { q.query.Del(param.Name) },
				false, "", ""})
		}
	}
	for _, rel := range parameterRelations {
		if rel.operationID != q.op.op.OperationID {
			continue
		}
		rel := rel
		switch rel.kind {
		case "before":
			changes = append(changes, change{rel.b, "later than " + rel.a, 400, func(q *request) {
				t := r.gen.instant()
				q.query.Set(rel.a, r.gen.dateTime(t))
				q.query.Set(rel.b, r.gen.dateTime(t.Add(-time.Duration(r.rnd.IntN(3))*time.Hour)))
			}, true, "", ""})
		case "oneOf":
			changes = append(changes, change{rel.a, "one of " + rel.a + " and " + rel.b, 400, func(q *request) {
				q.query.Del(rel.a)
				q.query.Del(rel.b)
			}, true, "", ""})
		}
	}
	if q.body != nil {
		schema := q.op.op.RequestBody.Value.Content.Get("application/json").Schema
		for _, bc := range r.bodyViolations(nil, schema, q.body) {
			apply := func(q *request) { q.body = setAt(q.body, bc.at, bc.value) }
			changes = append(changes, change{bc.where, bc.rule, 400, apply, false, bc.wantType, bc.bound})
		}
	}
	if len(changes) == 0 {
		return q, false
	}
	c := changes[r.rnd.IntN(len(changes))]
	broken := q
	broken.query, broken.header = cloneValues(q.query), q.header.Clone()
	broken.path = map[string]string{}
	for k, v := range q.path {
		broken.path[k] = v
	}
	// A forced scenario would answer before the rule is judged.
	broken.header.Del("X-Sandbox-Scenario")
	broken.forced = false
	c.apply(&broken)
	broken.broken, broken.where, broken.status, broken.inWords = c.rule, c.where, c.status, c.inWords
	broken.wantType, broken.bound = c.wantType, c.bound
	return broken, true
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}

// bodyChange breaks one rule at one place of a body: at is the path to it, value the new
// value (deleted marks a field left out).
type bodyChange struct {
	at          []any
	where, rule string
	value       any
	// wantType is the JSON type of the field, for a change of its type; bound the bound a
	// value beyond it breaks.
	wantType, bound string
}

type deletedField struct{}

var deleted = deletedField{}

// bodyViolations lists the ways to break one rule of a body at or below at.
func (r *contractRun) bodyViolations(at []any, ref *openapi3.SchemaRef, value any) []bodyChange {
	s := ref.Value
	where := fieldName(at)
	var out []bodyChange
	for _, v := range r.gen.violations(lastName(at), ref, false) {
		out = append(out, bodyChange{at: at, where: where, rule: v.rule, value: v.value, wantType: r.gen.typeOf(s),
			bound: v.bound})
	}
	if len(at) > 0 {
		out = append(out, bodyChange{at: at, where: where, rule: "null", value: nil})
	}
	switch v := value.(type) {
	case map[string]any:
		for _, name := range sortedKeys(v) {
			out = append(out, r.fieldViolations(at, s, v, name)...)
		}
	case []any:
		if len(v) > 0 && s.Items != nil {
			out = append(out, r.bodyViolations(append(slices.Clone(at), 0), s.Items, v[0])...)
		}
	}
	return out
}

// fieldViolations lists the ways to break one rule through the field name of object obj.
func (r *contractRun) fieldViolations(at []any, s *openapi3.Schema, obj map[string]any, name string) []bodyChange {
	var out []bodyChange
	child := append(slices.Clone(at), name)
	without := maps(obj)
	delete(without, name)
	if s.VisitJSON(without) != nil {
		out = append(out, bodyChange{at: child, where: fieldName(child), rule: "required", value: deleted})
	}
	if text, ok := obj[name].(string); ok && strings.TrimSpace(text) != "" {
		// A blank value the field's own schema admits may break a rule of the object, such as
		// an anyOf that needs one of two fields present and not blank.
		blank := maps(obj)
		blank[name] = " "
		own := s.Properties[name]
		if s.VisitJSON(blank) != nil && (own == nil || own.Value.VisitJSON(" ") == nil) {
			out = append(out, bodyChange{at: child, where: fieldName(child), rule: "anyOf", value: " "})
		}
	}
	prop := s.Properties[name]
	if prop == nil {
		prop = s.AdditionalProperties.Schema
	}
	for _, branch := range append(slices.Clone(s.AnyOf), s.OneOf...) {
		if p := branch.Value.Properties[name]; prop == nil && p != nil {
			prop = p
		}
	}
	if prop != nil {
		out = append(out, r.bodyViolations(child, prop, obj[name])...)
	}
	return out
}

func fieldName(at []any) string {
	var b strings.Builder
	for _, seg := range at {
		switch s := seg.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", s)
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s)
		}
	}
	return b.String()
}

func lastName(at []any) string {
	for i := len(at) - 1; i >= 0; i-- {
		if s, ok := at[i].(string); ok {
			return s
		}
	}
	return ""
}

// setAt returns root with the value at path replaced (copying what it changes).
func setAt(root any, at []any, value any) any {
	if len(at) == 0 {
		return value
	}
	switch v := root.(type) {
	case map[string]any:
		out := maps(v)
		key := at[0].(string)
		next := setAt(v[key], at[1:], value)
		if next == deleted {
			delete(out, key)
		} else {
			out[key] = next
		}
		return out
	case []any:
		out := slices.Clone(v)
		out[at[0].(int)] = setAt(v[at[0].(int)], at[1:], value)
		return out
	}
	return root
}

// businessRefusals are the 400s a request the document admits may still get: rules that depend
// on the catalog (prices, currencies, availability, bounds of open products) or on what the
// server issued, which no schema of the document can state.
var businessRefusals = []*regexp.Regexp{
	regexp.MustCompile(`^Product \S+ price mismatch: expected \d+$`),
	regexp.MustCompile(`^Order price mismatch: expected total \d+$`),
	regexp.MustCompile(`^Product \S+ is priced in [A-Z]{3}, not .+$`),
	regexp.MustCompile(`^Product \S+ cannot be ordered in the requested currency\.$`),
	regexp.MustCompile(`^Product \S+ is not available for ordering with the supplied country or currency\.$`),
	regexp.MustCompile(`^Product \S+ is not currently available\.$`),
	regexp.MustCompile(`^Product \S+ is open-denomination and requires a price$`),
	regexp.MustCompile(`^Price for product \S+ (is below the minimum allowed|exceeds the maximum allowed) \(\d+\)$`),
	regexp.MustCompile(`^Price for product \S+ must be \d+ plus a multiple of \d+$`),
	// A sku that is not one of the product's languages.
	regexp.MustCompile(`^The order could not be validated\. Check product codes, prices, and currency\.$`),
}

func businessRefusal(message string) bool {
	return slices.ContainsFunc(businessRefusals, func(re *regexp.Regexp) bool { return re.MatchString(message) })
}

// check sends q and holds the answer to the document.
func (r *contractRun) check(t *testing.T, i int, q request) {
	t.Helper()
	req, sent := r.httpRequest(t, q)
	resp, err := r.fx.client.Do(req)
	if err != nil {
		t.Fatalf("case %d: %v", i, err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("case %d: %v", i, err)
	}
	finding := func(format string, args ...any) {
		r.findings = append(r.findings, fmt.Sprintf("case %d, %s: %s\n    got %d %s", i, q,
			fmt.Sprintf(format, args...), resp.StatusCode, truncate(raw)))
	}
	input := r.validationInput(req, sent)
	if input == nil {
		finding("the document has no route for the request")
		return
	}
	reqErr := openapi3filter.ValidateRequest(context.Background(), input)
	switch {
	case q.broken == "" && reqErr != nil:
		t.Fatalf("case %d: the generator drew a request its document rejects: %s: %v", i, q, reqErr)
	case q.broken != "" && !q.inWords && reqErr == nil:
		t.Fatalf("case %d: the generator broke a rule the document does not have: %s", i, q)
	}
	respErr := openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: input, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(raw)), Options: &openapi3filter.Options{IncludeResponseStatus: true},
	})
	if respErr != nil {
		finding("the answer is not the document's: %v", respErr)
	}
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	message, _ := body["message"].(string)
	switch {
	case q.broken != "":
		label := map[int]string{400: "Bad Request", 404: "Not Found"}[q.status]
		if resp.StatusCode != q.status || body["error"] != label || body["statusCode"] != float64(q.status) {
			finding("the document refuses it, want %d %s", q.status, label)
		} else if q.status == 400 && q.broken != "null" && !mentions(message, q.where) {
			// null answers one of the contract's older messages, which may not change within
			// /v2 and do not all name the field.
			finding("the refusal does not name %s", q.where)
		} else if q.broken == "type" && q.body != nil && q.where != "" && !namesType(message, q.wantType) {
			finding("the refusal does not name the type %s takes (%s)", q.where, q.wantType)
		} else if q.bound != "" && q.status == 400 && !strings.Contains(message, q.bound) {
			finding("the refusal does not name the bound of %s (%s)", q.where, q.bound)
		}
	case resp.StatusCode == 400 && !businessRefusal(message):
		finding("the document admits it, the server refused it as invalid")
	case q.forced:
		// A sandbox scenario answers as it says, with a status the document lists.
	case resp.StatusCode >= 500:
		finding("the document admits it, the server failed")
	case resp.StatusCode < 300 && respErr == nil:
		r.follow(t, i, q, req, sent, resp, raw)
	}
}

// mentions says whether a refusal names the parameter or one of the fields on the way to it, in
// the contract's words: a line is an item of orderProducts, productId a synonym of productCode.
func mentions(message, where string) bool {
	if where == "" {
		return true // the body as a whole
	}
	synonyms := map[string]string{"orderproducts": "line", "productid": "productcode"}
	message = strings.ToLower(message)
	for _, part := range strings.FieldsFunc(where, func(r rune) bool { return r == '.' || r == '[' || r == ']' }) {
		if _, err := strconv.Atoi(part); err == nil {
			continue
		}
		part = strings.ToLower(part)
		if strings.Contains(message, part) || (synonyms[part] != "" && strings.Contains(message, synonyms[part])) {
			return true
		}
	}
	return false
}

// namesType says whether a refusal names the JSON type a field takes.
func namesType(message, jsonType string) bool {
	return strings.Contains(message, jsonType)
}

func truncate(raw []byte) string {
	if len(raw) > 300 {
		return string(raw[:300]) + "…"
	}
	return string(raw)
}

func (r *contractRun) httpRequest(t *testing.T, q request) (*http.Request, []byte) {
	t.Helper()
	path := q.op.path
	for name, v := range q.path {
		path = strings.ReplaceAll(path, "{"+name+"}", url.PathEscape(v))
	}
	target := r.fx.s.baseURL[r.target.env] + r.target.prefix + path
	if len(q.query) > 0 {
		target += "?" + q.query.Encode()
	}
	var sent []byte
	var reader io.Reader
	if q.body != nil {
		var err error
		if sent, err = json.Marshal(q.body); err != nil {
			t.Fatal(err)
		}
		reader = bytes.NewReader(sent)
	}
	req, err := http.NewRequest(strings.ToUpper(q.op.method), target, reader)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = q.header.Clone()
	if q.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer, ok := strings.CutPrefix(r.key, "Bearer "); ok {
		req.Header.Set("Authorization", "Bearer "+bearer)
	} else {
		req.Header.Set("x-api-key", r.key)
	}
	return req, sent
}

func (r *contractRun) validationInput(req *http.Request, sent []byte) *openapi3filter.RequestValidationInput {
	check := req.Clone(context.Background())
	check.URL.Host, check.URL.Scheme, check.Host = "", "", ""
	check.Body = io.NopCloser(bytes.NewReader(sent))
	route, params, err := r.router.FindRoute(check)
	if err != nil {
		return nil
	}
	return &openapi3filter.RequestValidationInput{Request: check, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
}

// follow takes the links of a successful answer: it keeps the values they carry for later
// requests, and sends the linked request at once, which must succeed.
func (r *contractRun) follow(
	t *testing.T, i int, q request, req *http.Request, sent []byte, resp *http.Response, raw []byte,
) {
	t.Helper()
	ref := q.op.op.Responses.Status(resp.StatusCode)
	if ref == nil {
		return
	}
	var respBody, reqBody any
	_ = json.Unmarshal(raw, &respBody)
	_ = json.Unmarshal(sent, &reqBody)
	for _, name := range sortedKeys(ref.Value.Links) {
		link := ref.Value.Links[name].Value
		var target *operation
		for _, op := range r.operations() {
			if op.op.OperationID == link.OperationID {
				target = &op
			}
		}
		if target == nil {
			r.findings = append(r.findings, fmt.Sprintf("case %d: link %s of %s names no operation %q",
				i, name, q.op.op.OperationID, link.OperationID))
			continue
		}
		values := map[string]any{}
		for param, expr := range link.Parameters {
			v, ok := runtimeValue(fmt.Sprint(expr), req, respBody, reqBody, resp.Header)
			if !ok {
				break
			}
			values[param] = v
		}
		if len(values) < len(link.Parameters) {
			continue // e.g. no nextCursor on the last page
		}
		for param, v := range values {
			key := link.OperationID + " " + param
			r.linked[key] = append(r.linked[key][max(0, len(r.linked[key])-20):], v)
		}
		followed := r.validRequest(*target, true)
		followed.header.Del("X-Sandbox-Scenario")
		followed.forced = false
		for param, v := range values {
			if p := target.params.GetByInAndName("path", param); p != nil {
				r.set(&followed, p, v)
			} else if p := target.params.GetByInAndName("query", param); p != nil {
				r.set(&followed, p, v)
			}
		}
		freq, _ := r.httpRequest(t, followed)
		fresp, err := r.fx.client.Do(freq)
		if err != nil {
			t.Fatalf("case %d, link %s: %v", i, name, err)
		}
		fraw, _ := io.ReadAll(fresp.Body)
		fresp.Body.Close()
		if fresp.StatusCode >= 300 {
			r.findings = append(r.findings, fmt.Sprintf("case %d: link %s of %s %d leads to %s, which answers %d %s",
				i, name, q.op.op.OperationID, resp.StatusCode, followed, fresp.StatusCode, truncate(fraw)))
		}
	}
}

// runtimeValue evaluates an OpenAPI runtime expression of the forms the documents use.
func runtimeValue(expr string, req *http.Request, respBody, reqBody any, header http.Header) (any, bool) {
	switch {
	case strings.HasPrefix(expr, "$response.body#"):
		return pointer(respBody, strings.TrimPrefix(expr, "$response.body#"))
	case strings.HasPrefix(expr, "$request.body#"):
		return pointer(reqBody, strings.TrimPrefix(expr, "$request.body#"))
	case strings.HasPrefix(expr, "$response.header."):
		v := header.Get(strings.TrimPrefix(expr, "$response.header."))
		return v, v != ""
	case strings.HasPrefix(expr, "$request.query."):
		v := req.URL.Query().Get(strings.TrimPrefix(expr, "$request.query."))
		return v, v != ""
	}
	return nil, false
}

func pointer(doc any, ptr string) (any, bool) {
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v := doc.(type) {
		case map[string]any:
			doc = v[tok]
		case []any:
			n, err := strconv.Atoi(tok)
			if err != nil || n >= len(v) {
				return nil, false
			}
			doc = v[n]
		default:
			return nil, false
		}
	}
	return doc, doc != nil
}
