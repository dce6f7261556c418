package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/codes/codestest"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/contracttest"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
	"github.com/codeport/codeport/internal/test/testprocess"
)

// topUps counts the top-ups in the ledgers.
const topUps = `SELECT count(*) FROM wallet_entries WHERE kind = 'top_up'`

// The drill's catalog: plentiful has stock for every order, scarce runs out, so orders of it
// that were in flight in the backup can end failed or partial and be refunded.
const (
	plentiful = "10000000000001"
	scarce    = "10000000000002"
	// scarceStock is how many codes of scarce are imported.
	scarceStock = 3
	// plentifulStock is how many codes of plentiful are imported; the load orders at most
	// plentifulLoad of them, however fast the machine places orders, so that the order placed
	// after the restore finds stock.
	plentifulStock, plentifulLoad = 400, 300
	// clients place orders at once.
	clients = 4
)

// TestBackupRestoreDrill runs the restore procedure of docs/operations.md against a backup taken
// while orders flow: pg_dump (custom format) of database A during the load, pg_restore into a
// fresh database B, `migrate up`, the operator and serve on B with the same codes keyring and
// the same custom resources. On B every order of the backup reads through the API, completed ones
// with the codes they had on A; the orders the backup caught in flight finish or are refunded
// (their River jobs were in the backup); every ledger sums to its balance; the partner's key
// authenticates and its allowlist still refuses other addresses. What the custom resources
// gained after the backup, a key and a top-up, the operator writes into B again, and it replaces
// no key. Serve on B with another keyring refuses to start: without the keyring, the backup's
// codes are lost.
func TestBackupRestoreDrill(t *testing.T) {
	dump, restore := pgTools(t)
	kubernetes := startKubernetes(t)
	binary := testprocess.Binary(t)
	keyring := codestest.Key(t)
	k := kubernetes()

	a := storetest.New(t)
	operatorOnA := k.startOperator(t, binary, a.URL, keyring)
	key := k.onboard(t)
	importCodes(t, binary, a.URL, keyring, plentiful, plentifulStock)
	importCodes(t, binary, a.URL, keyring, scarce, scarceStock)
	dbA := open(t, a.URL)

	// Phase one: serve with its workers; orders complete.
	api := &atomic.Pointer[string]{}
	withWorkers := startServe(t, binary, a.URL, keyring, "--workers=true")
	api.Store(&withWorkers.addr)
	load := startLoad(t, api, key)
	poll.Until(t, time.Minute, "orders completed on A", func() (bool, string) {
		n := count(t, dbA, `SELECT count(*) FROM orders WHERE status <> 'processing'`)
		return n >= 20, fmt.Sprintf("%d finished", n)
	})
	// Phase two: the API goes on without workers, so the backup holds orders in flight for
	// certain (with workers, how many it catches is chance).
	apiOnly := startServe(t, binary, a.URL, keyring, "--workers=false")
	api.Store(&apiOnly.addr)
	withWorkers.proc.Stop(30 * time.Second)
	poll.Until(t, time.Minute, "orders in flight on A", func() (bool, string) {
		n := count(t, dbA, `SELECT count(*) FROM orders WHERE status = 'processing'`)
		return n >= 10, fmt.Sprintf("%d processing", n)
	})

	backup := filepath.Join(t.TempDir(), "codeport.dump")
	acceptedBefore := load.accepted()
	dumpStart := time.Now()
	run(t, dump, "--format=custom", "--file="+backup, "--dbname="+a.URL)
	dumpTook := time.Since(dumpStart)
	duringDump := len(load.accepted()) - len(acceptedBefore)
	// Orders keep coming after the dump: none of them may appear on B.
	load.dumped.Store(true)
	poll.Until(t, time.Minute, "orders sent after the dump", func() (bool, string) {
		n := len(load.late())
		return n >= clients, fmt.Sprintf("%d", n)
	})
	if err := load.stop(); err != nil {
		t.Fatal(err)
	}
	acceptedAfter, late := load.accepted(), load.late()
	onA := readOrders(t, apiOnly.addr, key, refsOf(t, dbA))
	// After the backup, a key is issued and a top-up recorded: the custom resources hold them,
	// the backup does not.
	k.create(t, testfixture.APIKey("acme", "production", testfixture.Named("acme-late"),
		testfixture.InNamespace(namespace)), testfixture.WalletTopUp("acme-production",
		testfixture.TopUp("late", "EUR", "500.00"), testfixture.InNamespace(namespace)))
	lateKey := k.key(t, "acme-late")
	poll.Until(t, time.Minute, "the late top-up credited on A", func() (bool, string) {
		n := count(t, dbA, topUps)
		return n == 2, fmt.Sprintf("%d top-ups", n)
	})
	// The restore begins: codeport stops.
	operatorOnA.Stop(30 * time.Second)
	apiOnly.proc.Stop(30 * time.Second)

	b := createEmpty(t)
	restoreStart := time.Now()
	run(t, restore, "--no-owner", "--no-acl", "--exit-on-error", "--dbname="+b.URL, backup)
	restoreTook := time.Since(restoreStart)
	if out, err := exec.Command(binary, "migrate", "up", "--database-url", b.URL).CombinedOutput(); err != nil {
		t.Fatalf("migrate up on the restored database: %v\n%s", err, out)
	}
	dbB := open(t, b.URL)
	restored := refsOf(t, dbB)
	inFlight := count(t, dbB, `SELECT count(*) FROM orders WHERE status = 'processing'`)
	if inFlight == 0 {
		t.Fatal("the backup holds no order in flight")
	}
	if n := count(t, dbB, topUps); n != 1 {
		t.Fatalf("%d top-ups in the backup, want the opening one alone", n)
	}
	for ref := range acceptedBefore {
		if !restored[ref] {
			t.Errorf("order %s, accepted before the dump started, is not in the backup", ref)
		}
	}
	for ref := range late {
		if restored[ref] {
			t.Errorf("order %s, sent after the dump ended, is in the backup", ref)
		}
	}

	// Refused, serve exits at once; one that serves anyway is stopped by the deadline.
	refusal, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	otherKeyring := serveArgs(b.URL, codestest.Key(t), testprocess.Addr(t))
	if out, err := exec.CommandContext(refusal, binary, otherKeyring...).CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "does not match the key this database's codes and secrets are encrypted with") {
		t.Fatalf("serve on the restored database with another keyring: %v, want a refusal naming the keyring:\n%s",
			err, out)
	}

	// The operator makes the restored database say what the custom resources say: the top-up
	// and the key of after the backup come back, the keys of before stay.
	k.startOperator(t, binary, b.URL, keyring)
	poll.Until(t, time.Minute, "the late top-up credited on B", func() (bool, string) {
		n := count(t, dbB, topUps)
		return n == 2, fmt.Sprintf("%d top-ups", n)
	})
	onB := startServe(t, binary, b.URL, keyring, "--workers=true")
	poll.Until(t, time.Minute, "the key issued after the backup authenticates on B", func() (bool, string) {
		status, body := get(t, onB.addr, lateKey, "/v2/orders/"+slices.Sorted(maps.Keys(restored))[0], "")
		return status == http.StatusOK, fmt.Sprintf("%d %s", status, body)
	})
	if again := k.key(t, "acme-production"); again != key {
		t.Errorf("the operator on the restored database replaced the key %s… with %s…", key[:12], again[:12])
	}
	poll.Until(t, time.Minute, "the orders in flight in the backup finished on B", func() (bool, string) {
		n := count(t, dbB, `SELECT count(*) FROM orders WHERE status = 'processing'`)
		return n == 0, fmt.Sprintf("%d of %d still processing", n, inFlight)
	})
	afterRestore := readOrders(t, onB.addr, key, restored)
	checkOrders(t, onA, afterRestore)
	checkLedgers(t, dbB)
	checkAccess(t, onB.addr, key)
	t.Logf("%d orders in the backup, %d of them in flight; %d orders accepted before the dump, %d while it ran, "+
		"%d in all; pg_dump took %s, pg_restore %s", len(restored), inFlight, len(acceptedBefore), duringDump,
		len(acceptedAfter), dumpTook.Round(time.Millisecond), restoreTook.Round(time.Millisecond))
}

