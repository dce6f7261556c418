package fulfilment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/codeport/codeport/internal/logthrottle"
	"github.com/codeport/codeport/internal/store"
)

// Args is the fulfilment job of one order.
type Args struct {
	OrderID     uuid.UUID `json:"orderId"`
	Environment string    `json:"environment"`
}

// Kind names the job in River's table.
func (Args) Kind() string { return "codeport.fulfil_order" }

// QueueName is the River queue of an environment's orders: each serve process works only its
// own environment, so a sandbox outage never delays production orders.
func QueueName(environment string) string { return "fulfilment_" + environment }

// Job is the job row that fulfils the order. Placements write it themselves, in the statement
// that writes the order, so an order exists if and only if its job does.
func Job(orderID uuid.UUID, environment string) (store.Job, error) {
	return store.NewJob(Args{OrderID: orderID, Environment: environment}, QueueName(environment),
		river.MaxAttemptsDefault)
}

// WorkerConfig tunes the workers.
type WorkerConfig struct {
	// Environments whose queues this process works.
	Environments []string
	// Concurrency is the number of orders (jobs) fulfilled at once per environment.
	Concurrency int
	// Transactions is the number of fulfilment transactions at once per environment; each
	// finishes the orders of the jobs that gathered when it starts, up to Concurrency /
	// Transactions.
	Transactions int
	// JobTimeout bounds one attempt.
	JobTimeout time.Duration
	// RescueAfter is when a job whose worker died (crash, kill -9) is run again.
	RescueAfter time.Duration
	Logger      *slog.Logger
	// LogRepeatsEvery is how often River's log lines of one message are written while they
	// repeat (DefaultLogRepeatsEvery when 0); the line after a run counts the ones left out.
	LogRepeatsEvery time.Duration
	// Register adds further workers (notifications) to the same River client, working
	// ExtraQueues, ExtraConcurrency jobs at once each (DefaultExtraConcurrency when 0).
	Register         []func(*river.Workers) error
	ExtraQueues      []string
	ExtraConcurrency int
	// PeriodicJobs are inserted on their schedules by the elected leader of the River clients.
	PeriodicJobs []*river.PeriodicJob
}

// DefaultWorkerConfig works env's queue with production settings.
func DefaultWorkerConfig(environments ...string) WorkerConfig {
	return WorkerConfig{
		Environments: environments,
		Concurrency:  DefaultConcurrency,
		Transactions: DefaultTransactions,
		JobTimeout:   30 * time.Second,
		RescueAfter:  time.Minute,
	}
}

// Defaults of WorkerConfig: orders in flight and transactions at once per environment. A
// fulfilment transaction takes about the same round trips for one order as for a hundred, so
// under load a process keeps up by finishing many orders per transaction; four transactions of
// up to 100 orders kept up with placements in make bench's B7 where two of up to 100 or 50 did
// not.
const (
	DefaultConcurrency  = 400
	DefaultTransactions = 4
	// DefaultExtraConcurrency bounds the jobs of the extra queues (webhook and e-mail
	// deliveries, each an outbound request that holds a connection of the pool meanwhile).
	DefaultExtraConcurrency = 20
	// DefaultLogRepeatsEvery bounds River's logs while PostgreSQL is down: its producer retries
	// (and logged) each failed fetch every few milliseconds, about 69 lines a second per process.
	DefaultLogRepeatsEvery = 10 * time.Second
	// gatherJobs is how long a transaction waits for more orders after the first: River hands
	// over the jobs of one fetch within a millisecond or two.
	gatherJobs = 2 * time.Millisecond
)

type worker struct {
	river.WorkerDefaults[Args]
	f        *Fulfiller
	batchers map[string]*batcher
}

func (w *worker) Work(ctx context.Context, job *river.Job[Args]) error {
	var err error
	if b, ok := w.batchers[job.Args.Environment]; ok {
		err = b.fulfil(ctx, job.Args.OrderID)
	} else {
		err = w.f.Fulfil(ctx, job.Args.OrderID, job.Args.Environment)
	}
	var snooze *SnoozeError
	if errors.As(err, &snooze) {
		return river.JobSnooze(snooze.Delay)
	}
	return err
}

