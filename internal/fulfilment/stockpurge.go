package fulfilment

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/codeport/codeport/internal/store"
)

// PurgeStockArgs is the job that deletes from code_stock the rows of codes already delivered:
// those deliveries left before the upgrade to store.StockDeleteSchemaVersion, or while an older
// binary ran (store.PurgeDeliveredStock).
type PurgeStockArgs struct{}

// Kind names the job.
func (PurgeStockArgs) Kind() string { return "codeport.purge_delivered_stock" }

const (
	// PurgeStockEvery is how often the purge runs (on the one elected River leader). After the
	// upgrade's first purge has finished, a run reads one empty index page.
	PurgeStockEvery = 10 * time.Minute
	// purgeStockBatch bounds one DELETE, so a purge never holds many row locks or writes much
	// WAL at once, and placements' deliveries go between its batches.
	purgeStockBatch = 2000
	// purgeStockFor bounds one run; the next run goes on where it stopped.
	purgeStockFor = 4 * time.Minute
)

type purgeStockWorker struct {
	river.WorkerDefaults[PurgeStockArgs]
	db *store.DB
}

// Timeout lets a run finish its last batch after purgeStockFor.
func (w *purgeStockWorker) Timeout(*river.Job[PurgeStockArgs]) time.Duration {
	return purgeStockFor + time.Minute
}

// Work records the products older binaries imported, whose stock the gauge must go on
// reporting once their last code is delivered, then purges delivered codes in batches for up to
// purgeStockFor.
func (w *purgeStockWorker) Work(ctx context.Context, _ *river.Job[PurgeStockArgs]) error {
	if err := store.RecordStockProducts(ctx, w.db.Pool); err != nil {
		return err
	}
	until := time.Now().Add(purgeStockFor)
	for time.Now().Before(until) {
		n, err := store.PurgeDeliveredStock(ctx, w.db.Pool, purgeStockBatch)
		if err != nil || n < purgeStockBatch {
			return err
		}
	}
	return nil
}

// purgeStockJob is the purge's schedule, its jobs in queue.
func purgeStockJob(queue string) *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(PurgeStockEvery),
		func() (river.JobArgs, *river.InsertOpts) {
			return PurgeStockArgs{}, &river.InsertOpts{Queue: queue}
		}, nil)
}
