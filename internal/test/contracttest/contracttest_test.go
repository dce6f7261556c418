package contracttest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/codeport/codeport/apiserver/openapi"
	"github.com/codeport/codeport/internal/test/contracttest"
)

// recorder collects what the wrapper reports, as a test would see it.
type recorder struct {
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) reported() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errors...)
}

const pingOK = `{"status":"ok","timestamp":"2026-12-06T10:00:00.000Z"}`

// answer is what the planted server sends for one path.
type answer struct {
	status      int
	contentType string
	header      map[string]string
	body        string
}

// plantedServer serves the documents as codeport serves them (v2 changed by edit, when set) and
// answers every other path with answers[path], right or wrong; it counts the documents fetched.
func plantedServer(t *testing.T, edit func(map[string]any), answers map[string]answer) (*httptest.Server, *int) {
	t.Helper()
	v2 := openapi.V2()
	if edit != nil {
		var doc map[string]any
		if err := json.Unmarshal(v2, &doc); err != nil {
			t.Fatal(err)
		}
		edit(doc)
		var err error
		if v2, err = json.Marshal(doc); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	fetched := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v2/openapi.json", "/v1/openapi.json":
			mu.Lock()
			fetched++
			mu.Unlock()
			doc := v2
			if r.URL.Path == "/v1/openapi.json" {
				doc = openapi.V1()
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(doc)
			return
		}
		a, ok := answers[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		for name, value := range a.header {
			w.Header().Set(name, value)
		}
		if a.contentType != "" {
			w.Header().Set("Content-Type", a.contentType)
		}
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	}))
	t.Cleanup(srv.Close)
	return srv, &fetched
}

