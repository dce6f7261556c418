package codes

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"

	"github.com/codeport/codeport/internal/store"
)

// digestKeySize is the length of a database's digest key (HMAC-SHA256).
const digestKeySize = 32

// digestKeyOwner is what a sealed digest key is bound to: it opens as nothing else.
const digestKeyOwner = "codes/digest-key"

// WrongKeyError refuses a codes key that is not the one the database's codes and secrets are
// sealed under. Its text is the one line a process that refuses to start prints.
type WrongKeyError struct {
	// Key is the id of the key refused.
	Key string
	// Recorded are the ids of the keys the database records.
	Recorded []string
	// Unopened names a ciphertext the key does not open, on a database that held ciphertexts
	// before it recorded keys.
	Unopened string
}

func (e *WrongKeyError) Error() string {
	if e.Unopened != "" {
		return fmt.Sprintf("codes key %s does not open the codes and secrets already in this database "+
			"(%s fails authentication); start with the key they are encrypted with", e.Key, e.Unopened)
	}
	return fmt.Sprintf("codes key %s does not match the key this database's codes and secrets are encrypted with "+
		"(key id %s); start with that key", e.Key, strings.Join(e.Recorded, ", "))
}

// Attach checks that c's key is the one the database's codes and secrets are sealed under, and
// returns c bound to the database: the number its rows name the key by and the database's digest
// key. A *WrongKeyError refuses another key.
//
// A database that records no key yet gets c's, provided the ciphertexts already in it (written
// before keys were recorded) open with it. Processes that start at once race safely: one key is
// recorded, and each compares its own with that one.
func (c *Cipher) Attach(ctx context.Context, q store.Querier) (*Cipher, error) {
	keys, err := store.CodesKeys(ctx, q)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		if err := c.record(ctx, q); err != nil {
			return nil, err
		}
		if keys, err = store.CodesKeys(ctx, q); err != nil {
			return nil, err
		}
	}
	recorded := make(map[store.KeyRef]string, len(keys))
	ids := make([]string, 0, len(keys))
	var own *store.CodesKey
	for i, k := range keys {
		recorded[k.Ref] = k.ID
		ids = append(ids, k.ID)
		if k.ID == c.id {
			own = &keys[i]
		}
	}
	if own == nil {
		return nil, &WrongKeyError{Key: c.id, Recorded: ids}
	}
	digestKey, err := c.openSecret(own.SealedDigestKey, digestKeyOwner)
	if err != nil {
		return nil, fmt.Errorf("open the digest key sealed under codes key %s: %w", c.id, err)
	}
	attached := *c
	attached.ref, attached.recorded, attached.digestKey = own.Ref, recorded, digestKey
	return &attached, nil
}

// record records c's key as the database's first, with the database's digest key sealed under
// it, once the ciphertexts already in the database open with it. A key recorded meanwhile by
// another process stays: Attach compares with whichever was recorded.
func (c *Cipher) record(ctx context.Context, q store.Querier) error {
	samples, err := store.SealedSamples(ctx, q)
	if err != nil {
		return err
	}
	// A database without codes gets a digest key of its own, tied to no codes key.
	digestKey := make([]byte, digestKeySize)
	if _, err := rand.Read(digestKey); err != nil {
		return fmt.Errorf("generate digest key: %w", err)
	}
	for _, s := range samples {
		var err error
		if s.Owner != "" {
			_, err = c.OpenSecret(s.Key, s.Ciphertext, s.Owner)
		} else {
			_, err = c.Open(s.Key, s.Ciphertext, s.Digest)
		}
		if err != nil {
			return &WrongKeyError{Key: c.id, Unopened: s.What}
		}
		if s.Owner == "" {
			// The codes were digested under the key derived from c's: it stays the database's,
			// so their digests go on detecting duplicates whichever key is current later.
			digestKey = c.digestKey
		}
	}
	sealed, err := c.SealSecret(digestKey, digestKeyOwner)
	if err != nil {
		return err
	}
	return store.RecordCodesKey(ctx, q, store.CodesKey{Ref: FirstKey, ID: c.id, SealedDigestKey: sealed})
}
