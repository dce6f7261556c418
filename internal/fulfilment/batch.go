package fulfilment

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/recovery"
)

// batcher gathers the orders of an environment's jobs that run at the same time into
// FulfilMany calls: a job hands its order over and waits for the transaction that finished it.
// A transaction takes the orders handed over within gather of the first, up to maxBatch: River
// starts the jobs of one fetch one by one, and gathering them costs an order alone no more than
// gather, while a backlog is finished many orders per statement. The job
// is marked completed by River after that transaction committed; a crash in between leaves the
// job to be rescued, and its rerun finds the order finished.
type batcher struct {
	f           *Fulfiller
	environment string
	requests    chan request
	maxBatch    int
	gather      time.Duration
	// timeout bounds one transaction.
	timeout time.Duration
}

// request is one job's order, waiting for its outcome.
type request struct {
	orderID uuid.UUID
	done    chan error
}

// start runs transactions goroutines that finish batches until ctx ends; wg counts them.
func (b *batcher) start(ctx context.Context, transactions int, wg *sync.WaitGroup) {
	for range max(transactions, 1) {
		wg.Go(func() { b.run(ctx) })
	}
}

func (b *batcher) run(ctx context.Context) {
	batch := make([]request, 0, b.maxBatch)
	ids := make([]uuid.UUID, 0, b.maxBatch)
	for {
		batch, ids = batch[:0], ids[:0]
		select {
		case <-ctx.Done():
			return
		case r := <-b.requests:
			batch = append(batch, r)
		}
		gathered := time.NewTimer(b.gather)
	fill:
		for len(batch) < b.maxBatch {
			select {
			case r := <-b.requests:
				batch = append(batch, r)
			case <-gathered.C:
				break fill
			}
		}
		gathered.Stop()
		for _, r := range batch {
			ids = append(ids, r.orderID)
		}
		txCtx, cancel := context.WithTimeout(ctx, b.timeout)
		errs := b.finish(txCtx, ids)
		cancel()
		for i, r := range batch {
			r.done <- errs[i]
		}
	}
}

// finish runs one batch's transaction. A panic in it fails that batch's jobs, which River
// retries (their reruns find each order as the rolled-back transaction left it), instead of
// ending the process and every other environment's fulfilment with it.
func (b *batcher) finish(ctx context.Context, ids []uuid.UUID) (errs []error) {
	defer func() {
		if v := recover(); v != nil {
			err := recovery.Recovered(ctx, b.f.log, "fulfilment batch", v)
			errs = make([]error, len(ids))
			for i := range errs {
				errs[i] = err
			}
		}
	}()
	return b.f.FulfilMany(ctx, b.environment, ids)
}

// fulfil hands an order to the next transaction and waits for its outcome. A job whose ctx
// ends first returns its error; its order may still be finished, which its rerun then finds.
func (b *batcher) fulfil(ctx context.Context, orderID uuid.UUID) error {
	r := request{orderID: orderID, done: make(chan error, 1)}
	select {
	case b.requests <- r:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
