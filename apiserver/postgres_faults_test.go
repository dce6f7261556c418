//go:build faults

package apiserver_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/poll"
)

// TestPostgresRestartUnderLoad (F2): PostgreSQL is stopped under order load for longer than a
// placement waits for it (10 s). Requests meanwhile get the spec's 502 bodies (never a 500,
// never a hang), the service recovers within 5 s of the database returning, and no order that
// got a 202 is lost.
func TestPostgresRestartUnderLoad(t *testing.T) {
	pg := storetest.StartPrivateServer(t)
	db, err := store.Open(t.Context(), pg.URL(), store.Options{})
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

	s := newStack(t, stackOptions{databaseURL: pg.URL()})
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
	pg.Stop()
	time.Sleep(12 * time.Second)
	pg.Start()
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
