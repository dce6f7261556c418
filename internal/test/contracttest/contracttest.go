// Package contracttest holds the servers under test to the OpenAPI documents they serve: its
// http.RoundTripper validates every exchange a test makes through it against the document the
// server itself serves at /v2/openapi.json and /v1/openapi.json, the documents partners generate
// their clients from. Each server (scheme and host) is judged by its own documents, so a sandbox
// and a production server that document different things are each held to theirs.
package contracttest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Reporter receives the violations; *testing.T and *testing.B are Reporters.
type Reporter interface {
	Errorf(format string, args ...any)
}

// documented are the prefixes of the paths the documents describe, each with its document.
var documented = [...]string{"/v2", "/v1"}

// Contracts are the documents of the servers a test talks to, each server's fetched once, on its
// first exchange that a document could describe. One Contracts may be shared by many tests and
// goroutines, for as long as each address it met stays the same server (a harness's servers
// outlive a test, but a port of an ended one may be given to another).
type Contracts struct {
	documents *Documents
	mu        sync.Mutex
	servers   map[string]*served
	checked   atomic.Int64
}

// served are one server's routers, by documented prefix, once fetched.
type served struct {
	mu      sync.Mutex
	err     error
	routers map[string]routers.Router
}

// Documents are the documents servers served, each parsed, validated and routed once however
// many servers serve it: servers that differ only in the address their document names share
// one. Parsing the v2 document takes a second under the race detector; fetching it, milliseconds.
type Documents struct {
	mu     sync.Mutex
	parsed map[[sha256.Size]byte]*document
}

// document is one document, routed by path alone.
type document struct {
	once   sync.Once
	err    error
	router routers.Router
}

// NewDocuments returns an empty cache of documents.
func NewDocuments() *Documents { return &Documents{parsed: map[[sha256.Size]byte]*document{}} }

// Contracts returns Contracts that know no server yet and parse documents through d.
func (d *Documents) Contracts() *Contracts {
	return &Contracts{documents: d, servers: map[string]*served{}}
}

// New returns Contracts that know no server yet, with a cache of documents of their own.
func New() *Contracts { return NewDocuments().Contracts() }

// Wrap returns a copy of client (http.DefaultClient's settings when nil) whose exchanges are
// validated against the servers' documents, with violations reported to r.
func Wrap(r Reporter, client *http.Client) *http.Client { return New().Wrap(r, client) }

// Wrap returns a copy of client (http.DefaultClient's settings when nil) whose exchanges are
// validated against c's documents, with violations reported to r.
func (c *Contracts) Wrap(r Reporter, client *http.Client) *http.Client {
	wrapped := &http.Client{}
	if client != nil {
		*wrapped = *client
	}
	wrapped.Transport = c.Transport(r, wrapped.Transport)
	return wrapped
}

// Transport returns a RoundTripper sending through base (http.DefaultTransport when nil) that
// validates each exchange against c's documents and reports violations to r.
func (c *Contracts) Transport(r Reporter, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{contracts: c, report: r, base: base}
}

// Forget drops what c knows of the server at base (a URL whose scheme and host name it): its
// next exchange fetches the documents again, as a new release started on the same address
// serves its own.
func (c *Contracts) Forget(base string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if u, err := url.Parse(base); err == nil {
		delete(c.servers, u.Scheme+"://"+u.Host)
	}
}

// Load fetches the documents of the server at base (a URL whose scheme and host name it) now,
// rather than on its first exchange: a test that times the server's answers would count it.
func (c *Contracts) Load(base string) error {
	u, err := url.Parse(base)
	if err != nil {
		return fmt.Errorf("the server %q: %w", base, err)
	}
	origin := u.Scheme + "://" + u.Host
	if _, err := c.router(origin, http.DefaultTransport, documented[0]); err != nil {
		return fmt.Errorf("the documents of %s: %w", origin, err)
	}
	return nil
}

// Checked is the number of exchanges validated so far: a test can tell that its requests were
// held to a document rather than skipped as undescribed.
func (c *Contracts) Checked() int64 { return c.checked.Load() }

type transport struct {
	contracts *Contracts
	report    Reporter
	base      http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	prefix, described := describedBy(req.URL.Path)
	if !described {
		return t.base.RoundTrip(req)
	}
	var sent []byte
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		sent, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("read the request's body: %w", err)
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(sent))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(sent)), nil }
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(answer))
	if err != nil {
		// The caller reads what arrived and meets the error there; a torn answer is no violation.
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(answer), errReader{err}))
		return resp, nil //nolint:nilerr // the read error reaches the caller through the body
	}
	router, err := t.contracts.router(req.URL.Scheme+"://"+req.URL.Host, t.base, prefix)
	var unreachable *unreachableError
	if errors.As(err, &unreachable) {
		// The server went away after answering, as fault tests make it: asked again next time.
		return resp, nil
	}
	if err != nil {
		t.report.Errorf("%s %s: %d: %v", req.Method, req.URL.Path, resp.StatusCode, err)
		return resp, nil
	}
	routed, msg := check(router, req, sent, resp, answer)
	if msg != "" {
		t.report.Errorf("%s %s: %d: %s", req.Method, req.URL.Path, resp.StatusCode, msg)
	}
	if routed {
		t.contracts.checked.Add(1)
	}
	return resp, nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// describedBy is the prefix of the document that may describe path. Everything else is not
