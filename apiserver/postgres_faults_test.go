//go:build faults

package apiserver_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/poll"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/testprocess"
)

// privatePostgres is a PostgreSQL server of this test alone, so it can be restarted.
type privatePostgres struct {
	t                  *testing.T
	bindir, data, port string
	runAs              []string
}

func startPrivatePostgres(t *testing.T) *privatePostgres {
	t.Helper()
	out, err := exec.Command("pg_config", "--bindir").Output()
	if err != nil {
		t.Fatalf("pg_config: %v", err)
	}
	dir, err := os.MkdirTemp("", "codeport-f2-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	_, port, _ := net.SplitHostPort(testprocess.Addr(t))
	p := &privatePostgres{t: t, bindir: strings.TrimSpace(string(out)), data: filepath.Join(dir, "data"), port: port}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root.
		p.runAs = []string{"runuser", "-u", "postgres", "--"}
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	p.run("initdb", "-D", p.data, "-U", "postgres", "--auth=trust", "--no-instructions")
	p.start()
	t.Cleanup(func() { p.run("pg_ctl", "-D", p.data, "-m", "immediate", "stop") })
	return p
}

func (p *privatePostgres) run(tool string, args ...string) {
	p.t.Helper()
	cmd := append(append([]string{}, p.runAs...), append([]string{filepath.Join(p.bindir, tool)}, args...)...)
	if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
		p.t.Fatalf("%s: %v\n%s", tool, err, out)
	}
}

func (p *privatePostgres) start() {
	p.run("pg_ctl", "-D", p.data, "-w", "-l", filepath.Join(p.data, "log"), "-o",
		fmt.Sprintf("-h 127.0.0.1 -p %s -k /tmp -c fsync=off", p.port), "start")
}

func (p *privatePostgres) stop() { p.run("pg_ctl", "-D", p.data, "-m", "fast", "-w", "stop") }

func (p *privatePostgres) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable", p.port)
}

// TestPostgresRestartUnderLoad (F2): PostgreSQL is stopped for a few seconds under order load.
// Requests meanwhile get the spec's 502 bodies (never a 500, never a hang), the service recovers
// within 5 s of the database returning, and no order that got a 202 is lost.
func TestPostgresRestartUnderLoad(t *testing.T) {
	pg := startPrivatePostgres(t)
	db, err := store.Open(t.Context(), pg.url(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := store.NewMigrator(db.SQL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Up(t.Context()); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s := newStack(t, stackOptions{databaseURL: pg.url()})
	tn := s.onboard(t, "acme", nil)
	s.topUp(t, tn, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100000.00"})
	key := tn.keys["sandbox"]

	var (
		mu       sync.Mutex
		accepted []string
		statuses = map[int]int{}
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				code := fmt.Sprintf("f2-%d-%d", w, i)
				r := s.call(t, "sandbox", "POST", "/v2/orders", key,
					order(code, line{"productCode": "99000000000001", "quantity": 1}))
				mu.Lock()
				statuses[r.status]++
				if r.status == 202 {
					accepted = append(accepted, code)
				}
				mu.Unlock()
				switch r.status {
				case 202:
				case 502:
					if m := r.str("message"); m != "Order could not be created. Please try again later." &&
						m != "Order processing is temporarily unavailable. Please try again later." {
						t.Errorf("502 message %q", m)
					}
				default:
					t.Errorf("status %d during the restart: %s", r.status, r.raw)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	time.Sleep(time.Second)
	pg.stop()
	time.Sleep(3 * time.Second)
	pg.start()
	poll.UntilTrue(t, 5*time.Second, "recovery after the database returned", func() bool {
		r := s.call(t, "sandbox", "POST", "/v2/orders", key, order(fmt.Sprintf("f2-probe-%d", time.Now().UnixNano()),
			line{"productCode": "99000000000001", "quantity": 1}))
		return r.status == 202
	})
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	t.Logf("statuses during the run: %v", statuses)
	if statuses[502] == 0 || statuses[202] == 0 {
		t.Fatalf("the outage was not exercised: %v", statuses)
	}
	for _, code := range accepted {
		if r := s.call(t, "sandbox", "GET", "/v2/orders/"+code, key, nil); r.status != 200 {
			t.Fatalf("accepted order %s lost: %d", code, r.status)
		}
	}
	assertLedgerMatches(t, s, s.account(t, tn, "sandbox").ID)
}
