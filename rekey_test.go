package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/codeport/codeport/internal/codes/codestest"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// TestRotateCodesKeyUnderLoad follows the documented rotation while orders flow: the new key
// joins every process's keyring, becomes the current one, codes rekey moves the codes and
// secrets onto it, and the old key leaves the keyring. No order fails, every code reads the same
// before, during and after, and a keyring without the old key is refused until rekey has run.
func TestRotateCodesKeyUnderLoad(t *testing.T) {
	oldKey, newKey := codestest.Key(t), codestest.Key(t)
	oldID, newID := keyID(t, oldKey), keyID(t, newKey)
	t.Setenv("CODEPORT_CODES_KEY", oldKey)
	t.Setenv("CODEPORT_CODES_CURRENT_KEY_ID", "")
	db := storetest.New(t)
	creds, _, stopDev := startDev(t, db.URL, t.TempDir())
	stopDev()
	apiKey := creds.Partners["partners/acme"]["production"].APIKey
	importCodes(t, db.URL, oldKey, "OLD", 300)

	sold := map[string]string{}
	sell := func(addr, phase string, n int) {
		for i := range n {
			ref := fmt.Sprintf("%s-%d", phase, i)
			sold[ref] = soldCode(t, addr, apiKey, ref)
		}
	}
	readAll := func(addr string) {
		t.Helper()
		for ref, code := range sold {
			if got := readCode(t, addr, apiKey, ref); got != code {
				t.Fatalf("order %s reads code %q, sold %q", ref, got, code)
			}
		}
	}
	both := oldKey + "," + newKey
	// Each step starts the processes of the next configuration before stopping the previous
	// ones, as a rolling update does.
	a := startServeWithKeyring(t, db.URL, oldKey, "")
	sell(a.addr, "before", 3)
	b := startServeWithKeyring(t, db.URL, both, oldID)
	a.stop()
	sell(b.addr, "joined", 3)
	c := startServeWithKeyring(t, db.URL, both, newID)
	b.stop()
	sell(c.addr, "current", 3)
	importCodes(t, db.URL, both, "NEW", 20, "--codes-current-key-id", newID)
	readAll(c.addr)

	pool, err := store.Open(t.Context(), db.URL, store.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var left int64
	if err := pool.Pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM code_stock WHERE key_ref = 1) +
		(SELECT count(*) FROM delivered_codes WHERE key_ref = 1)`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("codes key %s still encrypts %d codes and secrets but is not in the keyring; "+
		"add it back, and run `codeport codes rekey` before removing it (--codes-key or CODEPORT_CODES_KEY)",
		oldID, left)
	if addr, done, err := serveOrRefuse(t, db.URL, newKey); err == nil {
		done()
		t.Fatalf("serve without the old key started at %s", addr)
	} else if err.Error() != want {
		t.Fatalf("serve without the old key: %v\nwant: %s", err, want)
	}

	// Rekey a row per transaction, so it runs through many of them while orders go on.
	rekeyed := make(chan error, 1)
	var rekeyOut string
	go func() {
		var err error
		rekeyOut, err = runCodeport(t, "codes", "rekey", "--database-url", db.URL, "--codes-key", both,
			"--codes-current-key-id", newID, "--batch", "1")
		rekeyed <- err
	}()
	for i := 0; ; i++ {
		select {
		case err := <-rekeyed:
			if err != nil {
				t.Fatalf("rekey: %v\n%s", err, rekeyOut)
			}
			t.Logf("%d orders placed and every order read while rekey ran", i)
		default:
			ref := fmt.Sprintf("rekey-%d", i)
			sold[ref] = soldCode(t, c.addr, apiKey, ref)
			readAll(c.addr)
			continue
		}
		break
	}
	for _, line := range []string{
		fmt.Sprintf("codes key %s: 0 ciphertexts (older, encrypts nothing: may leave the keyring)", oldID),
		fmt.Sprintf("re-encrypted 1 rows of code_stock from codes key %s", oldID),
	} {
		if !strings.Contains(rekeyOut, line) {
			t.Errorf("rekey printed no %q:\n%s", line, rekeyOut)
		}
	}

	d := startServeWithKeyring(t, db.URL, newKey, "")
	c.stop()
	sell(d.addr, "after", 3)
	readAll(d.addr)
	d.stop()
	out, err := runCodeport(t, "codes", "rekey", "--report", "--database-url", db.URL, "--codes-key", newKey)
	if wantOld := fmt.Sprintf("codes key %s: 0 ciphertexts (not in the keyring)", oldID); err != nil ||
		!strings.Contains(out, wantOld) {
		t.Fatalf("report after the old key left: %v\n%s\nwant a line %q", err, out, wantOld)
	}
}

// importCodes imports n codes named prefix-i for the sample product with keyring.
func importCodes(t *testing.T, databaseURL, keyring, prefix string, n int, extra ...string) {
	t.Helper()
	file, err := testfixture.WriteCodes(t.TempDir(), prefix, n)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"codes", "import", "--product", "10000000000001", "--database-url", databaseURL,
		"--codes-key", keyring, file}, extra...)
	if out, err := runCodeport(t, args...); err != nil {
		t.Fatalf("import %s: %v\n%s", prefix, err, out)
	}
}

type servingProcess struct {
	addr string
	stop func()
}

// startServeWithKeyring runs serve with keyring, whose current key is current.
func startServeWithKeyring(t *testing.T, databaseURL, keyring, current string) servingProcess {
	t.Helper()
	t.Setenv("CODEPORT_CODES_CURRENT_KEY_ID", current)
	addr, stop, err := serveOrRefuse(t, databaseURL, keyring)
	if err != nil {
		t.Fatalf("serve with keyring %s: %v", current, err)
	}
	return servingProcess{addr: addr, stop: stop}
}

// soldCode places an order of one code and returns the code, failing unless it completed.
func soldCode(t *testing.T, addr, apiKey, ref string) string {
	t.Helper()
	status, body := orderAndRead(t, addr, apiKey, ref)
	code := orderCode(t, status, body)
	if !strings.Contains(string(body), `"status":"completed"`) {
		t.Fatalf("order %s: %s", ref, body)
	}
	return code
}

func readCode(t *testing.T, addr, apiKey, ref string) string {
	t.Helper()
	status, body := call(t, http.MethodGet, "http://"+addr+"/v2/orders/"+ref, apiKey, "")
	return orderCode(t, status, body)
}

func orderCode(t *testing.T, status int, body []byte) string {
	t.Helper()
	var order struct {
		Products []struct{ Codes []struct{ Code string } }
	}
	if status != http.StatusOK || json.Unmarshal(body, &order) != nil || len(order.Products) != 1 ||
		len(order.Products[0].Codes) != 1 {
		t.Fatalf("order read: %d %s", status, body)
	}
	return order.Products[0].Codes[0].Code
}

// TestCodesKeysLists: `codes keys` lists the keys the database records with what each
// encrypts, needs no key, and given a keyring says each key's part in it without recording a
// key of its own.
func TestCodesKeysLists(t *testing.T) {
	t.Setenv("CODEPORT_CODES_KEY", "")
	t.Setenv("CODEPORT_CODES_CURRENT_KEY_ID", "")
	oldKey, newKey := codestest.Key(t), codestest.Key(t)
	oldID, newID := keyID(t, oldKey), keyID(t, newKey)
	db := storetest.New(t)
	importCodes(t, db.URL, oldKey, "LISTED", 3)
	table := func(args ...string) [][]string {
		t.Helper()
		out, err := runCodeport(t, append([]string{"codes", "keys", "--database-url", db.URL}, args...)...)
		if err != nil {
			t.Fatalf("codes keys %v: %v\n%s", args, err, out)
		}
		var rows [][]string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			rows = append(rows, strings.Fields(line))
		}
		return rows
	}
	// The old key, its 3 codes and its part in the keyring, under the header.
	oldKeyAs := func(role string) string { return fmt.Sprintf("[[KEY ID CIPHERTEXTS KEYRING] [%s 3 %s]]", oldID, role) }
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"without a keyring", nil, oldKeyAs("-")},
		{"the keyring in use", []string{"--codes-key", oldKey}, oldKeyAs("current")},
		{"a new key made current", []string{"--codes-key", oldKey + "," + newKey, "--codes-current-key-id", newID},
			oldKeyAs("older")},
		{"a keyring without it", []string{"--codes-key", newKey}, oldKeyAs("absent")},
		// Had a run recorded the new key, the database would list it now.
		{"nothing recorded by those runs", nil, oldKeyAs("-")},
	}
	for _, tt := range tests {
		if got := fmt.Sprint(table(tt.args...)); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}