// checked: probes (/healthz, /readyz), /metrics, /docs and its renderer, the documents
// themselves, and paths no version of the API has.
func describedBy(path string) (string, bool) {
	for _, prefix := range documented {
		if rest, ok := strings.CutPrefix(path, prefix+"/"); ok && rest != "openapi.json" {
			return prefix, true
		}
	}
	return "", false
}

// check validates one exchange, and the request too when the server accepted it, and says what
// does not match. Routes the document lacks (a method or path it does not describe) are not
// checked (routed is false): the server's answers to them are its own, not the contract's.
func check(
	router routers.Router, req *http.Request, sent []byte, resp *http.Response, answer []byte,
) (routed bool, violation string) {
	ctx := context.Background()
	byPath := req.Clone(ctx)
	byPath.URL.Scheme, byPath.URL.Host, byPath.Host = "", "", ""
	byPath.Body = io.NopCloser(bytes.NewReader(sent))
	route, params, err := router.FindRoute(byPath)
	if err != nil {
		return false, ""
	}
	input := &openapi3filter.RequestValidationInput{Request: byPath, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if resp.StatusCode < http.StatusBadRequest {
		if err := openapi3filter.ValidateRequest(ctx, input); err != nil {
			return true, "the server accepted a request its document rejects: " + err.Error()
		}
	}
	err = openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
		RequestValidationInput: input, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(answer)), Options: &openapi3filter.Options{IncludeResponseStatus: true},
	})
	if err != nil {
		return true, "the answer does not match the document: " + err.Error()
	}
	return true, ""
}

// router is the router of prefix's document as the server at origin serves it, fetched through
// base the first time. A server that gives no answer for its documents is asked again on its
// next exchange (the error is an *unreachableError then).
func (c *Contracts) router(origin string, base http.RoundTripper, prefix string) (routers.Router, error) {
	s := entry(&c.mu, c.servers, origin)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.routers == nil && s.err == nil {
		routers, err := c.load(origin, base)
		var unreachable *unreachableError
		if errors.As(err, &unreachable) {
			return nil, err
		}
		s.routers, s.err = routers, err
	}
	if s.err != nil {
		return nil, s.err
	}
	return s.routers[prefix], nil
}

// entry is m's value for key, a new one if m had none; mu guards m.
func entry[K comparable, V any](mu *sync.Mutex, m map[K]*V, key K) *V {
	mu.Lock()
	defer mu.Unlock()
	v, ok := m[key]
	if !ok {
		v = new(V)
		m[key] = v
	}
	return v
}

// unreachableError is a server that gave no answer for its document.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return "fetch: " + e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }

// loadTimeout bounds fetching one server's documents.
const loadTimeout = 30 * time.Second

// load fetches every document origin serves and routes each.
func (c *Contracts) load(origin string, base http.RoundTripper) (map[string]routers.Router, error) {
	ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
	defer cancel()
	out := map[string]routers.Router{}
	for _, prefix := range documented {
		doc := origin + prefix + "/openapi.json"
		raw, err := fetch(ctx, base, doc)
		var unreachable *unreachableError
		if errors.As(err, &unreachable) {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("the server's document %s: %w", doc, err)
		}
		router, err := c.documents.route(ctx, prefix, raw)
		if err != nil {
			return nil, fmt.Errorf("the server's document %s: %w", doc, err)
		}
		out[prefix] = router
	}
	return out, nil
}

// route returns the router of a served document, parsing it only if no server served the same
// document before.
func (docs *Documents) route(ctx context.Context, prefix string, raw []byte) (routers.Router, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	// The document names the server as partners reach it, which a test may reach another way
	// (a port-forward, a Pod's address): requests are routed by path alone.
	delete(fields, "servers")
	canonical, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	key := sha256.Sum256(append([]byte(prefix+"\n"), canonical...))
	d := entry(&docs.mu, docs.parsed, key)
	d.once.Do(func() { d.router, d.err = parse(ctx, prefix, raw) })
	return d.router, d.err
}

// parse loads, validates and routes one document.
func parse(ctx context.Context, prefix string, raw []byte) (routers.Router, error) {
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("not valid OpenAPI: %w", err)
	}
	doc.Servers = openapi3.Servers{{URL: prefix}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route: %w", err)
	}
	return router, nil
}

func fetch(ctx context.Context, base http.RoundTripper, doc string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, doc, http.NoBody)
	if err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	resp, err := (&http.Client{Transport: base}).Do(req)
	if err != nil {
		return nil, &unreachableError{err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New("answered " + resp.Status)
	}
	return raw, nil
}
