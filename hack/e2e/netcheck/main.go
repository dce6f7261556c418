package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// dialTimeout bounds one connection attempt: a policy that drops instead of rejecting answers
// with silence, and the test needs an answer.
const dialTimeout = 3 * time.Second

// result is what dial prints for one address.
type result struct {
	Addr    string `json:"addr"`
	Reached bool   `json:"reached"`
	Error   string `json:"error,omitempty"`
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "netcheck:", err)
		os.Exit(2)
	}
}

func run(args []string, out io.Writer) error {
	if len(args) < 2 {
		return errors.New("usage: netcheck listen ADDR | netcheck dial ADDR [ADDR ...]")
	}
	switch args[0] {
	case "listen":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		return listen(ctx, args[1])
	case "dial":
		enc := json.NewEncoder(out)
		for _, addr := range args[1:] {
			if err := enc.Encode(dial(addr)); err != nil {
				return fmt.Errorf("write result: %w", err)
			}
		}
		return nil
	}
	return fmt.Errorf("unknown mode %q: want listen or dial", args[0])
}

func dial(addr string) result {
	conn, err := (&net.Dialer{Timeout: dialTimeout}).DialContext(context.Background(), "tcp", addr)
	if err != nil {
		return result{Addr: addr, Error: err.Error()}
	}
	_ = conn.Close()
	return result{Addr: addr, Reached: true}
}

// listen accepts connections and closes them at once: a completed handshake is the answer.
func listen(ctx context.Context, addr string) error {
	l, err := new(net.ListenConfig).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	go func() {
		<-ctx.Done()
		_ = l.Close()
	}()
	for {
		conn, err := l.Accept()
		if ctx.Err() != nil {
			return nil //nolint:nilerr // a signal closed the listener: the Pod is stopping, as asked
		}
		if err != nil {
			return fmt.Errorf("accept on %s: %w", addr, err)
		}
		_ = conn.Close()
	}
}
