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

	"github.com/codeport/codeport/apiserver/fulfilment"
	"github.com/codeport/codeport/apiserver/notify"
)

// Listener is one environment's API on one address.
type Listener struct {
	Config Config
	Addr   string
}

// DataPlane is everything a serving process runs: the API of each listener, the caches' change
// listeners, and (when Workers is set) the fulfilment workers of those environments.
type DataPlane struct {
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

	metricsAddr string
}

// Run serves until ctx ends, then shuts down gracefully: stop accepting, let in-flight requests
// finish, let running fulfilment jobs finish. ready, when set, receives each environment's
// listening address once every listener is up.
func (d *DataPlane) Run(ctx context.Context, ready func(addrs map[string]string)) error {
	log := d.Deps.Logger
	if log == nil {
		log = slog.Default()
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		metricsServer *http.Server
		reg           *prometheus.Registry
	)
	if d.MetricsAddr != "" {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
			NewStateCollector(d.Deps.DB, log), newPoolCollector(d.Deps.DB.Pool))
		d.Deps.Metrics, d.Deps.OrderMetrics = NewMetrics(reg), NewOrderMetrics(reg)
		if fb, ok := d.Deps.Limiter.(interface{ FallbackCount() int64 }); ok {
			reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "codeport_rate_limiter_fallback_total",
				Help: "Rate-limit decisions made per process because the shared (Redis) limiter was unavailable.",
			}, func() float64 { return float64(fb.FallbackCount()) }))
		}
		ln, err := net.Listen("tcp", d.MetricsAddr)
		if err != nil {
			return fmt.Errorf("metrics: listen on %s: %w", d.MetricsAddr, err)
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
		metricsServer = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = metricsServer.Serve(ln) }()
		defer func() { _ = metricsServer.Close() }()
		d.metricsAddr = ln.Addr().String()
	}
	d.Deps.DB.Warm(ctx)
	var (
		wg      sync.WaitGroup
		servers []*Server
		addrs   = map[string]string{}
		errs    = make(chan error, 2*len(d.Listeners))
	)
	for _, l := range d.Listeners {
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			cancel()
			wg.Wait()
			return fmt.Errorf("%s API: listen on %s: %w", l.Config.Environment, l.Addr, err)
		}
		srv := New(l.Config, d.Deps)
		servers = append(servers, srv)
		addrs[l.Config.Environment] = ln.Addr().String()
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := srv.Serve(ln); err != nil {
				errs <- fmt.Errorf("%s API: %w", l.Config.Environment, err)
			}
		}()
		go func() {
			defer wg.Done()
			if err := srv.Run(runCtx); err != nil {
				errs <- fmt.Errorf("%s caches: %w", l.Config.Environment, err)
			}
		}()
	}
	if reg != nil {
		reg.MustRegister(newCacheCollector(servers))
	}
	var workers *fulfilment.Workers
	if d.Workers != nil {
		cfg := *d.Workers
		if cfg.Logger == nil {
			cfg.Logger = log
		}
		var hooks []fulfilment.Hook
		if d.Deps.OrderMetrics != nil {
			hooks = append(hooks, d.Deps.OrderMetrics.Finished)
		}
		if d.Deps.Notifier != nil {
			hooks = append(hooks, d.Deps.Notifier.OrderFinished)
			cfg.Register = append(cfg.Register, notify.Workers(d.Deps.DB, d.Deps.Cipher, d.Delivery))
			for _, env := range cfg.Environments {
				cfg.ExtraQueues = append(cfg.ExtraQueues, notify.QueueName(env))
			}
		}
		f := fulfilment.NewFulfiller(d.Deps.DB, d.Deps.Cipher, d.Listeners[0].Config.Estimate.Slow, cfg.Logger, hooks...).WithTracing(d.Deps.Tracing)
		var err error
		if workers, err = fulfilment.StartWorkers(runCtx, d.Deps.DB, f, cfg); err != nil {
			cancel()
			d.shutdown(servers, nil, log)
			wg.Wait()
			return err
		}
	}
	if ready != nil {
		if d.metricsAddr != "" {
			addrs["metrics"] = d.metricsAddr
		}
		ready(addrs)
	}
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errs:
		log.Error("data plane failed", slog.Any("err", runErr))
	}
	d.shutdown(servers, workers, log)
	cancel()
	wg.Wait()
	return runErr
}

func (d *DataPlane) shutdown(servers []*Server, workers *fulfilment.Workers, log *slog.Logger) {
	timeout := d.ShutdownTimeout
	if timeout == 0 {
		timeout = 20 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, s := range servers {
		if err := s.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Warn("API shutdown", slog.Any("err", err))
		}
	}
	if workers != nil {
		if err := workers.Stop(ctx); err != nil {
			log.Warn("fulfilment shutdown", slog.Any("err", err))
		}
	}
}
