package store_test

import (
	"context"
	"testing"

	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
)

// TestWarmOpensMinimumConnections: after Warm, the pool holds its minimum of established,
// idle connections, so the first requests of a new process do not wait for connections.
func TestWarmOpensMinimumConnections(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, storetest.New(t).URL, store.Options{MaxConns: 6, MinIdleConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.Warm(ctx)
	if s := db.Pool.Stat(); s.IdleConns() < 4 {
		t.Fatalf("after Warm: %d idle of %d connections, want at least 4", s.IdleConns(), s.TotalConns())
	}
}
