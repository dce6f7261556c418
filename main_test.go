package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/codeport/codeport/internal/devenv"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/tenancy"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testprocess"
)

// TestDevProvisionsSamplesAndServes runs `codeport dev` on the sample manifests against a test
// database: credentials.json has the documented shape, the printed curl works, a sandbox order
// completes, keys survive a restart, and cancelling shuts everything down.
func TestDevProvisionsSamplesAndServes(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	state := t.TempDir()
	creds, banner, stop := startDev(t, db.URL, state)
	acme := creds.Partners["partners/acme"]
	sandbox, production := acme["sandbox"], acme["production"]
	if sandbox == nil || production == nil || !strings.HasPrefix(sandbox.APIKey, "cp_test_") ||
		!strings.HasPrefix(production.APIKey, "cp_live_") || production.V1Token == "" || sandbox.V1Token == "" ||
		!strings.HasSuffix(sandbox.BaseURL, "/v2") || !strings.HasSuffix(production.V1BaseURL, "/v1") {
		t.Fatalf("credentials: %+v %+v", sandbox, production)
	}
	if !strings.Contains(banner, sandbox.APIKey) || !strings.Contains(banner, sandbox.BaseURL+"/catalog/products") {
		t.Fatalf("banner lacks a working curl line:\n%s", banner)
	}
	// A database dev was given is named without its password (TestDevPrintsHowToReachItsDatabase
	// runs the commands printed for the embedded one).
	given, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(banner, "codeport dev: database "+given.Redacted()+" (--database-url)") ||
		!strings.Contains(banner, " migrate status\n") {
		t.Fatalf("banner does not name the database given and how to reach it:\n%s", banner)
	}
	if password, set := given.User.Password(); set && strings.Contains(banner, password) {
		t.Fatalf("banner shows the password of the database given:\n%s", banner)
	}
	if list := getJSON(t, sandbox.BaseURL+"/catalog/products?take=100", sandbox.APIKey); list["count"] != float64(17) {
		t.Fatalf("sandbox catalog: 10 sample products, 2 from a shard and 5 test products expected, got %v", list["count"])
	}
	// Each environment's legacy interface takes its own bearer token.
	for name, ep := range acme {
		req, _ := http.NewRequest(http.MethodGet, ep.V1BaseURL+"/catalog/products?take=1", http.NoBody)
		req.Header.Set("Authorization", "Bearer "+ep.V1Token)
		resp, err := apiClient(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s /v1 with its v1Token: %d", name, resp.StatusCode)
		}
	}
	body := `{"externalOrderCode":"dev-1","currency":"EUR",` +
		`"orderProducts":[{"productCode":"99000000000001","quantity":1}]}`
	req, _ := http.NewRequest(http.MethodPost, sandbox.BaseURL+"/orders", strings.NewReader(body))
	req.Header.Set("x-api-key", sandbox.APIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := apiClient(t).Do(req)
	if err != nil || resp.StatusCode != 202 {
		t.Fatalf("place order: %v %v", resp, err)
	}
	resp.Body.Close()
	deadline := time.Now().Add(30 * time.Second)
	for getJSON(t, sandbox.BaseURL+"/orders/dev-1", sandbox.APIKey)["status"] != "completed" {
		if time.Now().After(deadline) {
			t.Fatal("sandbox order did not complete")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if w := getJSON(t, sandbox.BaseURL+"/wallet", sandbox.APIKey); w["balances"].(map[string]any)["EUR"] != 990.0 {
		t.Fatalf("wallet after a 10.00 order: %v", w)
	}
	stop()

	again, _, stop := startDev(t, db.URL, state)
	defer stop()
	if again.Partners["partners/acme"]["sandbox"].APIKey != sandbox.APIKey {
		t.Fatal("sandbox key changed across restarts")
	}
	// Top-ups are applied once: the restart did not credit the wallet again.
	w := getJSON(t, again.Partners["partners/acme"]["sandbox"].BaseURL+"/wallet", sandbox.APIKey)
	if w["balances"].(map[string]any)["EUR"] != 990.0 {
		t.Fatalf("wallet after restart: %v", w)
	}
	// The production wallet has its list's 5000.00 EUR and the WalletTopUp's 2500.00, once.
	w = getJSON(t, again.Partners["partners/acme"]["production"].BaseURL+"/wallet", production.APIKey)
	if w["balances"].(map[string]any)["EUR"] != 7500.0 {
		t.Fatalf("production wallet after restart: %v", w)
	}
}

// startDev runs `codeport dev` on the sample manifests with state directory state until it
// prints its banner, and returns the credentials it wrote, the banner and a function that stops
// it.
func startDev(t *testing.T, databaseURL, state string) (*devenv.Credentials, string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &testprocess.Buffer{}
	var err error
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		err = runDev(ctx, out, devOptions{
			databaseURL: databaseURL,
			manifests:   "config/samples",
			stateDir:    state,
			addrs:       map[string]string{string(tenancy.Production): "127.0.0.1:0", string(tenancy.Sandbox): "127.0.0.1:0"},
		})
	}()
	result := func() error { <-ended; return err }
	creds := waitForDev(t, state, out.String, ended, result)
	return creds, out.String(), func() {
		cancel()
		if err := result(); err != nil {
			t.Fatalf("dev shutdown: %v", err)
		}
	}
}

// waitForDev waits until the dev whose output log returns prints its banner, failing the test
// with result should ended close first, and returns the credentials it wrote in state.
func waitForDev(
	t *testing.T, state string, log func() string, ended <-chan struct{}, result func() error,
) *devenv.Credentials {
	t.Helper()
	poll.Until(t, 2*time.Minute, "dev ready", func() (bool, string) {
		select {
		case <-ended:
			t.Fatalf("dev exited: %v\n%s", result(), log())
		default:
		}
		return strings.Contains(log(), "curl"), log()
	})
	raw, err := os.ReadFile(filepath.Join(state, "credentials.json"))
	if err != nil {
		t.Fatal(err)
	}
	var creds devenv.Credentials
	if err := json.Unmarshal(raw, &creds); err != nil {
		t.Fatal(err)
	}
	return &creds
}

// getJSON GETs url with key and returns the JSON object of a 200 answer.
func getJSON(t *testing.T, url, key string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, http.NoBody)
	req.Header.Set("x-api-key", key)
	resp, err := apiClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, body)
	}
	return body
}

