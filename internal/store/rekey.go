package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// SealedTable is a table whose rows hold ciphertexts sealed under a codes key.
type SealedTable struct {
	// Name is the table's, for progress lines.
	Name string
	// lockSQL locks up to $2 rows sealed under key $1: their ctid, ciphertext, digest (codes)
	// and the columns a secret's owner is made of (secrets).
	lockSQL string
	// resealSQL writes the ciphertexts $2 under key $1 into the rows at ctids $3.
	resealSQL string
	// countSQL counts the rows sealed under each key of $1.
	countSQL string
}

// SealedTables are the tables holding ciphertexts: stock, delivered and archived codes, webhook
// secrets.
// Available codes are locked with SKIP LOCKED and newest import first, the other end of the
// queue fulfilment claims from (oldest first, skipping locked codes itself), so re-encrypting
// them seldom hides a code an order wants.
var SealedTables = []SealedTable{
	{
		Name: "code_stock",
		lockSQL: `SELECT ctid::text, ciphertext, digest, NULL::uuid, NULL::text FROM code_stock
			WHERE key_ref = $1 ORDER BY id DESC LIMIT $2 FOR UPDATE SKIP LOCKED`,
		resealSQL: `UPDATE code_stock s SET key_ref = $1, ciphertext = a.ciphertext
			FROM unnest($2::bytea[], $3::text[]) AS a (ciphertext, loc) WHERE s.ctid = a.loc::tid`,
		countSQL: `SELECT key_ref, count(*) FROM code_stock WHERE key_ref = ANY($1) GROUP BY key_ref`,
	},
	sealedCodes("delivered_codes"),
	sealedCodes("delivered_codes_archive"),
	{
		Name: "webhook_endpoints",
		lockSQL: `SELECT ctid::text, sealed_secret, NULL::bytea, partner_id, environment FROM webhook_endpoints
			WHERE secret_key_ref = $1 AND sealed_secret IS NOT NULL LIMIT $2 FOR UPDATE SKIP LOCKED`,
		resealSQL: `UPDATE webhook_endpoints w SET secret_key_ref = $1, sealed_secret = a.ciphertext
			FROM unnest($2::bytea[], $3::text[]) AS a (ciphertext, loc) WHERE w.ctid = a.loc::tid`,
		countSQL: `SELECT secret_key_ref, count(*) FROM webhook_endpoints
			WHERE secret_key_ref = ANY($1) AND sealed_secret IS NOT NULL GROUP BY secret_key_ref`,
	},
}

// sealedCodes is a table of delivered codes, online or archived. Rekey skips rows that archival
// is moving; archival waits for rows rekey holds at most its lock_timeout.
func sealedCodes(table string) SealedTable {
	return SealedTable{
		Name: table,
		lockSQL: `SELECT ctid::text, ciphertext, digest, NULL::uuid, NULL::text FROM ` + table +
			` WHERE key_ref = $1 LIMIT $2 FOR UPDATE SKIP LOCKED`,
		resealSQL: `UPDATE ` + table + ` d SET key_ref = $1, ciphertext = a.ciphertext
			FROM unnest($2::bytea[], $3::text[]) AS a (ciphertext, loc) WHERE d.ctid = a.loc::tid`,
		countSQL: `SELECT key_ref, count(*) FROM ` + table + ` WHERE key_ref = ANY($1) GROUP BY key_ref`,
	}
}

// SealedRow is a locked row of a SealedTable.
type SealedRow struct {
	// loc is the row's ctid, stable while the row is locked.
	loc        string
	Ciphertext []byte
	// Digest is a code's digest; nil for a secret.
	Digest []byte
	// Owner is what a secret is bound to (WebhookSecretOwner); "" for a code.
	Owner string
}

// LockSealed locks up to limit rows of t sealed under key, in q's transaction; rows other
// transactions hold are skipped.
func LockSealed(ctx context.Context, q Querier, t SealedTable, key KeyRef, limit int) ([]SealedRow, error) {
	rows, err := q.Query(ctx, t.lockSQL, key, limit)
	if err != nil {
		return nil, fmt.Errorf("lock %s sealed under key %d: %w", t.Name, key, err)
	}
	var out []SealedRow
	var r SealedRow
	var partnerID *uuid.UUID
	var environment *string
	if _, err := pgx.ForEachRow(rows, []any{&r.loc, &r.Ciphertext, &r.Digest, &partnerID, &environment},
		func() error {
			if partnerID != nil && environment != nil {
				r.Owner = WebhookSecretOwner(*partnerID, *environment)
			}
			out = append(out, r)
			r = SealedRow{}
			return nil
		}); err != nil {
		return nil, fmt.Errorf("lock %s sealed under key %d: %w", t.Name, key, err)
	}
	return out, nil
}

// Reseal writes rows, locked by LockSealed in q's transaction and their Ciphertext replaced, as
// sealed under key.
func Reseal(ctx context.Context, q Querier, t SealedTable, key KeyRef, rows []SealedRow) error {
	cts := make([][]byte, len(rows))
	locs := make([]string, len(rows))
	for i, r := range rows {
		cts[i], locs[i] = r.Ciphertext, r.loc
	}
	tag, err := q.Exec(ctx, t.resealSQL, key, cts, locs)
	if err != nil {
		return fmt.Errorf("re-encrypt %s under key %d: %w", t.Name, key, err)
	}
	if tag.RowsAffected() != int64(len(rows)) {
		return fmt.Errorf("re-encrypt %s under key %d: wrote %d of %d rows", t.Name, key, tag.RowsAffected(), len(rows))
	}
	return nil
}

// SealedCounts counts the ciphertexts of every SealedTable sealed under each of keys, through
// indexes on the key: only keys that seal something are in the result.
func SealedCounts(ctx context.Context, q Querier, keys []KeyRef) (map[KeyRef]int64, error) {
	counts := map[KeyRef]int64{}
	if len(keys) == 0 {
		return counts, nil
	}
	refs := make([]int16, len(keys))
	for i, k := range keys {
		refs[i] = int16(k)
	}
	for _, t := range SealedTables {
		rows, err := q.Query(ctx, t.countSQL, refs)
		if err != nil {
			return nil, fmt.Errorf("count %s by codes key: %w", t.Name, err)
		}
		var key KeyRef
		var n int64
		if _, err := pgx.ForEachRow(rows, []any{&key, &n}, func() error {
			counts[key] += n
			return nil
		}); err != nil {
			return nil, fmt.Errorf("count %s by codes key: %w", t.Name, err)
		}
	}
	return counts, nil
}
