package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/pressly/goose/v3"
)

// Annotations a migration file carries in SQL comments, read by migrate before it runs anything:
//
//	-- codeport:contract N
//	    (in the Up section) applying this step breaks binaries built for a schema below N:
//	    it drops or changes what they still use. `migrate up` refuses it while such a binary
//	    runs. Every other step is expand-only: binaries of the previous release run on it.
//	-- codeport:destroys SELECT count(*) FROM …
//	    (in the Down section) one query per line, counting the rows whose data rolling this step
//	    back loses: rows of a table it drops, non-default values of a column it drops.
//	    `migrate down` refuses when any count is above zero.
const (
	contractAnnotation = "-- codeport:contract "
	destroysAnnotation = "-- codeport:destroys "
)

// riverDestroys counts what rolling back River's step loses: its queue's jobs.
const riverDestroys = "SELECT count(*) FROM river_job"

// stepNotes are the annotations of one migration step.
type stepNotes struct {
	source string
	// contractBelow is the schema version below which binaries break once the step is applied;
	// 0 for an expand-only step.
	contractBelow int64
	destroys      []string
}

// readNotes reads the annotations of every SQL migration of fsys, by version.
func readNotes(fsys fs.FS) (map[int64]stepNotes, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	notes := map[int64]stepNotes{riverSchemaVersion: {source: "river job queue schema", destroys: []string{riverDestroys}}}
	for _, e := range entries {
		if path.Ext(e.Name()) != ".sql" {
			continue
		}
		v, err := goose.NumericComponent(e.Name())
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", e.Name(), err)
		}
		src, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		n, err := parseNotes(e.Name(), string(src))
		if err != nil {
			return nil, err
		}
		notes[v] = n
	}
	return notes, nil
}

// parseNotes reads one migration's annotations, refusing one in the wrong section: a destroys
// query in Up would never run, and a contract note in Down would never be heeded.
func parseNotes(name, src string) (stepNotes, error) {
	n := stepNotes{source: name}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(src))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(text, "-- +goose Up"):
			section = "up"
		case strings.HasPrefix(text, "-- +goose Down"):
			section = "down"
		case strings.HasPrefix(text, contractAnnotation):
			below, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(text, contractAnnotation)), 10, 64)
			if err != nil || below <= 0 || section != "up" {
				return n, fmt.Errorf("migration %s line %d: want %q with a schema version, in the Up section",
					name, line, strings.TrimSpace(contractAnnotation)+" N")
			}
			n.contractBelow = below
		case strings.HasPrefix(text, destroysAnnotation):
			if section != "down" {
				return n, fmt.Errorf("migration %s line %d: %q belongs in the Down section",
					name, line, strings.TrimSpace(destroysAnnotation))
			}
			n.destroys = append(n.destroys, strings.TrimSpace(strings.TrimPrefix(text, destroysAnnotation)))
		}
	}
	if err := sc.Err(); err != nil {
		return n, fmt.Errorf("read migration %s: %w", name, err)
	}
	return n, nil
}

// Destruction is a migration step whose rollback would lose rows.
type Destruction struct {
	Version int64
	Source  string
	Rows    int64
}

// DestroyedDataError refuses a rollback that would lose data; its text is the one line an
// operator sees.
type DestroyedDataError struct{ Steps []Destruction }

// Error implements error.
func (e *DestroyedDataError) Error() string {
	first := e.Steps[0]
	msg := fmt.Sprintf("refusing to roll back migration %d (%s): it would destroy %d row(s)",
		first.Version, first.Source, first.Rows)
	if len(e.Steps) > 1 {
		msg += fmt.Sprintf(", and %d more step(s) would destroy more", len(e.Steps)-1)
	}
	return msg + "; pass --force to roll back anyway"
}

// Destroys counts, for every applied step above version that a rollback to version would undo,
// the rows it would lose, newest step first, and returns the steps that would lose any.
func (m *Migrator) Destroys(ctx context.Context, version int64) ([]Destruction, error) {
	statuses, err := m.provider.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("migration status: %w", err)
	}
	var out []Destruction
	for _, s := range slices.Backward(statuses) {
		v := s.Source.Version
		if v <= version || s.State != goose.StateApplied {
			continue
		}
		n := m.notes[v]
		d := Destruction{Version: v, Source: n.source}
		for _, q := range n.destroys {
			var rows int64
			if err := m.db.QueryRowContext(ctx, q).Scan(&rows); err != nil {
				return nil, fmt.Errorf("count what rolling back migration %d loses (%s): %w", v, q, err)
			}
			d.Rows += rows
		}
		if d.Rows > 0 {
			out = append(out, d)
		}
	}
	return out, nil
}

