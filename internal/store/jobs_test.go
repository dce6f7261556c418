package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
)

type pinnedArgs struct {
	Order string `json:"order"`
}

func (pinnedArgs) Kind() string { return "codeport.pinned" }

// jobRow is every column of river_job that a worker reads to decide whether, when and how often
// to work a job.
type jobRow struct {
	Kind, Queue, State, Args, Metadata string
	Priority, Attempt, MaxAttempts     int
	Tags                               []string
	UniqueKey                          []byte
	ScheduledSoon, HasUniqueStates     bool
}

func readJob(ctx context.Context, t *testing.T, db *store.DB, kind string) jobRow {
	t.Helper()
	var r jobRow
	err := db.Pool.QueryRow(ctx, `SELECT kind, queue, state::text, args::text, metadata::text, priority, attempt,
		max_attempts, tags, unique_key, scheduled_at <= now() + interval '1 second', unique_states IS NOT NULL
		FROM river_job WHERE kind = $1`, kind).Scan(&r.Kind, &r.Queue, &r.State, &r.Args, &r.Metadata,
		&r.Priority, &r.Attempt, &r.MaxAttempts, &r.Tags, &r.UniqueKey, &r.ScheduledSoon, &r.HasUniqueStates)
	if err != nil {
		t.Fatalf("read %s job: %v", kind, err)
	}
	return r
}

// TestEnqueueWritesTheJobInTheTransaction: a job enqueued in a transaction that rolls back does
// not exist; one whose transaction commits is available now on its queue, with its arguments and
// attempts, the default priority and no uniqueness: the row the placements wrote by hand before
// they went through River's insert.
func TestEnqueueWritesTheJobInTheTransaction(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t, store.Options{MaxConns: 4})
	job, err := store.NewJob(pinnedArgs{Order: "o-1"}, "pinned", 7)
	if err != nil {
		t.Fatal(err)
	}
	rolledBack := errors.New("roll back")
	if err := db.InTx(ctx, func(tx pgx.Tx) error {
		if err := db.Enqueue(ctx, tx, job); err != nil {
			return err
		}
		return rolledBack
	}); !errors.Is(err, rolledBack) {
		t.Fatal(err)
	}
	var jobs int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job`).Scan(&jobs); err != nil || jobs != 0 {
		t.Fatalf("%d jobs after a rollback (%v)", jobs, err)
	}

	if err := db.InTx(ctx, func(tx pgx.Tx) error { return db.Enqueue(ctx, tx, job) }); err != nil {
		t.Fatal(err)
	}
	got := readJob(ctx, t, db, pinnedArgs{}.Kind())
	want := jobRow{Kind: "codeport.pinned", Queue: "pinned", State: "available", Args: `{"order": "o-1"}`,
		Metadata: "{}", Priority: 1, MaxAttempts: 7, ScheduledSoon: true}
	if got.Kind != want.Kind || got.Queue != want.Queue || got.State != want.State || got.Args != want.Args ||
		got.Metadata != want.Metadata || got.Priority != want.Priority || got.Attempt != want.Attempt ||
		got.MaxAttempts != want.MaxAttempts || len(got.Tags) != 0 || got.UniqueKey != nil ||
		got.ScheduledSoon != want.ScheduledSoon || got.HasUniqueStates {
		t.Fatalf("job row:\n got  %+v\n want %+v", got, want)
	}
}

// TestNewJobAttemptsFitRiversColumn: a job asking for more attempts than River's smallint column
// holds, or for none, is refused before it reaches the database.
func TestNewJobAttemptsFitRiversColumn(t *testing.T) {
	for _, attempts := range []int{0, -1, store.MaxJobAttempts + 1, 86405} {
		if _, err := store.NewJob(pinnedArgs{}, "q", attempts); err == nil {
			t.Errorf("a job of %d attempts accepted", attempts)
		}
	}
	if _, err := store.NewJob(pinnedArgs{}, "q", store.MaxJobAttempts); err != nil {
		t.Error(err)
	}
}
