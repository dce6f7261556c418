package apiserver_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/fulfilment"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/tenancy"
)

const workerProcessEnv = "CODEPORT_TEST_WORKER_DATABASE"

// runWorkerProcess works the sandbox queue slowly (each finishing transaction lingers), so a
// kill -9 lands in the middle of deliveries.
func runWorkerProcess(url string) int {
	ctx := context.Background()
	db, err := store.Open(ctx, url, store.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	raw, _ := codes.ParseKey(sharedCodesKey)
	cipher, _ := codes.NewCipher(raw)
	linger := func(context.Context, store.Querier, []fulfilment.Finished) error {
		time.Sleep(40 * time.Millisecond)
		return nil
	}
	f := fulfilment.NewFulfiller(db, cipher, time.Second, nil, linger)
	cfg := fulfilment.DefaultWorkerConfig(string(tenancy.Sandbox))
	cfg.Concurrency = 4
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	if _, err := fulfilment.StartWorkers(ctx, db, f, cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	select {}
}

func finishedOrders(t *testing.T, db *store.DB, accountID any) int64 {
	t.Helper()
	return count(t, db, `SELECT count(*) FROM orders WHERE account_id = $1 AND status <> 'processing'`, accountID)
}

// TestFulfilmentSurvivesWorkerKill kills the worker process with SIGKILL mid-way through a
// batch of orders. After another worker takes over, every order reaches its terminal state, no
// unit is delivered twice, and the ledger still equals the balances.
func TestFulfilmentSurvivesWorkerKill(t *testing.T) {
	t.Parallel()
	// A database of its own: the worker process works every sandbox job of its database, and
	// the kill leaves jobs to be rescued only after RescueAfter.
	database := storetest.New(t)
	s := newStack(t, stackOptions{noWorker: true, databaseURL: database.URL})
	tn := s.onboard(t, "acme", nil)
	s.topUp(t, tn, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "10000.00"})
	acct := s.account(t, tn, "sandbox")
	const orders = 40
	want := map[string]string{}
	for i := range orders {
		code, product, status := fmt.Sprintf("k-%d", i), "99000000000001", "completed"
		switch i % 4 {
		case 1:
			product, status = "99000000000004", "partially_completed"
		case 2:
			product, status = "99000000000003", "failed"
		}
		r := s.call(t, "sandbox", "POST", "/v2/orders", tn.keys["sandbox"],
			order(code, line{"productCode": product, "quantity": 4}))
		if r.status != 202 {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		want[code] = status
	}

	worker := exec.Command(os.Args[0], "-test.run=^$")
	worker.Env = append(os.Environ(), workerProcessEnv+"="+database.URL)
	worker.Stderr = os.Stderr
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for finishedOrders(t, s.db, acct.ID) < 5 {
		if time.Now().After(deadline) {
			_ = worker.Process.Kill()
			t.Fatal("worker process finished no orders")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := worker.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = worker.Wait()
	if n := finishedOrders(t, s.db, acct.ID); n == orders {
		t.Fatalf("the kill came too late to interrupt anything (%d finished)", n)
	}

	// A new worker takes over; jobs the dead one held are rescued after RescueAfter.
	f := fulfilment.NewFulfiller(s.db, s.cipher, time.Second, nil)
	cfg := fulfilment.DefaultWorkerConfig(string(tenancy.Sandbox))
	cfg.JobTimeout, cfg.RescueAfter = time.Second, 2*time.Second
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	w, err := fulfilment.StartWorkers(context.Background(), s.db, f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	deadline = time.Now().Add(120 * time.Second)
	for finishedOrders(t, s.db, acct.ID) < orders {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d orders finished after the restart", finishedOrders(t, s.db, acct.ID), orders)
		}
		time.Sleep(100 * time.Millisecond)
	}

	seen := map[string]bool{}
	for code, status := range want {
		r := s.call(t, "sandbox", "GET", "/v2/orders/"+code, tn.keys["sandbox"], nil)
		if r.str("status") != status {
			t.Fatalf("order %s: %s, want %s", code, r.str("status"), status)
		}
		products, _ := r.body["products"].([]any)
		delivered := 0
		for _, p := range products {
			for _, c := range p.(map[string]any)["codes"].([]any) {
				value := c.(map[string]any)["code"].(string)
				if seen[value] {
					t.Fatalf("code %s delivered twice", value)
				}
				seen[value] = true
				delivered++
			}
		}
		wantUnits := map[string]int{"completed": 4, "partially_completed": 2, "failed": 0}[status]
		if delivered != wantUnits {
			t.Fatalf("order %s delivered %d units, want %d", code, delivered, wantUnits)
		}
	}
	refunds := count(t, s.db, `SELECT count(*) FROM wallet_entries WHERE account_id = $1 AND kind = 'refund'`, acct.ID)
	if refunds != 20 { // 10 partial + 10 failed orders, one refund each
		t.Fatalf("%d refunds, want 20", refunds)
	}
	assertLedgerMatches(t, s, acct.ID)
}