// TestFlagUsageNamesTheValueType: a backquoted word in a flag's usage becomes the name of its
// argument in --help (`--codes-key openssl rand -base64 32`), so no usage may hold one; the help
// shows each flag with its value's type.
func TestFlagUsageNamesTheValueType(t *testing.T) {
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if strings.Contains(f.Usage, "`") {
				t.Errorf("%s --%s: usage %q names its argument with backquotes", cmd.CommandPath(), f.Name, f.Usage)
			}
		})
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	root := newRootCommand()
	walk(root)
	var help bytes.Buffer
	root.SetOut(&help)
	root.SetArgs([]string{"serve", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(help.String(), "--codes-key string ") {
		t.Fatalf("serve --help does not show --codes-key string:\n%s", help.String())
	}
}

// TestHelpKeepsCredentialsFromTheEnvironmentOut: flags that take a credential default to an
// environment variable, and --help prints no flag's value from the environment.
func TestHelpKeepsCredentialsFromTheEnvironmentOut(t *testing.T) {
	const sentinel = "not-for-the-terminal"
	for _, env := range []string{
		"CODEPORT_DATABASE_URL", "CODEPORT_CODES_KEY", "CODEPORT_REDIS_URL", "CODEPORT_SMTP_URL",
	} {
		t.Setenv(env, "postgres://u:"+sentinel+"@h/"+env)
	}
	for _, args := range [][]string{{"serve"}, {"operator"}, {"dev"}, {"migrate", "up"}, {"codes", "import"}} {
		root := newRootCommand()
		var help bytes.Buffer
		root.SetOut(&help)
		root.SetArgs(append(args, "--help"))
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(help.String(), sentinel) {
			t.Errorf("%s --help prints a credential from the environment:\n%s", strings.Join(args, " "), help.String())
		}
	}
	// The environment still supplies the value: serve reads the codes key from it.
	t.Setenv("CODEPORT_CODES_KEY", "not a key")
	root := newRootCommand()
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"serve", "--environment", "sandbox"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "codes key must be 32 bytes") {
		t.Fatalf("serve with a malformed $CODEPORT_CODES_KEY: %v", err)
	}
}

