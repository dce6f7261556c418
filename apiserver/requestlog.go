package apiserver

import (
	"io"
	"net/netip"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/codeport/codeport/internal/auth"
)

// requestLog writes one JSON line per finished request, byte for byte as log/slog's JSON handler
// would write the record (time, level, msg "request", environment, partner and account id when
// a key was established, request_id, method, route, path when the request was refused before
// reaching a route, status, latency_ms, client_ip), so one log pipeline reads these and the
// process's other lines alike. It encodes the line itself: through slog, a record of this many
// attributes, its float latency and its id and client address as strings allocate on every
// request, and the collections that garbage causes are the serving tail at tens of thousands of
// requests a second. A line allocates nothing here.
type requestLog struct {
	out io.Writer
	// flush, when out has one, writes out what out buffers: after the line of a 5xx answer, which
	// is logged at ERROR and may be the last thing the process says.
	flush func() error
	// fields is `,"msg":"request","environment":"…"`, the same for every line.
	fields string
	lines  sync.Pool // *[]byte
	// accounts holds each account's `,"partner":"…","account_id":"…"`, by account id.
	accounts sync.Map
	// compact writes a short text line instead (writeCompact).
	compact bool
	// environment is the environment's name, for compact lines.
	environment string
}

func newRequestLog(out io.Writer, environment string) *requestLog {
	l := &requestLog{out: out, environment: environment}
	if f, ok := out.(interface{ Flush() error }); ok {
		l.flush = f.Flush
	}
	l.fields = string(appendJSONField(append([]byte(`,"msg":"request"`), ','), "environment", environment))
	l.lines.New = func() any {
		line := make([]byte, 0, 512)
		return &line
	}
	return l
}

// requestRecord is what the line of a finished request says, but for its id. The id is passed
// on its own: it may live in the caller's stack frame, and a slice in this struct would be
// moved to the heap with every other field the metrics' labels take.
type requestRecord struct {
	at     time.Time
	caller *auth.Principal // nil when no key was established
	method string
	route  string
	// path is the path the request was sent to, without its query, when it reached no route's
	// handler (nil otherwise): the route (/v2, unmatched) does not tell what was asked for. It
	// aliases the request and is read only while the line is written.
	path     []byte
	status   int
	elapsed  time.Duration
	clientIP netip.Addr
}

func (l *requestLog) write(id []byte, r *requestRecord) {
	if l.compact {
		l.writeCompact(r)
		return
	}
	pooled := l.lines.Get().(*[]byte)
	line := append((*pooled)[:0], `{"time":"`...)
	line = r.at.AppendFormat(line, time.RFC3339Nano)
	if r.status >= 500 {
		line = append(line, `","level":"ERROR"`...)
	} else {
		line = append(line, `","level":"INFO"`...)
	}
	line = append(line, l.fields...)
	if r.caller != nil {
		line = append(line, l.account(r.caller)...)
	}
	line = append(line, `,"request_id":`...)
	line = appendJSONString(line, id)
	line = append(line, ',')
	line = appendJSONField(line, "method", r.method)
	line = append(line, ',')
	line = appendJSONField(line, "route", r.route)
	if r.path != nil {
		var safe [maxLoggedPath]byte
		line = append(line, `,"path":`...)
		line = appendJSONString(line, loggedPath(&safe, r.path))
	}
	line = append(line, `,"status":`...)
	line = strconv.AppendInt(line, int64(r.status), 10)
	// Milliseconds to the microsecond, formatted as encoding/json formats a float64 in this
	// range (slog's JSON handler formats floats through encoding/json).
	line = append(line, `,"latency_ms":`...)
	line = strconv.AppendFloat(line, float64(r.elapsed.Microseconds())/1000, 'f', -1, 64)
	line = append(line, `,"client_ip":"`...)
	line = r.clientIP.AppendTo(line)
	line = append(line, "\"}\n"...)
	_, _ = l.out.Write(line)
	if r.status >= 500 && l.flush != nil {
		_ = l.flush()
	}
	*pooled = line
	l.lines.Put(pooled)
}

