package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

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
	// SMTP, when set, sends low-balance e-mails; Retry schedules notification retries.
	SMTP  *notify.SMTP
	Retry notify.Retry
	// ShutdownTimeout bounds the wait for in-flight requests and running jobs on shutdown.
	ShutdownTimeout time.Duration
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
	var workers *fulfilment.Workers
	if d.Workers != nil {
		cfg := *d.Workers
		cfg.Logger = log
		var hooks []fulfilment.Hook
		if d.Deps.Notifier != nil {
			hooks = append(hooks, d.Deps.Notifier.OrderFinished)
			cfg.Register = append(cfg.Register, notify.Workers(d.Deps.DB, d.SMTP, d.Retry))
			for _, env := range cfg.Environments {
				cfg.ExtraQueues = append(cfg.ExtraQueues, notify.QueueName(env))
			}
		}
		f := fulfilment.NewFulfiller(d.Deps.DB, d.Deps.Cipher, d.Listeners[0].Config.Estimate.Slow, log, hooks...)
		var err error
		if workers, err = fulfilment.StartWorkers(runCtx, d.Deps.DB, f, cfg); err != nil {
			cancel()
			d.shutdown(servers, nil, log)
			wg.Wait()
			return err
		}
	}
	if ready != nil {
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
