package store

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
)

// Job is a row of River's job table: available now, default priority, no unique options, the
// row River's own insert writes for such a job. River works rows written by any client, as its
// other-language clients do.
//
// The rows are written by hand, not through River's client (InsertTx/InsertManyTx on the same
// pgx transaction), because that measured too slow. River's insert is a statement of its own,
// which took the job out of placeOrderSQL: a placement without a debit became begin, order, job,
// commit instead of one statement, one with a debit four round trips instead of two pipelined.
// B7 of make bench (completed orders per second as deployed, 16 clients, 200 partners, 10 s
// rounds; each run the median of 3 rounds), hand-written and River's insert alternating over 3
// runs each on one 2-CPU machine, medians: 906.0/s (1.35x the run's pgbench baseline) by hand,
// 590.0/s (1.07x) through River: 21% lower against the baseline, past the 5% the public API was
// allowed. B3 placement fell from 0.89x to 0.70x of its baseline. The notifications' and
// replays' inserts stay hand-written too, so that one pinned row shape
// (TestJobRowsMatchRiversOwn) covers every job.
type Job struct {
	Kind        string
	Queue       string
	Args        []byte
	MaxAttempts int
}

// MaxJobAttempts is the most attempts a job row holds: River's max_attempts is a smallint.
const MaxJobAttempts = math.MaxInt16

// enqueueJobSQL writes a job; placeOrderSQL writes the same columns for an order's fulfilment.
const enqueueJobSQL = `INSERT INTO river_job (kind, queue, args, max_attempts) VALUES ($1, $2, $3::jsonb, $4)`

// EnqueueJob writes a job in q, so that it becomes workable when, and only when, q's
// transaction commits.
func EnqueueJob(ctx context.Context, q Querier, job Job) error {
	if _, err := q.Exec(ctx, enqueueJobSQL, job.Kind, job.Queue, string(job.Args), job.MaxAttempts); err != nil {
		return fmt.Errorf("enqueue %s job: %w", job.Kind, err)
	}
	return nil
}

// NewJob is the row of a job whose arguments are args (a River JobArgs: JSON-encodable, naming
// its kind), worked from queue at most maxAttempts times.
func NewJob(args interface{ Kind() string }, queue string, maxAttempts int) (Job, error) {
	if maxAttempts < 1 || maxAttempts > MaxJobAttempts {
		return Job{}, fmt.Errorf("%s job: %d attempts, want 1 to %d", args.Kind(), maxAttempts, MaxJobAttempts)
	}
	encoded, err := json.Marshal(args)
	if err != nil {
		return Job{}, fmt.Errorf("encode %s job: %w", args.Kind(), err)
	}
	return Job{Kind: args.Kind(), Queue: queue, Args: encoded, MaxAttempts: maxAttempts}, nil
}