// writeCompact writes the line of a request as a person following a local run reads it:
//
//	15:04:05.000 sandbox GET /v2/orders/:reference 202 3.1ms partners/acme
//	15:04:05.000 sandbox GET /v2/ordres 401 0.1ms
//
// local time, the environment, the route (the path, for a request refused before reaching a
// route), the status, the latency and the caller's partner.
func (l *requestLog) writeCompact(r *requestRecord) {
	pooled := l.lines.Get().(*[]byte)
	line := r.at.Local().AppendFormat((*pooled)[:0], "15:04:05.000")
	line = append(line, ' ')
	line = append(line, l.environment...)
	line = append(line, ' ')
	line = append(line, r.method...)
	line = append(line, ' ')
	if r.path != nil {
		var safe [maxLoggedPath]byte
		line = appendJSONEscaped(line, loggedPath(&safe, r.path))
	} else {
		line = append(line, r.route...)
	}
	line = append(line, ' ')
	line = strconv.AppendInt(line, int64(r.status), 10)
	line = append(line, ' ')
	line = strconv.AppendFloat(line, float64(r.elapsed.Microseconds())/1000, 'f', 1, 64)
	line = append(line, "ms"...)
	if r.caller != nil {
		line = append(line, ' ')
		line = append(line, r.caller.Account.Partner...)
	}
	line = append(line, '\n')
	_, _ = l.out.Write(line)
	*pooled = line
	l.lines.Put(pooled)
}

// account is the caller's partner and account fields, encoded once per account.
func (l *requestLog) account(p *auth.Principal) string {
	if fields, ok := l.accounts.Load(p.AccountID); ok {
		return fields.(string)
	}
	fields := appendJSONField([]byte{','}, "partner", p.Account.Partner)
	fields = appendJSONField(append(fields, ','), "account_id", p.AccountID)
	stored, _ := l.accounts.LoadOrStore(p.AccountID, string(fields))
	return stored.(string)
}

// maxLoggedPath is how much of a request's path its line holds, in bytes.
const maxLoggedPath = 512

// loggedPath is what a line says of path: its first maxLoggedPath bytes, cut at the start of a
// character, copied into buf with anything shaped like a key masked (auth.MaskKeys). Invalid
// UTF-8 is left to the encoding, which writes U+FFFD for it as slog does.
func loggedPath(buf *[maxLoggedPath]byte, path []byte) []byte {
	n := len(path)
	if n > maxLoggedPath {
		n = maxLoggedPath
		// A character the limit would split is left out whole.
		start := n
		for start > n-utf8.UTFMax+1 && !utf8.RuneStart(path[start]) {
			start--
		}
		if r, size := utf8.DecodeRune(path[start:]); r != utf8.RuneError && start+size > n {
			n = start
		}
	}
	out := buf[:copy(buf[:], path[:n])]
	auth.MaskKeys(out)
	return out
}

func appendJSONField(dst []byte, key, value string) []byte {
	dst = appendJSONString(dst, key)
	dst = append(dst, ':')
	return appendJSONString(dst, value)
}

// appendJSONString appends s quoted as log/slog's JSON handler quotes it: ", \ and control
// characters escaped, invalid UTF-8 written as U+FFFD, U+2028 and U+2029 escaped, the rest (UTF-8
// included) as is. Most values logged here (route templates, validated request ids, Kubernetes
// names, UUIDs) need no escaping; a refused request's path is the client's text.
func appendJSONString[T string | []byte](dst []byte, s T) []byte {
	return append(appendJSONEscaped(append(dst, '"'), s), '"')
}

// appendJSONEscaped appends s escaped as appendJSONString does, without the quotes.
func appendJSONEscaped[T string | []byte](dst []byte, s T) []byte {
	const hex = "0123456789abcdef"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			var char [utf8.UTFMax]byte
			r, size := utf8.DecodeRune(char[:copy(char[:], s[i:])])
			switch {
			case r == utf8.RuneError && size == 1:
				dst = append(dst, `\ufffd`...)
			case r == '\u2028' || r == '\u2029':
				dst = append(dst, `\u202`...)
				dst = append(dst, hex[r&0xf])
			default:
				dst = append(dst, s[i:i+size]...)
			}
			i += size - 1
			continue
		}
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return dst
}