// order is what the API answers for an order.
type order struct {
	Status   string `json:"status"`
	Products []struct {
		ProductCode string `json:"productCode"`
		Codes       []struct {
			Code string `json:"code"`
		} `json:"codes"`
	} `json:"products"`
}

func (o order) codes() []string {
	var out []string
	for _, p := range o.Products {
		for _, c := range p.Codes {
			out = append(out, c.Code)
		}
	}
	slices.Sort(out)
	return out
}

// checkOrders compares the orders read on B with the same orders read on A: an order finished
// on A reads the same on B, one in flight on A has finished on B, and no code is delivered twice.
func checkOrders(t *testing.T, onA, onB map[string]order) {
	t.Helper()
	delivered := map[string]string{}
	for ref, b := range onB {
		a := onA[ref]
		switch {
		case b.Status == "processing":
			t.Errorf("order %s still processing on B", ref)
		case a.Status != "processing" && (a.Status != b.Status || !slices.Equal(a.codes(), b.codes())):
			t.Errorf("order %s reads %s %v on B, %s %v on A", ref, b.Status, b.codes(), a.Status, a.codes())
		case b.Status == "completed" && len(b.codes()) == 0:
			t.Errorf("order %s completed without codes on B", ref)
		}
		for _, c := range b.codes() {
			if c == "" {
				t.Errorf("order %s reads an empty code on B", ref)
			}
			if other, ok := delivered[c]; ok {
				t.Errorf("code %s delivered to orders %s and %s", c, other, ref)
			}
			delivered[c] = ref
		}
	}
}

