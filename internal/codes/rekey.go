package codes

import (
	"context"
	"fmt"
	"slices"

	"github.com/codeport/codeport/internal/store"
)

// RekeyProgress is a batch Rekey moved to the current key.
type RekeyProgress struct {
	// Table is the table and Key the id of the older key of the batch; Rows its size.
	Table string
	Key   string
	Rows  int
	// Done is the number of ciphertexts moved so far in this run.
	Done int64
}

// KeyCount is how many ciphertexts a key seals.
type KeyCount struct {
	Key   string
	Count int64
	// Current tells the current key; InRing a key the ring holds (others cannot be rekeyed).
	Current, InRing bool
}

// maxRekeyPasses bounds the passes over the tables: a pass leaves rows that other transactions
// held only while they hold them, and a process still sealing under an older key is caught by
// the count rather than chased forever.
const maxRekeyPasses = 10

// Rekey seals every ciphertext of the database sealed under an older key of c's ring again under
// the current key, in transactions of at most batch rows that lock only those rows, so orders go
// on meanwhile; killed, it is run again and goes on, as rows name their key. It returns how many
// it moved; Remaining tells what each key still seals.
func (c *Cipher) Rekey(
	ctx context.Context, db store.TxBeginner, batch int, progress func(RekeyProgress),
) (moved int64, err error) {
	if batch <= 0 {
		return 0, fmt.Errorf("rekey batch must be above 0, not %d", batch)
	}
	for pass := 0; pass < maxRekeyPasses; pass++ {
		before := moved
		for ref, k := range c.byRef {
			if k == c.current {
				continue
			}
			for _, t := range store.SealedTables {
				for {
					n, err := c.rekeyBatch(ctx, db, t, ref, k, batch)
					if err != nil {
						return moved, err
					}
					if n == 0 {
						break
					}
					moved += int64(n)
					progress(RekeyProgress{Table: t.Name, Key: k.id, Rows: n, Done: moved})
				}
			}
		}
		if moved == before {
			break
		}
	}
	return moved, nil
}

// rekeyBatch moves up to batch rows of t from key k to the current key, in one transaction.
func (c *Cipher) rekeyBatch(
	ctx context.Context, db store.TxBeginner, t store.SealedTable, ref store.KeyRef, k *masterKey, batch int,
) (int, error) {
	var n int
	err := store.BeginFunc(ctx, db, func(tx store.Tx) error {
		rows, err := store.LockSealed(ctx, tx, t, ref, batch)
		if err != nil || len(rows) == 0 {
			return err
		}
		for i, r := range rows {
			if rows[i].Ciphertext, err = c.reseal(k, r); err != nil {
				return fmt.Errorf("re-encrypt a row of %s sealed under codes key %s: %w", t.Name, k.id, err)
			}
		}
		n = len(rows)
		return store.Reseal(ctx, tx, t, c.current.ref, rows)
	})
	return n, err
}

// reseal opens r with k and seals it under the current key.
func (c *Cipher) reseal(k *masterKey, r store.SealedRow) ([]byte, error) {
	if r.Owner != "" {
		plain, err := k.openSecret(r.Ciphertext, r.Owner)
		if err != nil {
			return nil, err
		}
		return c.current.sealSecret(plain, r.Owner)
	}
	plain, err := k.open(r.Ciphertext, r.Digest)
	if err != nil {
		return nil, err
	}
	return c.current.seal(plain, r.Digest)
}

// Remaining counts the ciphertexts each key the database records seals, keys in the order of
// their refs; keys that seal nothing are listed with 0.
func (c *Cipher) Remaining(ctx context.Context, q store.Querier) ([]KeyCount, error) {
	return KeyCounts(ctx, q, c)
}

// KeyCounts is Remaining for anyone: ring, when not nil, marks the current key and the keys it
// holds by their ids, and need not be attached to the database, so that reading the counts
// records nothing.
func KeyCounts(ctx context.Context, q store.Querier, ring *Cipher) ([]KeyCount, error) {
	keys, err := store.CodesKeys(ctx, q)
	if err != nil {
		return nil, err
	}
	refs := make([]store.KeyRef, len(keys))
	for i, k := range keys {
		refs[i] = k.Ref
	}
	counts, err := store.SealedCounts(ctx, q, refs)
	if err != nil {
		return nil, err
	}
	out := make([]KeyCount, len(keys))
	for i, k := range keys {
		out[i] = KeyCount{Key: k.ID, Count: counts[k.Ref]}
		if ring != nil {
			out[i].Current, out[i].InRing = k.ID == ring.KeyID(), slices.Contains(ring.KeyIDs(), k.ID)
		}
	}
	return out, nil
}
