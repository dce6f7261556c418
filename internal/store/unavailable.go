package store

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// IsUnavailable reports whether err is what a database failover or restart looks like from this
// side: no connection can be made, the server or the pooler in front of it ended the session,
// the connection broke, or the server is a primary demoted to a standby. Statements that failed so
// may succeed once the new primary serves; a configuration error (an unknown database, a refused
// password) or the caller's own deadline never does.
func IsUnavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pgErr *pgconn.PgError
	var connectErr *pgconn.ConnectError
	switch {
	case errors.As(err, &connectErr):
		return !errors.As(err, &pgErr) || !refusedLogin(pgErr.Code)
	case errors.As(err, &pgErr):
		return goneCode(pgErr.Code)
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || pgconn.SafeToRetry(err)
}

// IsDatabaseError reports whether err came from the database: an error the server returned, or a
// connection to it that failed. The operator reports those under a reason of their own.
func IsDatabaseError(err error) bool {
	var pgErr *pgconn.PgError
	var connectErr *pgconn.ConnectError
	return errors.As(err, &pgErr) || errors.As(err, &connectErr)
}

// refusedLogin tells a connection refused for its settings from one the server could not take.
func refusedLogin(code string) bool {
	switch code {
	case "3D000", // invalid_catalog_name: the database does not exist
		"28000", "28P01": // invalid authorization, invalid password
		return true
	}
	return false
}

// goneCode tells the SQLSTATEs of a server going away from those of a refused statement.
func goneCode(code string) bool {
	switch code {
	case "57P01", // admin_shutdown: the server (or PgBouncer) is stopping
		"57P02", // crash_shutdown
		"57P03", // cannot_connect_now: starting up or promoting
		"25006": // read_only_sql_transaction: the primary was demoted
		return true
	}
	// Class 08: connection exceptions, PgBouncer's own among them (query_wait_timeout,
	// server login failures).
	return strings.HasPrefix(code, "08")
}