// TestWrapperReportsViolations: each way an answer (or an accepted request) can break the
// document is reported with the method, path and status, and the caller still reads the whole
// answer; a matching exchange and paths no document describes are not reported.
func TestWrapperReportsViolations(t *testing.T) {
	json200 := "application/json"
	for _, tc := range []struct {
		name    string
		method  string
		path    string
		header  map[string]string
		answer  answer
		want    string // a part of the one report expected; empty for none
		checked bool
	}{
		{name: "matching answer", method: "GET", path: "/v2/ping",
			answer: answer{status: 200, contentType: json200, body: pingOK}, checked: true},
		{name: "field of the wrong type", method: "GET", path: "/v2/ping",
			answer: answer{status: 200, contentType: json200, body: `{"status":"ok","timestamp":17}`},
			want:   `GET /v2/ping: 200: the answer does not match the document`, checked: true},
		{name: "field the schema forbids", method: "GET", path: "/v2/ping",
			answer: answer{status: 200, contentType: json200,
				body: `{"status":"ok","timestamp":"2026-12-06T10:00:00.000Z","extra":1}`},
			want: `GET /v2/ping: 200: the answer does not match the document`, checked: true},
		{name: "undocumented status", method: "GET", path: "/v2/ping",
			answer: answer{status: http.StatusTeapot, contentType: json200, body: pingOK},
			want:   `GET /v2/ping: 418: the answer does not match the document: status is not supported`, checked: true},
		{name: "undocumented content type", method: "GET", path: "/v2/ping",
			answer: answer{status: 200, contentType: "text/plain", body: "ok"},
			want:   `GET /v2/ping: 200: the answer does not match the document`, checked: true},
		{name: "header of the wrong type", method: "GET", path: "/v2/ping",
			answer: answer{status: 200, contentType: json200, header: map[string]string{"X-RateLimit-Limit": "many"},
				body: pingOK},
			want: `GET /v2/ping: 200: the answer does not match the document`, checked: true},
		{name: "accepted request the document rejects", method: "GET", path: "/v2/catalog/products?take=0",
			header: map[string]string{"If-None-Match": `"x"`}, answer: answer{status: http.StatusNotModified},
			want: `GET /v2/catalog/products: 304: the server accepted a request its document rejects`, checked: true},
		{name: "refused request the document rejects", method: "GET", path: "/v2/catalog/products?take=0",
			answer: answer{status: 400, contentType: json200,
				body: `{"statusCode":400,"error":"Bad Request","message":"take must be between 1 and 100"}`},
			checked: true},
		{name: "legacy document", method: "GET", path: "/v1/catalog",
			answer: answer{status: http.StatusTeapot, contentType: json200, body: `{}`},
			want:   `GET /v1/catalog: 418: the answer does not match the document`, checked: true},
		{name: "probe", method: "GET", path: "/healthz",
			answer: answer{status: http.StatusTeapot, contentType: "text/plain", body: "whatever"}},
		{name: "metrics", method: "GET", path: "/metrics",
			answer: answer{status: 200, contentType: "text/plain", body: "up 1"}},
		{name: "route no document has", method: "GET", path: "/v2/nowhere",
			answer: answer{status: http.StatusTeapot, contentType: "text/plain", body: "whatever"}},
		{name: "method the document lacks", method: "DELETE", path: "/v2/ping",
			answer: answer{status: http.StatusMethodNotAllowed, contentType: "text/plain", body: "no"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, _, _ := strings.Cut(tc.path, "?")
			srv, _ := plantedServer(t, nil, map[string]answer{path: tc.answer})
			var rec recorder
			contracts := contracttest.New()
			client := contracts.Wrap(&rec, nil)
			req, err := http.NewRequest(tc.method, srv.URL+tc.path, http.NoBody)
			if err != nil {
				t.Fatal(err)
			}
			for name, value := range tc.header {
				req.Header.Set(name, value)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(body) != tc.answer.body || resp.StatusCode != tc.answer.status {
				t.Errorf("the caller read %d %q (%v), the server sent %d %q",
					resp.StatusCode, body, err, tc.answer.status, tc.answer.body)
			}
			got := rec.reported()
			switch {
			case tc.want == "" && len(got) != 0:
				t.Errorf("reported %q, want nothing", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Errorf("reported %q, want one report containing %q", got, tc.want)
			}
			if checked := contracts.Checked() == 1; checked != tc.checked {
				t.Errorf("checked %d exchanges, want checked=%v", contracts.Checked(), tc.checked)
			}
		})
	}
}

// TestWrapperSendsTheBodyItChecks: a request body reaches the server whole after the wrapper
// read it to validate the request.
func TestWrapperSendsTheBodyItChecks(t *testing.T) {
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v2/openapi.json":
			_, _ = w.Write(openapi.V2())
		case "/v1/openapi.json":
			_, _ = w.Write(openapi.V1())
		default:
			got, _ = io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"statusCode":401,"error":"Unauthorized","message":"Invalid API key"}`)
		}
	}))
	defer srv.Close()
	var rec recorder
	sent := `{"externalOrderCode":"o-1","currency":"EUR","orderProducts":[]}`
	resp, err := contracttest.Wrap(&rec, nil).Post(srv.URL+"/v2/orders", "application/json", bytes.NewBufferString(sent))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if string(got) != sent || len(rec.reported()) != 0 {
		t.Fatalf("the server read %q of %q; reported %q", got, sent, rec.reported())
	}
}

// TestEachServerIsJudgedByItsOwnDocument: two servers answering alike are held to the documents
// each serves, fetched once per server however many exchanges follow.
func TestEachServerIsJudgedByItsOwnDocument(t *testing.T) {
	teapot := answer{status: http.StatusTeapot, contentType: "application/json", body: pingOK}
	documentsTeapot := func(doc map[string]any) {
		responses := doc["paths"].(map[string]any)["/ping"].(map[string]any)["get"].(map[string]any)["responses"]
		responses.(map[string]any)["418"] = map[string]any{"description": "A teapot.",
			"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"type": "object"}}}}
	}
	withTeapot, fetchedWith := plantedServer(t, documentsTeapot, map[string]answer{"/v2/ping": teapot})
	without, fetchedWithout := plantedServer(t, nil, map[string]answer{"/v2/ping": teapot})
	var rec recorder
	contracts := contracttest.New()
	client := contracts.Wrap(&rec, nil)
	for range 3 {
		for _, srv := range []*httptest.Server{withTeapot, without} {
			resp, err := client.Get(srv.URL + "/v2/ping")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
	}
	got := rec.reported()
	if len(got) != 3 {
		t.Fatalf("reported %q, want the three answers of the server that does not document 418", got)
	}
	for _, report := range got {
		if !strings.Contains(report, "GET /v2/ping: 418: the answer does not match the document") {
			t.Errorf("report %q", report)
		}
	}
	if *fetchedWith != 2 || *fetchedWithout != 2 || contracts.Checked() != 6 {
		t.Errorf("documents fetched %d and %d times, want each server's two once; %d exchanges checked, want 6",
			*fetchedWith, *fetchedWithout, contracts.Checked())
	}
}

// TestServerWithoutDocumentIsReported: a server answering a documented path without serving its
// documents is a violation, not a skip.
func TestServerWithoutDocumentIsReported(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/openapi.json") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, pingOK)
	}))
	defer srv.Close()
	var rec recorder
	resp, err := contracttest.Wrap(&rec, nil).Get(srv.URL + "/v2/ping")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := rec.reported(); len(got) != 1 || !strings.Contains(got[0], "GET /v2/ping: 200: the server's document "+
		srv.URL+"/v2/openapi.json: answered 404") {
		t.Fatalf("reported %q", got)
	}
}
