package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/tenancy"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testprocess"
)

// TestAnotherCodesKeyIsRefused: the database records the key its codes are sealed under, and
// every process started with another one stops at once, in one line naming both keys, instead
// of selling codes it cannot open (serve used to take a production order, debit the wallet,
// complete the order and answer 500 on every read of it) or importing codes already in stock
// again (their duplicates went unnoticed under another key). With the recorded key, orders
// deliver the stock and a second import of the same codes skips them.
func TestAnotherCodesKeyIsRefused(t *testing.T) {
	// dev keeps its own key in its state directory, and records it.
	t.Setenv("CODEPORT_CODES_KEY", "")
	db := storetest.New(t)
	state := t.TempDir()
	creds, _, stop := startDev(t, db.URL, state)
	stop()
	apiKey := creds.Partners["partners/acme"]["production"].APIKey
	raw, err := os.ReadFile(filepath.Join(state, "codes.key"))
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(raw))
	other, err := codes.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	const product = "10000000000001"
	stock := filepath.Join(t.TempDir(), "stock.txt")
	if err := os.WriteFile(stock, []byte("KEYTEST-0001\nKEYTEST-0002\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	importStock := func(key string) (string, error) {
		return runCodeport(t, "codes", "import", "--product", product, "--database-url", db.URL, "--codes-key", key, stock)
	}
	if out, err := importStock(key); err != nil || !strings.Contains(out, "imported 2 codes") {
		t.Fatalf("import with the database's key: %v\n%s", err, out)
	}

	want := fmt.Sprintf("codes key %s does not match the key this database's codes and secrets are encrypted with "+
		"(key id %s); start with that key (--codes-key or CODEPORT_CODES_KEY)", keyID(t, other), keyID(t, key))
	addr, done, err := serveOrRefuse(t, db.URL, other)
	if err == nil {
		status, body := orderAndRead(t, addr, apiKey, "another-key")
		done()
		t.Fatalf("serve started with another codes key; its order then read as %d: %s", status, body)
	}
	if err.Error() != want {
		t.Errorf("serve with another key: %v\nwant: %s", err, want)
	}
	refusals := map[string][]string{
		"codes import": {"codes", "import", "--product", product, "--database-url", db.URL, "--codes-key", other, stock},
		"operator": {"operator", "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
			"--database-url", db.URL, "--codes-key", other},
	}
	for name, args := range refusals {
		if out, err := runCodeport(t, args...); err == nil || err.Error() != want {
			t.Errorf("%s with another key: %v\n%s\nwant: %s", name, err, out, want)
		}
	}
	otherState := t.TempDir()
	err = runDev(t.Context(), io.Discard, devOptions{databaseURL: db.URL, manifests: "config/samples",
		stateDir: otherState, addrs: map[string]string{string(tenancy.Production): "127.0.0.1:0",
			string(tenancy.Sandbox): "127.0.0.1:0"}})
	otherDevKey, readErr := os.ReadFile(filepath.Join(otherState, "codes.key"))
	if readErr != nil {
		t.Fatal(readErr)
	}
	wantDev := fmt.Sprintf("codes key %s does not match the key this database's codes and secrets are encrypted with "+
		"(key id %s); start with that key (CODEPORT_CODES_KEY, else %s)", keyID(t, string(otherDevKey)), keyID(t, key),
		filepath.Join(otherState, "codes.key"))
	if err == nil || err.Error() != wantDev {
		t.Errorf("dev with a key of its own on the database: %v\nwant: %s", err, wantDev)
	}

	addr, done, err = serveOrRefuse(t, db.URL, key)
	if err != nil {
		t.Fatalf("serve with the database's key: %v", err)
	}
	status, body := orderAndRead(t, addr, apiKey, "right-key")
	done()
	var order struct {
		Status   string
		Products []struct{ Codes []struct{ Code string } }
	}
	if status != http.StatusOK || json.Unmarshal(body, &order) != nil || order.Status != "completed" ||
		len(order.Products) != 1 || len(order.Products[0].Codes) != 1 ||
		!strings.HasPrefix(order.Products[0].Codes[0].Code, "KEYTEST-") {
		t.Fatalf("order with the database's key: %d %s", status, body)
	}
	out, err := importStock(key)
	if want := "imported 0 codes for " + product + " (2 duplicates skipped); 1 in stock\n"; err != nil || out != want {
		t.Fatalf("the same codes imported again: %v %q, want %q", err, out, want)
	}
}

// runCodeport runs one command of the binary to its end and returns what it printed.
func runCodeport(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	root := newRootCommand()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// keyID is the id of a base64 or hex codes key.
func keyID(t *testing.T, key string) string {
	t.Helper()
	c, err := codesKeyring{keys: key}.load()
	if err != nil {
		t.Fatal(err)
	}
	return c.KeyID()
}

// serveOrRefuse runs `codeport serve` for production with key and returns its address once it
// serves, with a function that stops it, or the error it stopped with before serving.
func serveOrRefuse(t *testing.T, databaseURL, key string) (string, func(), error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	logs := &testprocess.Buffer{}
	root := newRootCommand()
	root.SetErr(logs)
	root.SetArgs([]string{"serve", "--environment", "production", "--addr", "127.0.0.1:0", "--metrics-addr", "",
		"--redis-url", "", "--database-url", databaseURL, "--database-min-idle-conns", "1", "--log-flush-interval", "0",
		"--codes-key", key})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	var addr string
	var stopped error
	poll.Until(t, 30*time.Second, "serve started or stopped", func() (bool, string) {
		select {
		case stopped = <-done:
			return true, ""
		default:
		}
		for _, line := range strings.Split(logs.String(), "\n") {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "serving partner API" {
				addr = rec.Addr
			}
		}
		return addr != "", logs.String()
	})
	if addr == "" {
		cancel()
		return "", nil, stopped
	}
	return addr, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}, nil
}

// orderAndRead places a production order of one unit of the sample catalog's first product, waits
// until it is no longer processing, and returns how its read answers.
func orderAndRead(t *testing.T, addr, apiKey, reference string) (int, []byte) {
	t.Helper()
	body := `{"externalOrderCode":"` + reference + `","currency":"EUR",` +
		`"orderProducts":[{"productCode":"10000000000001","quantity":1}]}`
	status, answer := call(t, http.MethodPost, "http://"+addr+"/v2/orders", apiKey, body)
	if status != http.StatusAccepted {
		t.Fatalf("place order: %d %s", status, answer)
	}
	poll.Until(t, 30*time.Second, "the order fulfilled", func() (bool, string) {
		status, answer = call(t, http.MethodGet, "http://"+addr+"/v2/orders/"+reference, apiKey, "")
		return status != http.StatusOK || !bytes.Contains(answer, []byte(`"status":"processing"`)), string(answer)
	})
	return status, answer
}

func call(t *testing.T, method, url, apiKey, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", apiKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := apiClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, answer
}
