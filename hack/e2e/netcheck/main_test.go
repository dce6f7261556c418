package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"
)

// TestDialReportsEachAddress: a listening address is reached, a closed one is not and says why,
// one JSON line each, in order; the NetworkPolicy test reads exactly this.
func TestDialReportsEachAddress(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	open := l.Addr().String()
	_ = l.Close()
	go func() { done <- listen(ctx, open) }()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	_ = closed.Close()

	var got []result
	deadline := time.Now().Add(10 * time.Second)
	for {
		var out bytes.Buffer
		if err := run([]string{"dial", open, refused}, &out); err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var r result
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			got = append(got, r)
		}
		if len(got) == 2 && got[0].Reached || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // until the listener is up
	}
	if len(got) != 2 || got[0].Addr != open || got[1].Addr != refused {
		t.Fatalf("results %+v: want %s then %s", got, open, refused)
	}
	if !got[0].Reached || got[0].Error != "" {
		t.Errorf("%s (listening): %+v, want reached", open, got[0])
	}
	if got[1].Reached || got[1].Error == "" {
		t.Errorf("%s (closed): %+v, want not reached, with the error", refused, got[1])
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("listen after SIGTERM's cancel: %v", err)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{nil, {"dial"}, {"listen"}, {"probe", "127.0.0.1:1"}} {
		if err := run(args, &bytes.Buffer{}); err == nil {
			t.Errorf("netcheck %v: no error", args)
		}
	}
}