// CheckDown refuses a rollback to version that would lose data (a *DestroyedDataError) or that
// running binaries need (an *IncompatibleError).
func (m *Migrator) CheckDown(ctx context.Context, version int64) error {
	destroys, err := m.Destroys(ctx, version)
	if err != nil {
		return err
	}
	if len(destroys) > 0 {
		return &DestroyedDataError{Steps: destroys}
	}
	instances, err := m.runningInstances(ctx)
	if err != nil {
		return err
	}
	var broken []Instance
	for _, in := range instances {
		if in.SchemaVersion > version {
			broken = append(broken, in)
		}
	}
	if len(broken) > 0 {
		return &IncompatibleError{What: fmt.Sprintf("roll back to schema %d", version), Need: version, Instances: broken}
	}
	return nil
}

// previousVersion is the applied version below the current one: where Down goes.
func (m *Migrator) previousVersion(ctx context.Context) (int64, error) {
	statuses, err := m.provider.Status(ctx)
	if err != nil {
		return 0, fmt.Errorf("migration status: %w", err)
	}
	var applied []int64
	for _, s := range statuses {
		if s.State == goose.StateApplied {
			applied = append(applied, s.Source.Version)
		}
	}
	if len(applied) == 0 {
		return 0, ErrNothingToRollBack
	}
	if len(applied) == 1 {
		return 0, nil
	}
	return applied[len(applied)-2], nil
}

// CheckDownOne is CheckDown for Down: a rollback of the latest step.
func (m *Migrator) CheckDownOne(ctx context.Context) error {
	prev, err := m.previousVersion(ctx)
	if errors.Is(err, ErrNothingToRollBack) {
		return nil
	}
	if err != nil {
		return err
	}
	return m.CheckDown(ctx, prev)
}

// ContractBelow is the schema version below which binaries cannot run on the database at
// version: the highest contractBelow of the steps up to it (0 when none is a contract step).
func (m *Migrator) contractBelow(version int64) int64 {
	var below int64
	for v, n := range m.notes {
		if v <= version {
			below = max(below, n.contractBelow)
		}
	}
	return below
}

// IncompatibleError refuses a migration that running binaries cannot survive; its text is the
// one line an operator sees.
type IncompatibleError struct {
	What string
	// Need is the schema version the binaries would have to be built for (at least, for an
	// upgrade; at most, for a rollback).
	Need      int64
	Instances []Instance
}

// Error implements error.
func (e *IncompatibleError) Error() string {
	names := make([]string, 0, len(e.Instances))
	for _, in := range e.Instances {
		names = append(names, fmt.Sprintf("%s %s on %s (schema %d)", in.Component, in.Version, in.Host, in.SchemaVersion))
	}
	return fmt.Sprintf("refusing to %s: %d running binary(ies) cannot run on it: %s; "+
		"roll them out first (see `codeport migrate status`), or pass --force",
		e.What, len(e.Instances), strings.Join(names, ", "))
}

// CheckUp refuses Up when a pending step is a contract step that a running binary is too old
// for (an *IncompatibleError).
func (m *Migrator) CheckUp(ctx context.Context) error {
	statuses, err := m.provider.Status(ctx)
	if err != nil {
		return fmt.Errorf("migration status: %w", err)
	}
	var step int64
	var below int64
	for _, s := range statuses {
		if n := m.notes[s.Source.Version]; s.State != goose.StateApplied && n.contractBelow > below {
			step, below = s.Source.Version, n.contractBelow
		}
	}
	if below == 0 {
		return nil
	}
	instances, err := m.runningInstances(ctx)
	if err != nil {
		return err
	}
	var broken []Instance
	for _, in := range instances {
		if in.SchemaVersion < below {
			broken = append(broken, in)
		}
	}
	if len(broken) > 0 {
		return &IncompatibleError{
			What: fmt.Sprintf("apply contract migration %d (%s), which breaks binaries built for a schema below %d",
				step, m.notes[step].source, below),
			Need: below, Instances: broken,
		}
	}
	return nil
}

// Compatibility is a running binary and whether it can run on the database's schema.
type Compatibility struct {
	Instance
	Compatible bool
	// Reason says why not, empty when compatible.
	Reason string
}

// Compatibility lists the running binaries (none before migration 24, which records them) and
// whether each can run on the database's current schema: built for a schema no older than its
// contract steps allow, and no newer than the database.
func (m *Migrator) Compatibility(ctx context.Context) (schema int64, out []Compatibility, err error) {
	if schema, err = m.Version(ctx); err != nil {
		return 0, nil, err
	}
	instances, err := m.runningInstances(ctx)
	if err != nil {
		return 0, nil, err
	}
	below := m.contractBelow(schema)
	for _, in := range instances {
		c := Compatibility{Instance: in, Compatible: true}
		switch {
		case in.SchemaVersion < below:
			c.Compatible, c.Reason = false, fmt.Sprintf("a contract step needs binaries built for schema %d or newer", below)
		case in.SchemaVersion > schema:
			c.Compatible, c.Reason = false, fmt.Sprintf("built for schema %d: run `codeport migrate up`", in.SchemaVersion)
		}
		out = append(out, c)
	}
	return schema, out, nil
}
