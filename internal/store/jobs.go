package store

import (
	"context"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// Job is a job to enqueue: River job arguments with the insert options (queue, attempts) that
// override those the arguments declare themselves.
type Job = river.InsertManyParams

// MaxJobAttempts is the most attempts a job row holds: River's max_attempts is a smallint.
const MaxJobAttempts = math.MaxInt16

// NewJob is the job whose arguments are args, worked from queue at most maxAttempts times.
func NewJob(args river.JobArgs, queue string, maxAttempts int) (Job, error) {
	if maxAttempts < 1 || maxAttempts > MaxJobAttempts {
		return Job{}, fmt.Errorf("%s job: %d attempts, want 1 to %d", args.Kind(), maxAttempts, MaxJobAttempts)
	}
	return Job{Args: args, InsertOpts: &river.InsertOpts{Queue: queue, MaxAttempts: maxAttempts}}, nil
}

// newJobClient is the process's insert-only River client: no queues, no workers, so it runs no
// services and only writes job rows, through River's own insert, in the caller's transaction.
func newJobClient(pool *pgxpool.Pool) (*river.Client[pgx.Tx], error) {
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		return nil, fmt.Errorf("river insert client: %w", err)
	}
	return client, nil
}

// Enqueue inserts jobs in tx, so that they become workable when, and only when, tx commits.
func (db *DB) Enqueue(ctx context.Context, tx pgx.Tx, jobs ...Job) error {
	if len(jobs) == 0 {
		return nil
	}
	if _, err := db.jobs.InsertManyTx(ctx, tx, jobs); err != nil {
		return fmt.Errorf("enqueue %s job: %w", jobs[0].Args.Kind(), err)
	}
	return nil
}