// checkLedgers asserts that every balance is the sum of its ledger entries and not negative.
func checkLedgers(t *testing.T, db *store.DB) {
	t.Helper()
	rows, err := db.Pool.Query(t.Context(), `SELECT b.account_id::text, b.currency, b.balance,
		COALESCE((SELECT sum(amount) FROM wallet_entries e
		WHERE e.account_id = b.account_id AND e.currency = b.currency), 0)::bigint
		FROM wallet_balances b`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var account, currency string
		var balance, sum int64
		if err := rows.Scan(&account, &currency, &balance, &sum); err != nil {
			t.Fatal(err)
		}
		n++
		if balance != sum || balance < 0 {
			t.Errorf("wallet %s %s: balance %d, ledger sum %d", account, currency, balance, sum)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("no wallet on B")
	}
}

// checkAccess places a new order on B with the partner's key, and checks that the allowlist
// refuses the same key from another address and that an unknown key is refused.
func checkAccess(t *testing.T, addr, key string) {
	t.Helper()
	ref := "after-restore"
	if status, body := place(t, addr, key, ref, plentiful); status != http.StatusAccepted {
		t.Fatalf("order after the restore: %d %s", status, body)
	}
	var o order
	poll.Until(t, time.Minute, "the order after the restore finished", func() (bool, string) {
		o = readOrder(t, addr, key, ref)
		return o.Status != "processing", o.Status
	})
	if o.Status != "completed" || len(o.codes()) != 1 {
		t.Fatalf("order after the restore: %+v", o)
	}
	status, body := get(t, addr, key, "/v2/orders/"+ref, "192.0.2.7")
	if want := "Requests from IP address 192.0.2.7 are not allowed"; status != http.StatusForbidden ||
		!strings.Contains(string(body), want) {
		t.Errorf("the key from an address off the allowlist: %d %s, want 403 %q", status, body, want)
	}
	if status, body := get(t, addr, newAPIKey(t), "/v2/orders/"+ref, ""); status != http.StatusUnauthorized {
		t.Errorf("a key the backup does not hold: %d %s, want 401", status, body)
	}
}

// load places orders from several clients until stopped, recording the references the API
// accepted, and apart those sent once dumped was set.
type load struct {
	dumped atomic.Bool
	mu     sync.Mutex
	refs   map[string]bool
	sent   map[string]bool
	cancel context.CancelFunc
	done   sync.WaitGroup
	errs   chan error
	// plentifulLeft is how many more orders of plentiful the load may place; then it orders scarce.
	plentifulLeft atomic.Int64
}

func startLoad(t *testing.T, api *atomic.Pointer[string], key string) *load {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{refs: map[string]bool{}, sent: map[string]bool{}, cancel: cancel, errs: make(chan error, clients)}
	l.plentifulLeft.Store(plentifulLoad)
	client := contracttest.Wrap(t, &http.Client{Timeout: 30 * time.Second})
	for c := range clients {
		l.done.Add(1)
		go func() {
			defer l.done.Done()
			for i := 0; ctx.Err() == nil; i++ {
				product := plentiful
				if i%4 == 3 || l.plentifulLeft.Add(-1) < 0 {
					product = scarce
				}
				ref := fmt.Sprintf("drill-%d-%d", c, i)
				if l.dumped.Load() {
					l.mu.Lock()
					l.sent[ref] = true
					l.mu.Unlock()
				}
				err := placeUntilAnswered(ctx, client, api, key, ref, product)
				switch {
				case ctx.Err() != nil:
					return
				case err != nil:
					l.errs <- err
					return
				}
				l.mu.Lock()
				l.refs[ref] = true
				l.mu.Unlock()
			}
		}()
	}
	t.Cleanup(func() { _ = l.stop() })
	return l
}

// placeUntilAnswered places an order at the serve process that takes the load now, sending it
// again while no answer comes or the answer is an error of the server's: a process being stopped
// refuses connections, and the same externalOrderCode is safe to send twice (a replay answers
// 200). It gives up after a minute.
func placeUntilAnswered(
	ctx context.Context, client *http.Client, api *atomic.Pointer[string], key, ref, product string,
) error {
	deadline := time.Now().Add(time.Minute)
	for {
		status, body, err := post(ctx, client, *api.Load(), key, ref, product)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil && (status == http.StatusAccepted || status == http.StatusOK):
			return nil
		case err == nil && status < http.StatusInternalServerError:
			return fmt.Errorf("order %s: %d %s", ref, status, body)
		case time.Now().After(deadline) && err != nil:
			return fmt.Errorf("order %s unanswered for a minute: %w", ref, err)
		case time.Now().After(deadline):
			return fmt.Errorf("order %s failing for a minute: %d %s", ref, status, body)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (l *load) accepted() map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.refs)
}

// late is the orders sent after dumped was set.
func (l *load) late() map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.sent)
}

