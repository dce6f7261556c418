package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/codeport/codeport/apiserver"
	"github.com/codeport/codeport/apiserver/ratelimit"
	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/fulfilment"
	"github.com/codeport/codeport/internal/logbuffer"
	"github.com/codeport/codeport/internal/logthrottle"
	"github.com/codeport/codeport/internal/notify"
	"github.com/codeport/codeport/internal/retention"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/tenancy"
)

// logBufferSize is how many bytes of log lines a serving process holds before writing them
// out: a few hundred request lines, what a pipe to the container runtime holds by default.
const logBufferSize = 64 << 10

func newServeCommand() *cobra.Command {
	var (
		environment, addr, metricsAddr, otlpEndpoint, databaseURL string
		redisURL, trustedProxies, smtpURL, smtpFrom               string
		workers, profiling, webhooksToPrivate                     bool
		concurrency, transactions, retentionDays                  int
		maxConns, minIdleConns                                    int32
		rescueAfter, databaseWait                                 time.Duration
		sandboxTimeout, logFlushInterval                          time.Duration
		codesKey                                                  codesKeyring
		v1Deprecation, v1Sunset, v1Docs                           string
		publicBaseURL                                             string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the partner API of one environment (production or sandbox)",
		Long: `Serve the partner API (/v2 and /v1) of one environment, plus /healthz and /readyz, and run
the environment's fulfilment workers. Only keys of that environment are accepted. The schema
must be up to date ('codeport migrate up'). SIGTERM stops accepting connections, lets in-flight
requests and running fulfilment jobs finish, then exits.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkServeFlags(environment, databaseURL, sandboxTimeout, logFlushInterval, retentionDays); err != nil {
				return err
			}
			logs, processLog := processLogs(cmd.ErrOrStderr(), logFlushInterval)
			defer logs.Close()
			routeLogs(processLog.Handler())
			log := processLog.With(slog.String("environment", environment))
			cfg := apiserver.DefaultConfig(environment)
			cfg.SandboxTimeoutDelay = sandboxTimeout
			lifecycle, err := parseLifecycle(v1Deprecation, v1Sunset, v1Docs)
			if err != nil {
				return err
			}
			cfg.V1Lifecycle = lifecycle
			proxies, err := auth.ParseTrustedProxies(trustedProxies)
			if err != nil {
				return err
			}
			cfg.TrustedProxies = proxies
			if err := apiserver.CheckPublicBaseURL(publicBaseURL); err != nil {
				return fmt.Errorf("--public-base-url: %w", err)
			}
			cfg.PublicBaseURL = publicBaseURL
			cipher, err := codesKey.load()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			tracing, stopTracing, err := apiserver.NewTracerProvider(ctx, otlpEndpoint, "codeport-"+environment)
			if err != nil {
				return err
			}
			defer func() {
				flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = stopTracing(flushCtx)
			}()
			db, err := openDatabaseWaiting(ctx, databaseURL, store.Options{
				Tracing:      tracing,
				MaxConns:     maxConns,
				MinIdleConns: minIdleConns,
			}, databaseWait, log)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := requireSchema(ctx, db, log); err != nil {
				return err
			}
			unregister, err := registerInstance(ctx, db, "serve", log)
			if err != nil {
				return err
			}
			defer unregister()
			if cipher, err = attachCodesKey(ctx, db, cipher, codesKeySource); err != nil {
				return err
			}
			limiter, closeLimiter, err := newLimiter(redisURL, log)
			if err != nil {
				return err
			}
			defer closeLimiter()
			mail, err := notify.ParseSMTP(smtpURL, smtpFrom)
			if err != nil {
				return err
			}
			plane := &apiserver.DataPlane{
				Deps: apiserver.Deps{DB: db, Limiter: limiter, Cipher: cipher, Logger: processLog, Tracing: tracing,
					RequestLog: logs},
				Listeners:   []apiserver.Listener{{Config: cfg, Addr: addr}},
				Delivery:    notify.Delivery{SMTP: mail, Retry: notify.DefaultRetry(), AllowPrivateNetworks: webhooksToPrivate},
				MetricsAddr: metricsAddr,
				Profiling:   profiling,
			}
			if workers {
				wcfg := fulfilment.DefaultWorkerConfig(environment)
				wcfg.Concurrency, wcfg.Transactions = concurrency, transactions
				wcfg.Logger = log
				if rescueAfter > 0 {
					wcfg.RescueAfter = rescueAfter
					wcfg.JobTimeout = min(wcfg.JobTimeout, rescueAfter)
				}
				plane.Workers = &wcfg
				plane.Retention = &retention.Policy{Environment: environment,
					After: time.Duration(retentionDays) * retention.Day}
			}
			return plane.Run(ctx, func(addrs map[string]string) {
				log.Info("serving partner API", slog.String("addr", addrs[environment]), slog.Bool("workers", workers))
				// Whoever waits for the process to start reads this line now, not an interval later.
				_ = logs.Flush()
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&environment, "environment", "", "environment served: production or sandbox (required)")
	f.StringVar(&addr, "addr", ":8080", "listen address, HOST:PORT")
	f.StringVar(&otlpEndpoint, "otlp-endpoint", os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"),
		"base URL of an OTLP/HTTP collector, e.g. http://otel-collector:4318; spans go to its /v1/traces "+
			"(default $OTEL_EXPORTER_OTLP_ENDPOINT; unset: tracing off)")
	f.StringVar(&metricsAddr, "metrics-addr", ":9090",
		"Prometheus /metrics listen address, apart from the API (\"\" disables it)")
	f.BoolVar(&profiling, "pprof", false, "also serve Go's pprof profiles (/debug/pprof/) on the metrics address")
	databaseURLFlag(cmd, &databaseURL)
	f.Int32Var(&maxConns, "database-max-conns", 0,
		fmt.Sprintf("database connections of this process (default: pool_max_conns of the URL, else %d)",
			store.DefaultMaxConns))
	f.Int32Var(&minIdleConns, "database-min-idle-conns", 8,
		"idle database connections kept open, and opened before the API starts listening")
	databaseWaitFlag(f, &databaseWait)
	credentialFlag(f, &redisURL, "redis-url", "CODEPORT_REDIS_URL",
		"Redis URL for rate limits shared by all replicas (default $CODEPORT_REDIS_URL; unset: per-process limits)")
	f.StringVar(&trustedProxies, "trusted-proxies", "",
		"comma-separated CIDRs of proxies whose X-Forwarded-For is trusted (default: none; the TCP peer is the client)")
	f.StringVar(&publicBaseURL, "public-base-url", "",
		"scheme and host partners reach this environment at, the server /docs and openapi.json name "+
			"(default: the request's)")
	codesKeyFlag(f, &codesKey)
	smtpFlags(f, &smtpURL, &smtpFrom)
	f.BoolVar(&webhooksToPrivate, "webhook-allow-private-networks", false,
		"deliver webhooks to loopback, link-local and private (cluster-internal) addresses too; "+
			"off, a partner's webhook URL cannot reach the service's own network")
	f.DurationVar(&sandboxTimeout, "sandbox-timeout-delay", 10*time.Second,
		"sandbox: how long a request with X-Sandbox-Scenario: timeout waits before its 504 (at most 25s)")
	f.StringVar(&v1Deprecation, "v1-deprecation", apiserver.DefaultV1Deprecation.Format(time.DateOnly),
		"date (YYYY-MM-DD or RFC 3339) announced in the Deprecation header of every /v1 answer (\"\": none)")
	f.StringVar(&v1Sunset, "v1-sunset", "",
		"date (YYYY-MM-DD or RFC 3339) announced in the Sunset header of every /v1 answer (default: none)")
	f.StringVar(&v1Docs, "v1-lifecycle-url", apiserver.DefaultLifecycleDocs,
		"URL of the v1 migration notes, linked from /v1 answers (rel=\"deprecation\" and \"sunset\")")
	f.DurationVar(&logFlushInterval, "log-flush-interval", 100*time.Millisecond,
		"longest an info log line waits in the buffer before it is written; warnings and errors are "+
			"written at once, and 0 writes every line at once")
	f.BoolVar(&workers, "workers", true, "run this environment's fulfilment workers in this process")
	f.IntVar(&concurrency, "fulfilment-concurrency", fulfilment.DefaultConcurrency,
		"orders fulfilled at once by this process")
	f.IntVar(&transactions, "fulfilment-transactions", fulfilment.DefaultTransactions,
		"fulfilment transactions at once, each finishing the orders waiting when it starts")
	f.DurationVar(&rescueAfter, "fulfilment-rescue-after", time.Minute,
		"how long a fulfilment job held by a crashed process waits before another process runs it again")
	f.IntVar(&retentionDays, "order-retention-days", 0,
		fmt.Sprintf("days after it finished that an order's details (lines, codes, ledger entries) stay online "+
			"before the workers archive them; 0 keeps them forever, else at least %d", int(retention.Minimum/retention.Day)))
	return cmd
}

// checkServeFlags refuses serve's flag values that cannot work, before anything starts.
func checkServeFlags(
	environment, databaseURL string, sandboxTimeout, logFlushInterval time.Duration, retentionDays int,
) error {
	if err := retention.CheckDays(retentionDays); err != nil {
		return fmt.Errorf("--order-retention-days %w", err)
	}
	switch {
	case tenancy.Environment(environment) != tenancy.Production && tenancy.Environment(environment) != tenancy.Sandbox:
		return fmt.Errorf("--environment must be production or sandbox, not %q", environment)
	case databaseURL == "":
		return errors.New("--database-url (or CODEPORT_DATABASE_URL) is required")
	case sandboxTimeout <= 0 || sandboxTimeout > apiserver.MaxSandboxTimeoutDelay:
		return fmt.Errorf("--sandbox-timeout-delay must be above 0 and at most %s", apiserver.MaxSandboxTimeoutDelay)
	case logFlushInterval < 0:
		return errors.New("--log-flush-interval must not be negative")
	}
	return nil
}

// repeatedLineEvery bounds how often the process's logger writes one message: while the
// database is unreachable every refused order and key lookup fails alike, and a line each would
// grow the log with the load. The first is written at once, the next after the interval with
// the count left out; the request log still has a line per request.
const repeatedLineEvery = 10 * time.Second

// processLogs are a serving process's logs on out: JSON lines buffered for at most interval,
// warnings and errors written at once. The API's request lines name their environment
// themselves; the returned logger is for the process's other lines.
func processLogs(out io.Writer, interval time.Duration) (*logbuffer.Writer, *slog.Logger) {
	logs := logbuffer.New(out, logBufferSize, interval)
	handler := logs.FlushAt(slog.NewJSONHandler(logs, nil), slog.LevelWarn)
	return logs, slog.New(logthrottle.New(handler, repeatedLineEvery))
}

// codesKeyring is the codes keyring a process takes from its flags or environment.
type codesKeyring struct {
	// keys are one key, or several separated by commas, spaces or new lines.
	keys string
	// current is the id of the key that encrypts; empty with one key.
	current string
}

// codesKeyFlag binds --codes-key and --codes-current-key-id, defaulting to $CODEPORT_CODES_KEY
// and $CODEPORT_CODES_CURRENT_KEY_ID.
func codesKeyFlag(f *pflag.FlagSet, target *codesKeyring) {
	credentialFlag(f, &target.keys, "codes-key", "CODEPORT_CODES_KEY",
		"32-byte key (base64 or hex) encrypting codes and webhook secrets at rest, or a keyring: several keys "+
			"separated by commas or new lines, older ones still decrypting "+
			"(default $CODEPORT_CODES_KEY; generate one with: openssl rand -base64 32)")
	f.StringVar(&target.current, "codes-current-key-id", os.Getenv("CODEPORT_CODES_CURRENT_KEY_ID"),
		"id of the keyring's key that encrypts, required when --codes-key holds several "+
			"(default $CODEPORT_CODES_CURRENT_KEY_ID)")
}

// smtpFlags binds --smtp-url and --smtp-from, defaulting to $CODEPORT_SMTP_URL and $CODEPORT_SMTP_FROM.
func smtpFlags(f *pflag.FlagSet, url, from *string) {
	credentialFlag(f, url, "smtp-url", "CODEPORT_SMTP_URL",
		"SMTP server for low-balance e-mails: smtp://user:pass@host:587 (STARTTLS when offered) or smtps://host:465 "+
			"(default $CODEPORT_SMTP_URL; unset: no e-mails)")
	// The declared default stays empty, as credentialFlag's do: --help would print it beside the
	// usage's own, and the environment's value would show as a second default.
	f.StringVar(from, "smtp-from", "",
		"sender address of low-balance e-mails (default $CODEPORT_SMTP_FROM, else "+defaultSMTPFrom+")")
	*from = defaultSMTPFrom
	if env := os.Getenv("CODEPORT_SMTP_FROM"); env != "" {
		*from = env
	}
}

// defaultSMTPFrom is the sender of low-balance e-mails when neither --smtp-from nor
// CODEPORT_SMTP_FROM names one.
const defaultSMTPFrom = "codeport@localhost"

// codesKeySource is where serve, operator and the codes commands take the codes keyring from.
const codesKeySource = "--codes-key or CODEPORT_CODES_KEY"

// attachCodesKey binds c to the database (codes.Cipher.Attach). A key the database's codes and
// secrets are not sealed under, or a keyring lacking one that still seals some, stops the
// process, in one line that also says where the keys come from (source).
func attachCodesKey(ctx context.Context, db *store.DB, c *codes.Cipher, source string) (*codes.Cipher, error) {
	attached, err := c.Attach(ctx, db.Pool)
	var wrong *codes.WrongKeyError
	var missing *codes.MissingKeyError
	if errors.As(err, &wrong) || errors.As(err, &missing) {
		return nil, fmt.Errorf("%w (%s)", err, source)
	}
	return attached, err
}

func (k codesKeyring) load() (*codes.Cipher, error) {
	if strings.TrimSpace(k.keys) == "" {
		return nil, errors.New(
			"--codes-key (or CODEPORT_CODES_KEY) is required: codes and webhook secrets are stored encrypted with it")
	}
	return codes.ParseKeyring(k.keys, k.current)
}

// newLimiter is the Redis limiter (falling back to per-process limits while Redis is down) when
// redisURL is set, else the in-memory one.
func newLimiter(redisURL string, log *slog.Logger) (ratelimit.Limiter, func(), error) {
	if redisURL == "" {
		return ratelimit.NewMemory(), func() {}, nil
	}
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return nil, nil, fmt.Errorf("--redis-url: %w", err)
	}
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = time.Second, 200*time.Millisecond, 200*time.Millisecond
	client := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		log.Warn("Redis unreachable at start; rate limits are per process until it answers", slog.Any("err", err))
	}
	limiter := ratelimit.NewFallback(ratelimit.NewRedis(client), ratelimit.NewMemory(), log)
	return limiter, func() { _ = client.Close() }, nil
}

// parseLifecycle reads the v1 lifecycle flags: dates as YYYY-MM-DD (midnight UTC) or RFC 3339,
// empty meaning not announced.
func parseLifecycle(deprecation, sunset, docs string) (apiserver.Lifecycle, error) {
	l := apiserver.Lifecycle{Docs: docs}
	for _, d := range []struct {
		flag, value string
		into        *time.Time
	}{{"--v1-deprecation", deprecation, &l.Deprecation}, {"--v1-sunset", sunset, &l.Sunset}} {
		if d.value == "" {
			continue
		}
		t, err := time.Parse(time.DateOnly, d.value)
		if err != nil {
			if t, err = time.Parse(time.RFC3339, d.value); err != nil {
				return l, fmt.Errorf("%s must be a date, YYYY-MM-DD or RFC 3339, not %q", d.flag, d.value)
			}
		}
		*d.into = t
	}
	if !l.Sunset.IsZero() && !l.Deprecation.IsZero() && l.Sunset.Before(l.Deprecation) {
		return l, errors.New("--v1-sunset must not be before --v1-deprecation")
	}
	return l, nil
}
