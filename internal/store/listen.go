package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Listen receives PostgreSQL notifications on channels until ctx ends. It holds one dedicated
// connection; when that connection is lost it reconnects with backoff. onSubscribed runs each
// time the subscription is (re)established, including the first: notifications sent before it
// were missed, so callers must assume anything changed (e.g. drop caches filled meanwhile).
func Listen(
	ctx context.Context, pool *pgxpool.Pool, channels []string, onNotify func(channel, payload string),
	onSubscribed func(),
) error {
	backoff := 100 * time.Millisecond
	for {
		err := listenOnce(ctx, pool, channels, onNotify, func() {
			backoff = 100 * time.Millisecond
			if onSubscribed != nil {
				onSubscribed()
			}
		})
		if ctx.Err() != nil {
			return nil //nolint:nilerr // shutting down is not a failure
		}
		_ = err
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func listenOnce(
	ctx context.Context, pool *pgxpool.Pool, channels []string, onNotify func(channel, payload string),
	onListening func(),
) error {
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("listen: connect: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	for _, ch := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return fmt.Errorf("listen %s: %w", ch, err)
		}
	}
	onListening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return fmt.Errorf("wait for notification: %w", err)
		}
		onNotify(n.Channel, n.Payload)
	}
}
