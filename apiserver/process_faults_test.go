//go:build faults

package apiserver_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/testprocess"
)

// serveProcess runs `codeport serve` as a real process that the test can kill -9.
type serveProcess struct {
	t     *testing.T
	proc  *testprocess.Process
	kills int
}

// restart kills the process and starts it again on its address, without waiting for it: the
// load retries until it answers.
func (p *serveProcess) restart() {
	if err := p.proc.Restart(context.Background()); err != nil {
		p.t.Fatal(err)
	}
	p.kills++
}

// killEvery is how many accepted orders a serve process lives at most during the load.
const killEvery = 50

// killUntil kills and restarts the process after every killEvery accepted orders (and at least
// every 700 ms) until done is closed, so the load sees about twenty crashes however fast this
// machine places orders.
func (p *serveProcess) killUntil(done <-chan struct{}, accepted *atomic.Int32) {
	killer := time.NewTicker(20 * time.Millisecond)
	defer killer.Stop()
	giveUp := time.After(5 * time.Minute)
	lastKill, killedAt := time.Now(), int32(0)
	for {
		select {
		case <-done:
			return
		case <-killer.C:
			if n := accepted.Load(); n >= killedAt+killEvery || time.Since(lastKill) > 700*time.Millisecond {
				p.restart()
				lastKill, killedAt = time.Now(), n
			}
		case <-giveUp:
			p.t.Fatal("load did not finish")
		}
	}
}

// TestKillServeDuringLoad (F1): the serve process (API and workers) is killed with SIGKILL again
// and again while 1,000 orders are placed. Every order that got a 202 (or a replay of one) exists
// and reaches a terminal state, no code is delivered twice, and the ledger equals the balance.
func TestKillServeDuringLoad(t *testing.T) {
	db := storetest.New(t)
	s := newStack(t, stackOptions{databaseURL: db.URL, noWorker: true})
	tn := s.onboard(t, "acme", nil)
	s.topUp(t, tn, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100000.00"})
	acct := s.account(t, tn, "sandbox")

	// The process is restarted every 0.7 s at the latest; opening the default eight idle
	// connections would take a good part of each life.
	addr := testprocess.Addr(t)
	proc := &serveProcess{t: t, proc: testprocess.Start(t, &testprocess.Process{Name: "serve",
		Binary: testprocess.Binary(t),
		Args: []string{"serve", "--environment", "sandbox", "--addr", addr, "--metrics-addr", "",
			"--database-url", db.URL, "--codes-key", sharedCodesKey, "--fulfilment-rescue-after", "3s",
			"--database-min-idle-conns", "1"}})}

	const total = 1000
	var accepted atomic.Int32
	var next atomic.Int32
	accepted2 := sync.Map{}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	httpClient := servedDocuments.Contracts().Wrap(t, &http.Client{Timeout: 5 * time.Second})
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				n := next.Add(1)
				if n > total {
					return
				}
				code := fmt.Sprintf("f1-%d", n)
				product := "99000000000001"
				if n%5 == 0 {
					product = "99000000000004" // partial: refunds too
				}
				if placeUntilAnswered(ctx, t, httpClient, "http://"+addr+"/v2/orders", tn.keys["sandbox"], code, product) {
					accepted.Add(1)
					accepted2.Store(code, true)
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	proc.killUntil(done, &accepted)
	if int(accepted.Load()) != total {
		t.Fatalf("%d of %d orders accepted", accepted.Load(), total)
	}
	if proc.kills < total/killEvery/2 {
		t.Fatalf("only %d kills during the load", proc.kills)
	}
	t.Logf("1,000 orders placed across %d kills", proc.kills)

	deadline := time.Now().Add(3 * time.Minute)
	for {
		processing := count(t, s.db, `SELECT count(*) FROM orders WHERE account_id = $1 AND status = 'processing'`,
			acct.ID)
		if processing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d orders still processing", processing)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var orders, codes, distinct int64
	if err := s.db.Pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM orders WHERE account_id = $1),
		count(*), count(DISTINCT digest) FROM delivered_codes d
		JOIN orders o ON o.id = d.order_id WHERE o.account_id = $1`, acct.ID).Scan(&orders, &codes, &distinct); err != nil {
		t.Fatal(err)
	}
	if orders != total || codes != distinct {
		t.Fatalf("%d orders (want %d); %d codes, %d distinct", orders, total, codes, distinct)
	}
	accepted2.Range(func(k, _ any) bool {
		n := count(t, s.db, `SELECT count(*) FROM orders WHERE account_id = $1 AND external_order_code = $2`, acct.ID, k)
		if n != 1 {
			t.Errorf("accepted order %v: %d rows", k, n)
		}
		return true
	})
	assertLedgerMatches(t, s, acct.ID)
}

// placeUntilAnswered places an order of two units of product as code at url, and retries the
// same code until the API answers: idempotency makes it safe. It reports whether the order was
// accepted (202, or 200 for a replay).
func placeUntilAnswered(
	ctx context.Context, t *testing.T, httpClient *http.Client, url, key, code, product string,
) bool {
	t.Helper()
	body := fmt.Sprintf(`{"externalOrderCode":%q,"currency":"EUR","orderProducts":[{"productCode":%q,"quantity":2}]}`,
		code, product)
	for ctx.Err() == nil {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("x-api-key", key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := httpClient.Do(req)
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == 202 || resp.StatusCode == 200 {
			return true
		}
		if resp.StatusCode >= 500 {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		t.Errorf("order %s: %d", code, resp.StatusCode)
		return false
	}
	return false
}
