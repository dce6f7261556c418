package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/codeport/codeport/internal/fulfilment"
	"github.com/codeport/codeport/internal/notify"
	"github.com/codeport/codeport/internal/recovery"
	"github.com/codeport/codeport/internal/retention"
)

// Listener is one environment's API on one address.
type Listener struct {
	Config Config
	Addr   string
}

// DataPlane is everything a serving process runs: the API of each listener, the caches' change
// listeners, the notifications, and (when Workers is set) the fulfilment workers of those
// environments. serve, dev and the tests build their processes with it alone.
type DataPlane struct {
	// Deps are the parts the caller owns: database, limiter, cipher, logger, tracing. Run adds
	// the notifier and, with MetricsAddr, the instruments.
	Deps      Deps
	Listeners []Listener
	// Workers, when non-nil, runs fulfilment in this process.
	Workers *fulfilment.WorkerConfig
	// Delivery configures webhooks and low-balance e-mails.
	Delivery notify.Delivery
	// MetricsAddr, when set, serves Prometheus metrics (/metrics) on its own port.
	MetricsAddr string
	// Profiling adds Go's pprof endpoints (/debug/pprof/) to the metrics port. They reveal
	// internals and cost CPU while profiling, so they are off unless asked for.
	Profiling bool
	// ShutdownTimeout bounds the wait for in-flight requests and running jobs on shutdown.
	ShutdownTimeout time.Duration
	// Retention, when set with a period and Workers, archives the details of orders past it.
	Retention *retention.Policy
}

// running is what Run started, for its shutdown.
type running struct {
	wg      sync.WaitGroup
	servers []*Server
	workers *fulfilment.Workers
	addrs   map[string]string
	// errs receives the failure of any API or cache listener.
	errs chan error
}

// Run serves until ctx ends, then shuts down gracefully: stop accepting, let in-flight requests
// finish, let running fulfilment jobs finish. ready, when set, receives each environment's
// listening address (and "metrics") once everything is up.
func (d *DataPlane) Run(ctx context.Context, ready func(addrs map[string]string)) error {
	log := d.Deps.Logger
	if log == nil {
		log = slog.Default()
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if d.Deps.Notifier == nil {
		d.Deps.Notifier = notify.NewNotifier(d.Delivery.SMTP != nil, d.Delivery.Retry)
	}
	r := &running{addrs: map[string]string{}, errs: make(chan error, 2*len(d.Listeners))}
	reg, stopMetrics, err := d.startMetrics(log, r)
	if err != nil {
		return err
	}
	defer stopMetrics()
	d.Deps.DB.Warm(ctx)
	if err := d.startAPIs(runCtx, log, r); err != nil {
		cancel()
		r.wg.Wait()
		return err
	}
	if reg != nil {
		reg.MustRegister(newCacheCollector(r.servers))
	}
	if err := d.startWorkers(runCtx, log, r); err != nil {
		cancel()
		d.shutdown(r, log)
		r.wg.Wait()
		return err
	}
	if ready != nil {
		ready(r.addrs)
	}
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-r.errs:
		log.Error("data plane failed", slog.Any("err", runErr))
	}
	d.shutdown(r, log)
	cancel()
	r.wg.Wait()
	return runErr
}

// startMetrics serves /metrics (and the profiles) on MetricsAddr and gives Deps the
// instruments; without MetricsAddr it does nothing and returns a nil registry.
func (d *DataPlane) startMetrics(log *slog.Logger, r *running) (*prometheus.Registry, func(), error) {
	if d.MetricsAddr == "" {
		return nil, func() {}, nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		NewStateCollector(d.Deps.DB, log), newPoolCollector(d.Deps.DB))
	d.Deps.Metrics, d.Deps.OrderMetrics = NewMetrics(reg), NewOrderMetrics(reg)
	if d.Delivery.Attempted == nil {
		d.Delivery.Attempted = newWebhookDeliveries(reg)
	}
	if fb, ok := d.Deps.Limiter.(interface{ FallbackCount() int64 }); ok {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "codeport_rate_limiter_fallback_total",
			Help: "Rate-limit decisions made per process because the shared (Redis) limiter was unavailable.",
		}, func() float64 { return float64(fb.FallbackCount()) }))
	}
	ln, err := new(net.ListenConfig).Listen(context.Background(), "tcp", d.MetricsAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics: listen on %s: %w", d.MetricsAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if d.Profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	server := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = server.Serve(ln) }()
	r.addrs["metrics"] = ln.Addr().String()
	return reg, func() { _ = server.Close() }, nil
}

