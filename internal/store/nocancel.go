package store

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

// This package's connections never send PostgreSQL a cancel request.
//
// Under synchronous replication (the chart's CloudNativePG default) a COMMIT returns once a
// standby holds it, and until then PostgreSQL keeps the transaction invisible to every other
// session. A cancel request ends that wait early: the server warns "canceling wait for
// synchronous replication" and makes the commit visible on the primary alone. Whatever is
// acknowledged from it afterwards (a replay answering 200 with the order, fulfilment delivering
// codes) is lost if the primary then fails over to the standby that never received it. pgx sends
// a cancel request when a context ends a statement and again whenever it abandons a connection,
// so a placement that reaches its deadline while the standbys are cut off would reveal its own
// order.
//
// Instead a context that ends a statement closes the connection (pgx's deadline handler), and
// the cancel request pgx then tries is refused before it is dialled: every connection this
// package dials reports a remote address of network noCancelNetwork, the address pgx dials for
// a cancel request, which the dialler refuses. The server notices nothing; a COMMIT goes on
// waiting for a standby and becomes visible only once one has it. The price: a statement whose
// caller gave up runs on in the server until it finishes or next writes to the closed socket.
// TestAbandonedCommitWaitsForTheStandby holds this against a real server.

// noCancelNetwork names the network of the addresses that cancel requests would be sent to.
const noCancelNetwork = "codeport-no-cancel"

var errCancelRequestRefused = errors.New("cancel requests are not sent: they would end a commit's wait for its standby")

// refuseCancelRequests makes cfg's connections close instead of cancelling, as described above.
func refuseCancelRequests(cfg *pgconn.Config) {
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if network == noCancelNetwork {
			return nil, errCancelRequestRefused
		}
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", addr, err)
		}
		return noCancelConn{conn}, nil
	}
	cfg.BuildContextWatcherHandler = func(pgConn *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: pgConn.Conn()}
	}
}

// noCancelConn is a server connection whose remote address cancel requests cannot be sent to.
type noCancelConn struct{ net.Conn }

func (c noCancelConn) RemoteAddr() net.Addr { return noCancelAddr{c.Conn.RemoteAddr()} }

// noCancelAddr is the server's address, under a network no dialler reaches.
type noCancelAddr struct{ net.Addr }

func (noCancelAddr) Network() string { return noCancelNetwork }
