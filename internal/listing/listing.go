package listing

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/pgtext"
	"github.com/codeport/codeport/internal/queryparam"
	"github.com/codeport/codeport/internal/store"
)

// Bounds of a page.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
	// MaxExternalOrderCodeLength matches the longest externalOrderCode an order can have.
	MaxExternalOrderCodeLength = 100
)

// Lists a cursor can belong to.
const (
	Statement = "s"
	Orders    = "o"
)

// Param names a query parameter.
type Param string

// The query parameters of the lists.
const (
	ParamCurrency          Param = "currency"
	ParamStatus            Param = "status"
	ParamFrom              Param = "from"
	ParamTo                Param = "to"
	ParamRange             Param = "from,to"
	ParamLimit             Param = "limit"
	ParamCursor            Param = "cursor"
	ParamExternalOrderCode Param = "externalOrderCode"
)

// Statuses are the order statuses a history can be filtered by.
var Statuses = []string{"processing", "completed", "partially_completed", "failed"}

// QueryError is a query parameter the rules refuse; apierror words it.
type QueryError struct{ Param Param }

// Error implements error.
func (e *QueryError) Error() string { return "invalid query parameter " + string(e.Param) }

// Query is a parsed list request. Before is the decoded cursor: the position (time and id) the
// page starts strictly below.
type Query struct {
	Currency, Status, ExternalOrderCode string
	From, To                            *time.Time
	Limit                               int
	Before                              *Cursor
}

// Parse reads the parameters of a list from args (a request's query). A parameter sent empty is
// judged as any other value (queryparam), so every one of them refuses it. The cursor must have
// been issued for list and account; allowed names the filters the list has.
func Parse(args queryparam.Args, list string, account uuid.UUID, allowed ...Param) (Query, error) {
	q := Query{Limit: DefaultLimit}
	get := func(p Param) (string, bool) { return queryparam.Get(args, string(p)) }
	filter := func(p Param) (string, bool) {
		if !slices.Contains(allowed, p) {
			return "", false
		}
		return get(p)
	}
	if v, ok := filter(ParamCurrency); ok {
		// Any three letters, in any case, as sent: the ledger is append-only and may hold codes
		// withdrawn since they were credited, which a statement must still filter by, and a code
		// the wallet never held is an empty page (docs/partner-api.md, the statement).
		if !threeLetters(v) {
			return Query{}, &QueryError{ParamCurrency}
		}
		q.Currency = strings.ToUpper(v)
	}
	if v, ok := filter(ParamStatus); ok {
		if !slices.Contains(Statuses, v) {
			return Query{}, &QueryError{ParamStatus}
		}
		q.Status = v
	}
	if v, ok := filter(ParamExternalOrderCode); ok {
		// Its length is the value's as sent; the code it names is read without the whitespace
		// around it, as orders are placed.
		code := strings.TrimSpace(v)
		if code == "" || utf8.RuneCountInString(v) > MaxExternalOrderCodeLength || !pgtext.Storable(v) {
			return Query{}, &QueryError{ParamExternalOrderCode}
		}
		q.ExternalOrderCode = code
	}
	var err error
	if v, ok := get(ParamFrom); ok {
		if q.From, err = instant(v, ParamFrom); err != nil {
			return Query{}, err
		}
	}
	if v, ok := get(ParamTo); ok {
		if q.To, err = instant(v, ParamTo); err != nil {
			return Query{}, err
		}
	}
	if q.From != nil && q.To != nil && !q.From.Before(*q.To) {
		return Query{}, &QueryError{ParamRange}
	}
	if v, ok := get(ParamLimit); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxLimit {
			return Query{}, &QueryError{ParamLimit}
		}
		q.Limit = n
	}
	if v, ok := get(ParamCursor); ok {
		c, err := DecodeCursor(v, list, account)
		if err != nil {
			return Query{}, err
		}
		q.Before = &c
	}
	return q, nil
}

// threeLetters says whether v is three ASCII letters, the form of an ISO 4217 code.
func threeLetters(v string) bool {
	if len(v) != 3 {
		return false
	}
	for _, r := range v {
		if (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') {
			return false
		}
	}
	return true
}

// instant reads an RFC 3339 date-time or a date (YYYY-MM-DD, midnight UTC).
func instant(v string, p Param) (*time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, time.DateOnly} {
		if t, err := time.Parse(layout, v); err == nil {
			// PostgreSQL keeps microseconds and years 1 to 294276; out of that, no row matches
			// anyway, but the bound must still be one PostgreSQL accepts.
			if t.Year() < 1 || t.Year() > 9999 {
				break
			}
			t = t.UTC()
			return &t, nil
		}
	}
	return nil, &QueryError{p}
}

// Cursor is a position in a list: the creation time and id of the last row of a page. ID is the
// row's id as text (a ledger entry's number, an order's uuid).
type Cursor struct {
	At time.Time
	ID string
}

// EncodeCursor is the opaque cursor of position c in the account's list.
func EncodeCursor(list string, account uuid.UUID, c Cursor) string {
	raw := fmt.Sprintf("%s1.%s.%d.%s", list, account, c.At.UnixMicro(), c.ID)
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// DecodeCursor reads a cursor issued by EncodeCursor for the same list and account.
func DecodeCursor(s, list string, account uuid.UUID) (Cursor, error) {
	bad := &QueryError{ParamCursor}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, bad
	}
	parts := strings.Split(string(raw), ".")
	if len(parts) != 4 || parts[0] != list+"1" || parts[1] != account.String() || parts[3] == "" ||
		!pgtext.Storable(parts[3]) {
		return Cursor{}, bad
	}
	micros, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return Cursor{}, bad
	}
	return Cursor{At: time.UnixMicro(micros).UTC(), ID: parts[3]}, nil
}

// LedgerKey is the statement position of a cursor (nil for none).
func LedgerKey(c *Cursor) (*store.LedgerKey, error) {
	if c == nil {
		return nil, nil
	}
	id, err := strconv.ParseInt(c.ID, 10, 64)
	if err != nil {
		return nil, &QueryError{ParamCursor}
	}
	return &store.LedgerKey{At: c.At, ID: id}, nil
}

// OrderKey is the order-history position of a cursor (nil for none).
func OrderKey(c *Cursor) (*store.OrderKey, error) {
	if c == nil {
		return nil, nil
	}
	id, err := uuid.Parse(c.ID)
	if err != nil {
		return nil, &QueryError{ParamCursor}
	}
	return &store.OrderKey{At: c.At, ID: id}, nil
}
