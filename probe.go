package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/spf13/cobra"
)

func newProbeCommand() *cobra.Command {
	var (
		attempts          int
		timeout, interval time.Duration
	)
	cmd := &cobra.Command{
		Use:   "probe URL...",
		Short: "GET each URL until it answers 2xx; fail when one never does (helm test)",
		Long: `Call each URL with GET and succeed once every one has answered with a 2xx status. A URL that
refuses, times out or answers otherwise is tried again, up to --attempts times, --interval apart,
which rides out a Pod that is still starting. The chart's helm test Pods run it from the codeport
image itself, so that a test pulls no other image (the image has no shell and no curl).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, urls []string) error {
			if attempts < 1 || timeout <= 0 || interval < 0 {
				return errors.New("--attempts and --timeout must be positive, --interval not negative")
			}
			client := &http.Client{Timeout: timeout}
			log := slog.New(slog.NewJSONHandler(cmd.OutOrStdout(), nil))
			for _, u := range urls {
				if err := probe(cmd.Context(), client, u, attempts, interval); err != nil {
					return err
				}
				// helm test Pods' logs reach the cluster's log pipeline: JSON, like every component.
				log.Info("ready", "url", u)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&attempts, "attempts", 6, "calls per URL before giving up")
	f.DurationVar(&timeout, "timeout", 5*time.Second, "limit of one call")
	f.DurationVar(&interval, "interval", 2*time.Second, "pause between calls to the same URL")
	return cmd
}

// probe calls url until it answers 2xx, at most attempts times, and returns the last failure.
func probe(ctx context.Context, client *http.Client, url string, attempts int, interval time.Duration) error {
	var last error
	for i := range attempts {
		if i > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("probe %s: %w (last: %w)", url, ctx.Err(), last)
			case <-time.After(interval):
			}
		}
		if last = get(ctx, client, url); last == nil {
			return nil
		}
	}
	return fmt.Errorf("probe %s: %d attempts failed, the last: %w", url, attempts, last)
}

func get(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %s", resp.Status, body)
	}
	return nil
}