// stop ends the load and returns the first order refused or unanswered, if any.
func (l *load) stop() error {
	l.cancel()
	l.done.Wait()
	select {
	case err := <-l.errs:
		return err
	default:
		return nil
	}
}

type serving struct {
	addr string
	proc *testprocess.Process
}

func serveArgs(databaseURL, keyring, addr string) []string {
	return []string{"serve", "--environment", "production", "--addr", addr, "--metrics-addr", "",
		"--redis-url", "", "--database-url", databaseURL, "--codes-key", keyring, "--codes-current-key-id", "",
		"--database-min-idle-conns", "1", "--trusted-proxies", "127.0.0.1/32"}
}

func startServe(t *testing.T, binary, databaseURL, keyring string, extra ...string) serving {
	t.Helper()
	addr := testprocess.Addr(t)
	p := testprocess.Start(t, &testprocess.Process{Name: "serve " + strings.Join(extra, " "), Binary: binary,
		Args: append(serveArgs(databaseURL, keyring, addr), extra...), ReadyURL: "http://" + addr + "/readyz"})
	return serving{addr: addr, proc: p}
}

// importCodes imports n codes of product with `codes import`.
func importCodes(t *testing.T, binary, databaseURL, keyring, product string, n int) {
	t.Helper()
	file, err := testfixture.WriteCodes(t.TempDir(), "DRILL-"+product, n)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary, "codes", "import", "--product", product, "--database-url", databaseURL,
		"--codes-key", keyring, file).CombinedOutput()
	if err != nil {
		t.Fatalf("codes import: %v\n%s", err, out)
	}
}

// newAPIKey is a well-formed production key that no database holds.
func newAPIKey(t *testing.T) string {
	t.Helper()
	k, err := auth.GenerateKey("production")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func open(t *testing.T, url string) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), url, store.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

// createEmpty creates a database with nothing in it, as a restore needs, dropped at the end.
func createEmpty(t *testing.T) *storetest.Database {
	t.Helper()
	d, err := storetest.Create(t.Context(), "drill_restored", false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := d.Drop(ctx); err != nil {
			t.Errorf("drop the restored database: %v", err)
		}
	})
	return d
}

