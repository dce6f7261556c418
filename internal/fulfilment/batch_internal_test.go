package fulfilment

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/recovery"
)

// TestBatchPanicFailsOnlyItsJobs: a panic in a batch's transaction (here a Fulfiller without a
// database) is each of its jobs' error, logged, and the goroutine that finishes batches goes on.
func TestBatchPanicFailsOnlyItsJobs(t *testing.T) {
	var logs bytes.Buffer
	b := &batcher{f: &Fulfiller{log: slog.New(slog.NewJSONHandler(&logs, nil))}, environment: "production"}
	ids := []uuid.UUID{uuid.New(), uuid.New()}
	errs := b.finish(context.Background(), ids)
	if len(errs) != len(ids) {
		t.Fatalf("%d errors for %d orders", len(errs), len(ids))
	}
	for _, err := range errs {
		var p *recovery.PanicError
		if !errors.As(err, &p) {
			t.Fatalf("error %v, want the batch's panic", err)
		}
	}
	if !strings.Contains(logs.String(), `"in":"fulfilment batch"`) {
		t.Fatalf("no log line of the panic: %s", logs.String())
	}
}