// Workers run fulfilment jobs until stopped.
type Workers struct {
	client *river.Client[store.Tx]
	// stopBatches ends the batchers' transaction loops, batches the wait for them.
	stopBatches context.CancelFunc
	batches     *sync.WaitGroup
	logs        *logthrottle.Handler
}

// StartWorkers starts working the configured queues on db's pgx pool.
func StartWorkers(ctx context.Context, db *store.DB, f *Fulfiller, cfg WorkerConfig) (*Workers, error) {
	concurrency, transactions := max(cfg.Concurrency, 1), max(cfg.Transactions, 1)
	w := &worker{f: f, batchers: map[string]*batcher{}}
	for _, env := range cfg.Environments {
		w.batchers[env] = &batcher{f: f, environment: env, requests: make(chan request),
			maxBatch: max(concurrency/transactions, 1), gather: gatherJobs, timeout: cfg.JobTimeout}
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, w); err != nil {
		return nil, fmt.Errorf("register fulfilment worker: %w", err)
	}
	if err := river.AddWorkerSafely(workers, &purgeStockWorker{db: db}); err != nil {
		return nil, fmt.Errorf("register stock purge worker: %w", err)
	}
	periodic := cfg.PeriodicJobs
	if len(cfg.Environments) > 0 {
		// The purge is the same whichever environment's queue works it.
		periodic = append(slices.Clip(periodic), purgeStockJob(QueueName(cfg.Environments[0])))
	}
	for _, register := range cfg.Register {
		if err := register(workers); err != nil {
			return nil, err
		}
	}
	queues := map[string]river.QueueConfig{}
	for _, env := range cfg.Environments {
		queues[QueueName(env)] = river.QueueConfig{MaxWorkers: concurrency}
	}
	extra := cfg.ExtraConcurrency
	if extra <= 0 {
		extra = DefaultExtraConcurrency
	}
	for _, q := range cfg.ExtraQueues {
		queues[q] = river.QueueConfig{MaxWorkers: extra}
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	every := cfg.LogRepeatsEvery
	if every <= 0 {
		every = DefaultLogRepeatsEvery
	}
	throttle := logthrottle.New(logger.Handler(), every)
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{
		Queues:               queues,
		Workers:              workers,
		JobTimeout:           cfg.JobTimeout,
		RescueStuckJobsAfter: cfg.RescueAfter,
		// Fulfilment retries for days before giving up: an order must reach a terminal state.
		MaxAttempts:   100,
		FetchCooldown: 5 * time.Millisecond,
		// Placement writes its job row with a plain INSERT, which wakes no worker, so a short
		// poll bounds placement-to-completed latency (make bench, B4).
		FetchPollInterval: 25 * time.Millisecond,
		Logger:            slog.New(throttle),
		PeriodicJobs:      periodic,
	})
	if err != nil {
		return nil, fmt.Errorf("fulfilment workers: %w", err)
	}
	// The transaction loops outlive ctx: jobs that River lets finish after ctx ends still wait
	// on them. Stop ends them once River has stopped.
	batchCtx, stopBatches := context.WithCancel(context.WithoutCancel(ctx))
	batches := &sync.WaitGroup{}
	for _, b := range w.batchers {
		b.start(batchCtx, transactions, batches)
	}
	if err := client.Start(ctx); err != nil {
		stopBatches()
		batches.Wait()
		return nil, fmt.Errorf("start fulfilment workers: %w", err)
	}
	return &Workers{client: client, stopBatches: stopBatches, batches: batches, logs: throttle}, nil
}

// Stop lets running jobs finish (until ctx ends, then cancels them) and stops fetching.
func (w *Workers) Stop(ctx context.Context) error {
	defer func() {
		w.stopBatches()
		w.batches.Wait()
	}()
	if err := w.client.Stop(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			cancelCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return w.client.StopAndCancel(cancelCtx)
		}
		return fmt.Errorf("stop fulfilment workers: %w", err)
	}
	return nil
}
