package notify_test

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/codeport/codeport/internal/notify"
)

// TestSendGivesUpWithItsContext: a low-balance e-mail is sent from a River job that has a
// deadline, so an SMTP server that takes the connection and never answers must not hold the
// job past it, over smtps as over smtp.
func TestSendGivesUpWithItsContext(t *testing.T) {
	ln, err := new(net.ListenConfig).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // taken, never answered
		}
	}()
	for _, scheme := range []string{"smtp", "smtps"} {
		t.Run(scheme, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			s := &notify.SMTP{URL: scheme + "://" + ln.Addr().String(), From: "billing@example.com"}
			err := s.Send(ctx, "partner@example.com", "Low balance", "body")
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Send with a cancelled context: %v; want context.Canceled", err)
			}
		})
	}
}
