package recovery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
)

func TestDoTurnsAPanicIntoAnErrorAndALogLine(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&out, nil))
	done := make(chan error, 1)
	// In a goroutine of its own, as in the server: an unrecovered panic here would end the test
	// binary, not fail one test.
	go func() { done <- Do(context.Background(), log, "statement writer", func() { panic("boom") }) }()
	err := <-done
	var p *PanicError
	if !errors.As(err, &p) || p.Value != "boom" || p.What != "statement writer" || len(p.Stack) == 0 {
		t.Fatalf("Do = %#v, want a *PanicError of boom with a stack", err)
	}
	var line map[string]any
	if err := json.Unmarshal(out.Bytes(), &line); err != nil {
		t.Fatalf("log line %q: %v", out.String(), err)
	}
	if line["level"] != "ERROR" || line["in"] != "statement writer" || line["panic"] != "boom" || line["stack"] == "" {
		t.Fatalf("log line = %v", line)
	}
}

func TestDoReturnsNilWithoutAPanic(t *testing.T) {
	ran := false
	if err := Do(context.Background(), nil, "x", func() { ran = true }); err != nil || !ran {
		t.Fatalf("Do = %v, ran %v", err, ran)
	}
}