func count(t *testing.T, db *store.DB, query string) int {
	t.Helper()
	var n int
	if err := db.Pool.QueryRow(t.Context(), query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// refsOf is the external reference of every order in db.
func refsOf(t *testing.T, db *store.DB) map[string]bool {
	t.Helper()
	rows, err := db.Pool.Query(t.Context(), `SELECT external_order_code FROM orders`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	refs := map[string]bool{}
	for rows.Next() {
		var ref string
		if err := rows.Scan(&ref); err != nil {
			t.Fatal(err)
		}
		refs[ref] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return refs
}

// readOrders reads every order of refs through the API at addr.
func readOrders(t *testing.T, addr, key string, refs map[string]bool) map[string]order {
	t.Helper()
	out := make(map[string]order, len(refs))
	for ref := range refs {
		out[ref] = readOrder(t, addr, key, ref)
	}
	return out
}

func readOrder(t *testing.T, addr, key, ref string) order {
	t.Helper()
	status, body := get(t, addr, key, "/v2/orders/"+ref, "")
	var o order
	if status != http.StatusOK {
		t.Fatalf("read order %s: %d %s", ref, status, body)
	}
	if err := json.Unmarshal(body, &o); err != nil {
		t.Fatalf("read order %s: %v: %s", ref, err, body)
	}
	return o
}

func get(t *testing.T, addr, key, path, forwardedFor string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+path, http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", key)
	if forwardedFor != "" {
		req.Header.Set("X-Forwarded-For", forwardedFor)
	}
	status, body, err := do(contracttest.Wrap(t, nil), req)
	if err != nil {
		t.Fatal(err)
	}
	return status, body
}

func place(t *testing.T, addr, key, ref, product string) (int, []byte) {
	t.Helper()
	status, body, err := post(t.Context(), contracttest.Wrap(t, nil), addr, key, ref, product)
	if err != nil {
		t.Fatal(err)
	}
	return status, body
}

// post places an order of one unit of product.
func post(ctx context.Context, client *http.Client, addr, key, ref, product string) (int, []byte, error) {
	body := fmt.Sprintf(`{"externalOrderCode":%q,"currency":"EUR","orderProducts":[{"productCode":%q,"quantity":1}]}`,
		ref, product)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v2/orders", strings.NewReader(body))
	if err != nil {
		return 0, nil, fmt.Errorf("order request: %w", err)
	}
	req.Header.Set("x-api-key", key)
	req.Header.Set("Content-Type", "application/json")
	return do(client, req)
}

func do(client *http.Client, req *http.Request) (int, []byte, error) {
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: read the answer: %w", req.Method, req.URL.Path, err)
	}
	return resp.StatusCode, body, nil
}

// run runs a command to its end, failing the test with its output when it fails.
func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.CommandContext(t.Context(), name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(name), err, out)
	}
}

// pgTools finds pg_dump and pg_restore able to back up the test server: of the server's major
// version or newer (pg_dump refuses an older client's dump of a newer server).
func pgTools(t *testing.T) (dump, restore string) {
	t.Helper()
	admin, err := storetest.ServerURL()
	if err != nil {
		t.Fatal(err)
	}
	db := open(t, admin)
	var num int
	if err := db.Pool.QueryRow(t.Context(), `SELECT current_setting('server_version_num')::int`).Scan(&num); err != nil {
		t.Fatal(err)
	}
	major := num / 10000
	candidates := []string{filepath.Join("/usr/lib/postgresql", strconv.Itoa(major), "bin")}
	if path, err := exec.LookPath("pg_dump"); err == nil {
		candidates = append(candidates, filepath.Dir(path))
	}
	for _, dir := range candidates {
		dump, restore := filepath.Join(dir, "pg_dump"), filepath.Join(dir, "pg_restore")
		out, err := exec.Command(dump, "--version").Output()
		if err != nil {
			continue
		}
		if v := clientMajor(string(out)); v >= major {
			if _, err := os.Stat(restore); err == nil {
				return dump, restore
			}
		}
	}
	t.Fatalf("no pg_dump and pg_restore of PostgreSQL %d or newer (looked in %v): "+
		"apt-get install postgresql-client-%d, or run hack/deps.sh", major, candidates, major)
	return "", ""
}

// clientMajor is the major version in pg_dump --version's "pg_dump (PostgreSQL) 15.18 (...)".
func clientMajor(version string) int {
	_, after, ok := strings.Cut(version, ") ")
	if !ok {
		return 0
	}
	majorText, _, _ := strings.Cut(after, ".")
	n, err := strconv.Atoi(strings.TrimSpace(majorText))
	if err != nil {
		return 0
	}
	return n
}