// TestServeLogsAndTracesRequests runs `codeport serve` and reads its log: every line is JSON
// with each attribute once (the request line's environment included), and the request line
// names the environment served. With --otlp-endpoint, the request's span reaches the collector.
func TestServeLogsAndTracesRequests(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// An OTLP/HTTP collector: the request's span must reach it, flushed on shutdown.
	var traces testprocess.Buffer
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/traces" {
			body, _ := io.ReadAll(r.Body)
			_, _ = traces.Write(body)
		}
	}))
	defer collector.Close()
	// Request lines stay buffered until shutdown, which must write them out.
	addr, logs, done := startServe(ctx, t, db.URL, "--redis-url", "", "--otlp-endpoint", collector.URL,
		"--log-flush-interval", "1h")
	resp, err := apiClient(t).Get("http://" + addr + "/v2/ping")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	requestLines := 0
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		keys, err := topLevelKeys(line)
		if err != nil {
			t.Fatalf("log line is not a JSON object: %v\n%s", err, line)
		}
		for key, n := range keys {
			if n > 1 {
				t.Errorf("attribute %q written %d times: %s", key, n, line)
			}
		}
		if strings.Contains(line, `"msg":"request"`) {
			requestLines++
			if !strings.Contains(line, `"environment":"sandbox"`) {
				t.Errorf("request line without its environment: %s", line)
			}
		}
	}
	if requestLines == 0 {
		t.Fatalf("no request line logged:\n%s", logs.String())
	}
	// The request was refused for its missing key: its span is named after the group, /v2.
	if !strings.Contains(traces.String(), "GET /v2") {
		t.Fatalf("the request's span did not reach the OTLP collector (%d bytes received)", len(traces.String()))
	}
}

// TestServeWaitsForTheDatabaseAtStart: serve started while its database is unavailable (a
// failover, a pooler with no server yet) says it waits, and serves once the database is back,
// rather than exiting into its restart back-off; a database that does not exist is not waited for.
func TestServeWaitsForTheDatabaseAtStart(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	storetest.SetConnectable(t, db.Name, false)
	reopened := make(chan struct{})
	go func() {
		defer close(reopened)
		time.Sleep(2 * time.Second)
		storetest.SetConnectable(t, db.Name, true)
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, logs, done := startServe(ctx, t, db.URL, "--redis-url", "", "--log-flush-interval", "0")
	<-reopened
	if !strings.Contains(logs.String(), `"msg":"waiting for the database"`) {
		t.Errorf("serve did not say it waited for the database:\n%s", logs.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}

	missing, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	missing.Path = "/cpt_no_such_database"
	root := newRootCommand()
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"serve", "--environment", "sandbox", "--addr", "127.0.0.1:0", "--metrics-addr", "",
		"--redis-url", "", "--database-url", missing.String(), "--codes-key", strings.Repeat("ab", 32)})
	runCtx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	err = root.ExecuteContext(runCtx)
	if err == nil || !strings.Contains(err.Error(), `database "cpt_no_such_database" does not exist`) {
		t.Fatalf("serve on a database that does not exist: %v, want its refusal at once", err)
	}
}

// TestServeWritesWarningsAtOnce: with info lines buffered for an hour, a warning raised while
// serving (the shared rate limiter's Redis does not answer) is written as it happens.
func TestServeWritesWarningsAtOnce(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	unreachable := "redis://" + testprocess.Addr(t)
	addr, logs, done := startServe(ctx, t, db.URL, "--redis-url", unreachable, "--log-flush-interval", "1h")
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	resp, err := apiClient(t).Get("http://" + addr + "/v2/catalog/products")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	poll.Until(t, 10*time.Second, "the limiter's warning written while serving", func() (bool, string) {
		out := logs.String()
		return strings.Contains(out, `"msg":"shared rate limiter unavailable; limiting per process"`), out
	})
}

