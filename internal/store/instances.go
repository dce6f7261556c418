package store

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
)

// A running process refreshes its row of codeport_instances every InstanceHeartbeat; a row not
// refreshed for InstanceExpiry belongs to a process that died without removing it, and no longer
// counts (the next heartbeat of any process deletes it).
const (
	InstanceHeartbeat = 10 * time.Second
	InstanceExpiry    = 45 * time.Second
)

// Instance is a running codeport process, as it registered itself.
type Instance struct {
	ID        uuid.UUID
	Component string
	Version   string
	// SchemaVersion is the newest migration embedded in the binary.
	SchemaVersion int64
	Host          string
	StartedAt     time.Time
	LastSeen      time.Time
}

// olderInstancesSQL is the rows of live processes built for a schema below $2, $1 being
// InstanceExpiry in seconds: binaries that do not know what that schema changed. Every statement
// that asks it puts those two parameters first.
const olderInstancesSQL = `codeport_instances
    WHERE last_seen > now() - make_interval(secs => $1) AND schema_version < $2`

const liveInstancesSQL = `SELECT instance_id, component, version, schema_version, host, started_at, last_seen
FROM codeport_instances WHERE last_seen > now() - make_interval(secs => $1)
ORDER BY component, started_at, instance_id`

// runningInstances lists the processes whose rows are fresh; none on a schema below the table's.
func (m *Migrator) runningInstances(ctx context.Context) ([]Instance, error) {
	var exists bool
	if err := m.db.QueryRowContext(ctx, `SELECT to_regclass('codeport_instances') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, fmt.Errorf("read running binaries: %w", err)
	}
	if !exists {
		return nil, nil
	}
	rows, err := m.db.QueryContext(ctx, liveInstancesSQL, InstanceExpiry.Seconds())
	if err != nil {
		return nil, fmt.Errorf("read running binaries: %w", err)
	}
	defer rows.Close()
	var out []Instance
	for rows.Next() {
		var in Instance
		if err := rows.Scan(&in.ID, &in.Component, &in.Version, &in.SchemaVersion, &in.Host, &in.StartedAt,
			&in.LastSeen); err != nil {
			return nil, fmt.Errorf("read running binaries: %w", err)
		}
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read running binaries: %w", err)
	}
	return out, nil
}

// Heartbeat registers in (its ID, component, version, schema version and host) as running and
// refreshes its row every InstanceHeartbeat until ctx ends, then removes it. A failed beat is
// logged, not fatal: the registry informs migrations, the process's work does not depend on it.
func Heartbeat(ctx context.Context, q Querier, in Instance, log *slog.Logger) {
	beat := func() {
		if _, err := q.Exec(ctx, `INSERT INTO codeport_instances
			(instance_id, component, version, schema_version, host) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (instance_id) DO UPDATE SET last_seen = now()`,
			in.ID, in.Component, in.Version, in.SchemaVersion, in.Host); err != nil {
			if ctx.Err() == nil {
				log.Warn("register this process in codeport_instances", slog.Any("error", err))
			}
			return
		}
		if _, err := q.Exec(ctx, `DELETE FROM codeport_instances WHERE last_seen < now() - make_interval(secs => $1)`,
			InstanceExpiry.Seconds()); err != nil && ctx.Err() == nil {
			log.Warn("remove expired rows of codeport_instances", slog.Any("error", err))
		}
	}
	beat()
	tick := time.NewTicker(InstanceHeartbeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			// The process is stopping: its row goes now rather than when it expires.
			done, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_, err := q.Exec(done, `DELETE FROM codeport_instances WHERE instance_id = $1`, in.ID)
			cancel()
			if err != nil {
				log.Warn("remove this process from codeport_instances", slog.Any("error", err))
			}
			return
		case <-tick.C:
			beat()
		}
	}
}
