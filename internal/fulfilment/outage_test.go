package fulfilment_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/codeport/codeport/internal/fulfilment"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/tenancy"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
	"github.com/codeport/codeport/internal/test/testprocess"
)

// byMessage counts the JSON log lines of out per message.
func byMessage(t *testing.T, out *testprocess.Buffer) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for line := range strings.Lines(out.String()) {
		var record struct{ Msg string }
		if err := json.Unmarshal([]byte(line), &record); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		counts[record.Msg]++
	}
	return counts
}

// TestDatabaseOutageLogsBoundedLines closes the workers' database to connections: River's
// producer fails to fetch jobs every few milliseconds, and a real node logged each failure
// (~69 lines a second per Pod). With repeats written once an hour, every message River logs
// appears once while hundreds of records are left out.
func TestDatabaseOutageLogsBoundedLines(t *testing.T) {
	database := storetest.New(t)
	db, err := store.Open(context.Background(), database.URL, store.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cipher := testfixture.Cipher(t)
	var out testprocess.Buffer
	cfg := fulfilment.DefaultWorkerConfig(string(tenancy.Sandbox))
	cfg.Logger = slog.New(slog.NewJSONHandler(&out, nil))
	cfg.LogRepeatsEvery = time.Hour
	w, err := fulfilment.StartWorkers(context.Background(), db, fulfilment.NewFulfiller(db, cipher, time.Second, nil), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	}()

	storetest.SetConnectable(t, database.Name, false)
	defer storetest.SetConnectable(t, database.Name, true)
	poll.Until(t, 2*time.Minute, "River to fail hundreds of times", func() (bool, string) {
		return w.LogsSuppressed() >= 300, fmt.Sprintf("%d records left out, lines %v", w.LogsSuppressed(), byMessage(t, &out))
	})
	counts := byMessage(t, &out)
	if len(counts) == 0 {
		t.Fatal("no line logged while the database was down")
	}
	for msg, n := range counts {
		if n > 1 {
			t.Errorf("%q logged %d times within the interval", msg, n)
		}
	}
}
