package charts_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/contracttest"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testprocess"
)

// TestCloudNativePGRuntimeRoleServesWithoutDDL sets PostgreSQL up the way the chart's
// CloudNativePG Cluster does (a database owned by the owner role, and the runtime role with the
// predefined roles the chart grants it), migrates as the owner, then runs the codeport binary as
// the runtime role, its credentials in PGUSER and PGPASSWORD and none in the URL, as the chart
// passes them: partners are provisioned, orders placed, fulfilled and refunded, while DDL is
// refused.
func TestCloudNativePGRuntimeRoleServesWithoutDDL(t *testing.T) {
	t.Parallel()
	cluster := render(t, cnpgAPI, "database.cnpg.enabled=true")["Cluster/codeport-db"]
	roles, _, _ := unstructured.NestedSlice(cluster.Object, "spec", "managed", "roles")
	var inRoles []string
	for _, r := range roles[0].(map[string]any)["inRoles"].([]any) {
		inRoles = append(inRoles, r.(string))
	}
	dbURL, owner, runtimeRole := cnpgLikeDatabase(t, inRoles)

	bin := testprocess.Binary(t)
	as := func(role string) []string {
		return append(os.Environ(), "CODEPORT_DATABASE_URL="+dbURL, "PGUSER="+role, "PGPASSWORD="+role)
	}
	migrate := exec.Command(bin, "migrate", "up")
	migrate.Env = as(owner)
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("migrate up as the owner: %v\n%s", err, out)
	}
	dir := t.TempDir()
	sandbox, running := startDev(t, bin, dir, as(runtimeRole))

	api := "http://" + sandbox + "/v2"
	var key string
	poll.Until(t, time.Minute, "codeport dev to provision the samples and serve", func() (bool, string) {
		running()
		key = sandboxKey(filepath.Join(dir, "state", "credentials.json"))
		status, _ := call(t, http.MethodGet, api+"/ping", key, "")
		return key != "" && status == http.StatusOK, fmt.Sprintf("ping: %d", status)
	})
	// dev serves as soon as keys exist; the samples' top-ups may land a moment later.
	poll.Until(t, time.Minute, "the sample wallet to be funded", func() (bool, string) {
		running()
		_, out := call(t, http.MethodGet, api+"/wallet", key, "")
		var w struct{ Balances map[string]float64 }
		_ = json.Unmarshal([]byte(out), &w)
		return w.Balances["EUR"] > 0, out
	})
	for code, product := range map[string]string{"rt-ok": "99000000000001", "rt-refund": "99000000000003"} {
		body := fmt.Sprintf(`{"externalOrderCode":%q,"currency":"EUR","orderProducts":[{"productCode":%q,"quantity":2}]}`,
			code, product)
		if status, out := call(t, http.MethodPost, api+"/orders", key, body); status != http.StatusAccepted {
			t.Fatalf("place %s: %d %s", code, status, out)
		}
	}
	for code, want := range map[string]string{"rt-ok": "completed", "rt-refund": "failed"} {
		poll.Until(t, 30*time.Second, "order "+code+" to be "+want, func() (bool, string) {
			running()
			_, out := call(t, http.MethodGet, api+"/orders/"+code, key, "")
			var o struct{ Status string }
			_ = json.Unmarshal([]byte(out), &o)
			return o.Status == want, out
		})
	}

	ctx := context.Background()
	rc, err := pgx.Connect(ctx, strings.Replace(dbURL, "://", "://"+runtimeRole+":"+runtimeRole+"@", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close(ctx) }()
	for _, ddl := range []string{
		"CREATE TABLE intruder (id int)", "DROP TABLE orders", "ALTER TABLE orders ADD COLUMN x int",
	} {
		if _, err := rc.Exec(ctx, ddl); err == nil || !strings.Contains(err.Error(), "SQLSTATE 42") {
			t.Errorf("the runtime role ran %q: %v", ddl, err)
		}
	}
}

// cnpgLikeDatabase creates, on the test server, a database owned by an owner role and a runtime
// role that is a member of inRoles, as CloudNativePG's initdb and managed roles do. Each role's
// password is its name. It returns the database's URL without credentials and the roles.
func cnpgLikeDatabase(t *testing.T, inRoles []string) (dbURL, owner, runtimeRole string) {
	t.Helper()
	ctx := context.Background()
	admin, err := storetest.ServerURL()
	if err != nil {
		t.Fatal(err)
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	name := "cpt_cnpg_" + hex.EncodeToString(suffix)
	owner, runtimeRole = name+"_owner", name+"_runtime"
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, stmt := range []string{"DROP DATABASE IF EXISTS " + name + " WITH (FORCE)",
			"DROP ROLE IF EXISTS " + runtimeRole, "DROP ROLE IF EXISTS " + owner} {
			if _, err := conn.Exec(context.Background(), stmt); err != nil {
				t.Errorf("%s: %v", stmt, err)
			}
		}
		_ = conn.Close(context.Background())
	})
	for _, stmt := range []string{
		"CREATE ROLE " + owner + " LOGIN PASSWORD '" + owner + "'",
		"CREATE DATABASE " + name + " OWNER " + owner,
		"CREATE ROLE " + runtimeRole + " LOGIN PASSWORD '" + runtimeRole + "' IN ROLE " + strings.Join(inRoles, ", "),
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.User, u.Path = nil, "/"+name
	return u.String(), owner, runtimeRole
}

// startDev starts `codeport dev` on the samples with env and returns its sandbox API's address
// and a check that fails the test once the process has exited.
func startDev(t *testing.T, bin, dir string, env []string) (sandbox string, running func()) {
	t.Helper()
	sandbox = testprocess.Addr(t)
	logPath := filepath.Join(dir, "dev.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	dev := exec.Command(bin, "dev", "--manifests", filepath.Join("..", "config", "samples"),
		"--state-dir", filepath.Join(dir, "state"), "--production-addr", testprocess.Addr(t), "--sandbox-addr", sandbox)
	dev.Env = env
	dev.Stdout, dev.Stderr = log, log
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- dev.Wait() }()
	t.Cleanup(func() {
		_ = dev.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			_ = err
		case <-time.After(30 * time.Second):
			_ = dev.Process.Kill()
		}
		_ = log.Close()
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("codeport dev:\n%s", out)
		}
	})
	return sandbox, func() {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("codeport dev exited: %v", err)
		default:
		}
	}
}

// sandboxKey reads the sample partner's sandbox key from codeport dev's credentials.json.
func sandboxKey(path string) string {
	creds, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var c struct {
		Partners map[string]struct {
			Sandbox struct{ APIKey string } `json:"sandbox"`
		} `json:"partners"`
	}
	if json.Unmarshal(creds, &c) != nil {
		return ""
	}
	return c.Partners["partners/acme"].Sandbox.APIKey
}

// call sends a request with the partner's key and returns the status and body (0 when the
// server does not answer).
func call(t *testing.T, method, target, key, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := contracttest.Wrap(t, nil).Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}