// startAPIs listens on every listener's address and serves its environment's API, with the
// caches' change listeners beside it.
func (d *DataPlane) startAPIs(ctx context.Context, log *slog.Logger, r *running) error {
	for _, l := range d.Listeners {
		ln, err := new(net.ListenConfig).Listen(ctx, "tcp", l.Addr)
		if err != nil {
			return fmt.Errorf("%s API: listen on %s: %w", l.Config.Environment, l.Addr, err)
		}
		srv := New(l.Config, d.Deps)
		r.servers = append(r.servers, srv)
		r.addrs[l.Config.Environment] = ln.Addr().String()
		r.wg.Add(2)
		// A panic in either ends this data plane as an error does, through its shutdown, which
		// stops what it started; not the process, which may hold more (codeport dev's database).
		go func() {
			defer r.wg.Done()
			var err error
			if p := recovery.Do(ctx, log, l.Config.Environment+" API", func() { err = srv.Serve(ln) }); p != nil {
				err = p
			}
			if err != nil {
				r.errs <- fmt.Errorf("%s API: %w", l.Config.Environment, err)
			}
		}()
		go func() {
			defer r.wg.Done()
			var err error
			if p := recovery.Do(ctx, log, l.Config.Environment+" caches", func() { err = srv.Run(ctx) }); p != nil {
				err = p
			}
			if err != nil {
				r.errs <- fmt.Errorf("%s caches: %w", l.Config.Environment, err)
			}
		}()
	}
	return nil
}

// startWorkers runs fulfilment, and the notifications' deliveries, when Workers is set.
func (d *DataPlane) startWorkers(ctx context.Context, log *slog.Logger, r *running) error {
	if d.Workers == nil {
		return nil
	}
	cfg := *d.Workers
	if cfg.Logger == nil {
		cfg.Logger = log
	}
	var hooks []fulfilment.Hook
	if d.Deps.OrderMetrics != nil {
		hooks = append(hooks, d.Deps.OrderMetrics.Finished)
	}
	hooks = append(hooks, d.Deps.Notifier.OrderFinished)
	cfg.Register = append(cfg.Register, notify.Workers(d.Deps.DB, d.Deps.Cipher, d.Delivery))
	for _, env := range cfg.Environments {
		cfg.ExtraQueues = append(cfg.ExtraQueues, notify.QueueName(env))
	}
	if len(cfg.Environments) > 0 {
		cfg.PeriodicJobs = append(cfg.PeriodicJobs, notify.PeriodicJobs(cfg.Environments[0])...)
	}
	f := fulfilment.NewFulfiller(d.Deps.DB, d.Deps.Cipher, d.Listeners[0].Config.Estimate.Slow, cfg.Logger, hooks...).
		WithTracing(d.Deps.Tracing).OnStockLow(d.Deps.Notifier.StockCrossedBelow)
	if d.Deps.OrderMetrics != nil {
		f.OnDelivered(d.Deps.OrderMetrics.CodesDelivered)
	}
	workers, err := fulfilment.StartWorkers(ctx, d.Deps.DB, f, cfg)
	if err != nil {
		return err
	}
	r.workers = workers
	if d.Retention != nil && d.Retention.After > 0 {
		archiver := retention.NewArchiver(d.Deps.DB, *d.Retention, log.With(slog.String("environment",
			d.Retention.Environment)))
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			archiver.Run(ctx)
		}()
	}
	return nil
}

func (d *DataPlane) shutdown(r *running, log *slog.Logger) {
	timeout := d.ShutdownTimeout
	if timeout == 0 {
		timeout = 20 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, s := range r.servers {
		if err := s.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Warn("API shutdown", slog.Any("err", err))
		}
	}
	if r.workers != nil {
		if err := r.workers.Stop(ctx); err != nil {
			log.Warn("fulfilment shutdown", slog.Any("err", err))
		}
	}
}