// startServe runs `codeport serve` for the sandbox on a free port until ctx ends, and returns
// its address once it logs that it serves, its log, and its result.
func startServe(
	ctx context.Context, t *testing.T, databaseURL string, args ...string,
) (string, *testprocess.Buffer, chan error) {
	t.Helper()
	logs := &testprocess.Buffer{}
	root := newRootCommand()
	root.SetErr(logs)
	root.SetArgs(append([]string{"serve", "--environment", "sandbox", "--addr", "127.0.0.1:0", "--metrics-addr", "",
		"--database-url", databaseURL, "--database-min-idle-conns", "1", "--codes-key", strings.Repeat("ab", 32)},
		args...))
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	var addr string
	poll.Until(t, 30*time.Second, "serve started", func() (bool, string) {
		for _, line := range strings.Split(logs.String(), "\n") {
			var rec struct {
				Msg, Addr string
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "serving partner API" {
				addr = rec.Addr
			}
		}
		return addr != "", logs.String()
	})
	return addr, logs, done
}

// topLevelKeys counts the keys of the JSON object line, duplicates included (a map would keep one).
func topLevelKeys(line string) (map[string]int, error) {
	dec := json.NewDecoder(strings.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("want an object, got %v (%w)", tok, err)
	}
	keys := map[string]int{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys[tok.(string)]++
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// TestDevRefusesManifestsTheClusterWouldRefuse: `codeport dev` stops before it starts anything
// when a manifest would be refused by the cluster, naming the file, the document and what the API
// server says about it, in kubectl's words.
func TestDevRefusesManifestsTheClusterWouldRefuse(t *testing.T) {
	dir := t.TempDir()
	manifests := `apiVersion: codeport.dev/v1alpha1
kind: Partner
metadata: {name: acme, namespace: partners}
spec: {displayName: Acme, contactEmail: ops@acme.example}
---
apiVersion: codeport.dev/v1alpha1
kind: Partner
metadata: {name: globex, namespace: partners}
spec:
  displayName: Globex
  rateLimit: {requestsPerMinute: 2000000}
`
	if err := os.WriteFile(filepath.Join(dir, "partners.yaml"), []byte(manifests), 0o600); err != nil {
		t.Fatal(err)
	}
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	// Nothing listens on port 1: were the manifests admitted, dev would fail connecting instead.
	root.SetArgs([]string{"dev", "--manifests", dir, "--state-dir", t.TempDir(),
		"--database-url", "postgres://codeport@127.0.0.1:1/codeport?connect_timeout=1"})
	err := root.ExecuteContext(context.Background())
	if err == nil {
		t.Fatal("dev started with a manifest the cluster refuses")
	}
	msg := err.Error()
	for _, want := range []string{
		filepath.Join(dir, "partners.yaml") + ` (document 2): The Partner "globex" is invalid: `,
		"* spec.contactEmail: Required value\n",
		"* spec.rateLimit.requestsPerMinute: Invalid value: 2000000: " +
			"spec.rateLimit.requestsPerMinute in body should be less than or equal to 1000000\n",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "document 1") || out.Len() > 0 {
		t.Errorf("error: %s\noutput: %s", msg, out.String())
	}
}

// TestRefusesUnmigratedSchema: serve and operator started against a database that was never
// migrated, or is a migration behind, stop at once with one line that says what to run.
func TestRefusesUnmigratedSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := storetest.Create(ctx, t.Name(), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Drop(context.Background()) })
	need, err := store.LatestSchemaVersion()
	if err != nil {
		t.Fatal(err)
	}
	commands := map[string][]string{
		"serve": {"serve", "--environment", "sandbox", "--addr", "127.0.0.1:0", "--metrics-addr", "", "--redis-url", "",
			"--database-url", d.URL, "--codes-key", strings.Repeat("ab", 32)},
		"operator": {"operator", "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
			"--database-url", d.URL, "--codes-key", strings.Repeat("ab", 32)},
	}
	check := func(have int64) {
		t.Helper()
		want := fmt.Sprintf("database schema is at version %d, this binary needs %d: run `codeport migrate up`", have, need)
		for name, args := range commands {
			root := newRootCommand()
			root.SetOut(io.Discard)
			root.SetErr(io.Discard)
			root.SetArgs(args)
			runCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := root.ExecuteContext(runCtx)
			cancel()
			if err == nil || err.Error() != want {
				t.Errorf("%s on schema version %d: %v\nwant: %s", name, have, err, want)
			}
		}
	}
	check(0)

	db, err := store.Open(ctx, d.URL, store.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m, err := store.NewMigrator(db.SQL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	previous, err := m.Down(ctx)
	if err != nil {
		t.Fatal(err)
	}
	have, err := m.Version(ctx)
	if err != nil || have >= previous {
		t.Fatalf("version after one step down: %d, %v", have, err)
	}
	check(have)
}

// TestWatchNamespacesRejectsNonNamespaces: a typo in --watch-namespaces stops the operator at
// start rather than leaving a namespace silently unreconciled.
func TestWatchNamespacesRejectsNonNamespaces(t *testing.T) {
	root := newRootCommand()
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"operator", "--database-url", "postgres://nowhere.invalid/codeport",
		"--codes-key", strings.Repeat("ab", 32), "--watch-namespaces", "partners,Team_B"})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), `--watch-namespaces: "Team_B" is not a namespace name`) {
		t.Fatalf("operator with a bad namespace: %v", err)
	}
}
