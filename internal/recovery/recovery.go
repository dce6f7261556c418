package recovery

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
)

// PanicError is a panic turned into an error, with the stack of the goroutine that panicked.
type PanicError struct {
	What  string
	Value any
	Stack []byte
}

// Error implements error.
func (e *PanicError) Error() string { return fmt.Sprintf("%s panicked: %v", e.What, e.Value) }

// Do runs fn and returns the panic it raised as a *PanicError, logged at ERROR with its stack
// and ctx (which carries the request id, where there is one); nil when fn returned normally.
func Do(ctx context.Context, log *slog.Logger, what string, fn func()) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = Recovered(ctx, log, what, v)
		}
	}()
	fn()
	return nil
}

// Recovered logs v, a value recover returned in the goroutine doing what, and returns it as a
// *PanicError. For deferred functions that must do more than Do does (answer a request, hand
// errors to waiting callers) once a panic is caught.
func Recovered(ctx context.Context, log *slog.Logger, what string, v any) *PanicError {
	e := &PanicError{What: what, Value: v, Stack: debug.Stack()}
	if log == nil {
		log = slog.Default()
	}
	log.ErrorContext(ctx, "recovered from panic", slog.String("in", what), slog.Any("panic", v),
		slog.String("stack", string(e.Stack)))
	return e
}
