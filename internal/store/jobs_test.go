package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

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

// TestJobRowsMatchRiversOwn: the job rows this package writes into River's table are the rows
// River's own client writes for the same job, so that River works them the same way. It fails
// when a River upgrade changes the row its insert writes.
func TestJobRowsMatchRiversOwn(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t, store.Options{MaxConns: 4})
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	args := pinnedArgs{Order: "o-1"}
	const queue, attempts = "pinned", 7
	err = db.InTx(ctx, func(tx pgx.Tx) error {
		_, err := client.InsertTx(ctx, tx, args, &river.InsertOpts{Queue: queue, MaxAttempts: attempts})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	rivers := readJob(ctx, t, db, args.Kind())
	if _, err := db.Pool.Exec(ctx, `DELETE FROM river_job`); err != nil {
		t.Fatal(err)
	}

	job, err := store.NewJob(args, queue, attempts)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.InTx(ctx, func(tx pgx.Tx) error { return store.EnqueueJob(ctx, tx, job) }); err != nil {
		t.Fatal(err)
	}
	ours := readJob(ctx, t, db, args.Kind())
	if ours.Kind != rivers.Kind || ours.Queue != rivers.Queue || ours.State != rivers.State ||
		ours.Args != rivers.Args || ours.Priority != rivers.Priority || ours.Attempt != rivers.Attempt ||
		ours.MaxAttempts != rivers.MaxAttempts || len(ours.Tags) != len(rivers.Tags) ||
		len(ours.UniqueKey) != len(rivers.UniqueKey) || ours.ScheduledSoon != rivers.ScheduledSoon ||
		ours.HasUniqueStates != rivers.HasUniqueStates {
		t.Fatalf("job row differs from River's own insert:\n ours   %+v\n River's %+v", ours, rivers)
	}
	if rivers.Metadata != ours.Metadata && rivers.Metadata != "{}" {
		t.Errorf("River's insert writes metadata %s; ours writes %s", rivers.Metadata, ours.Metadata)
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
