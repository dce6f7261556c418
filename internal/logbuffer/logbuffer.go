package logbuffer

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Writer is an io.Writer that buffers whole writes and writes them out in order. A log
// handler writes one line per Write, and a line is never split across a write unless it is
// larger than the buffer.
type Writer struct {
	mu       sync.Mutex
	out      io.Writer
	buf      *bufio.Writer
	interval time.Duration
	timer    *time.Timer // armed while the buffer holds lines; nil when interval is 0
	closed   bool
}

// New buffers up to size bytes for out, writing them at the latest interval after the first
// of them arrived. An interval of 0 writes every line at once.
func New(out io.Writer, size int, interval time.Duration) *Writer {
	w := &Writer{out: out, buf: bufio.NewWriterSize(out, size), interval: interval}
	if interval > 0 {
		w.timer = time.AfterFunc(interval, func() { _ = w.Flush() })
		w.timer.Stop()
	}
	return w
}

// Write buffers p, or writes it at once when the writer is unbuffered or closed.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer == nil || w.closed {
		return w.writeThrough(p)
	}
	if w.buf.Available() < len(p) {
		if err := w.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) > w.buf.Size() {
			return w.writeThrough(p)
		}
	}
	if w.buf.Buffered() == 0 {
		w.timer.Reset(w.interval)
	}
	return w.buf.Write(p)
}

// Flush writes out what is buffered.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flushLocked()
}

// Close writes out what is buffered; later writes go straight through.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.timer != nil {
		w.timer.Stop()
	}
	return w.flushLocked()
}

func (w *Writer) writeThrough(p []byte) (int, error) {
	if err := w.flushLocked(); err != nil {
		return 0, err
	}
	return w.out.Write(p)
}

// flushLocked writes the buffer out. A failed write drops what was buffered rather than keeping
// the error: bufio.Writer would otherwise refuse every later line, and one failed write to
// stderr must not silence the process for good.
func (w *Writer) flushLocked() error {
	if w.buf.Buffered() == 0 {
		return nil
	}
	err := w.buf.Flush()
	if err != nil {
		w.buf.Reset(w.out)
	}
	return err
}

// FlushAt wraps h so that each record at level or above is written out at once, with the lines
// buffered before it.
func (w *Writer) FlushAt(h slog.Handler, level slog.Leveler) slog.Handler {
	return &flushingHandler{Handler: h, writer: w, level: level}
}

type flushingHandler struct {
	slog.Handler
	writer *Writer
	level  slog.Leveler
}

func (h *flushingHandler) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= h.level.Level() {
		if ferr := h.writer.Flush(); err == nil {
			err = ferr
		}
	}
	return err
}

func (h *flushingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &flushingHandler{Handler: h.Handler.WithAttrs(attrs), writer: h.writer, level: h.level}
}

func (h *flushingHandler) WithGroup(name string) slog.Handler {
	return &flushingHandler{Handler: h.Handler.WithGroup(name), writer: h.writer, level: h.level}
}
