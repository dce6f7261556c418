package codes

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
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

// Error implements error.
func (e *WrongKeyError) Error() string {
	if e.Unopened != "" {
		return fmt.Sprintf("codes key %s does not open the codes and secrets already in this database "+
			"(%s fails authentication); start with the key they are encrypted with", e.Key, e.Unopened)
	}
	return fmt.Sprintf("codes key %s does not match the key this database's codes and secrets are encrypted with "+
		"(key id %s); start with that key", e.Key, strings.Join(e.Recorded, ", "))
}

// MissingKeyError refuses a keyring that lacks a key the database still has ciphertexts sealed
// under: without it they would not open. Its text is the one line a process that refuses to
// start prints.
type MissingKeyError struct {
	// Key is the id of the key missing; Count the ciphertexts sealed under it.
	Key   string
	Count int64
}

// Error implements error.
func (e *MissingKeyError) Error() string {
	return fmt.Sprintf("codes key %s still encrypts %d codes and secrets but is not in the keyring; "+
		"add it back, and run `codeport codes rekey` before removing it", e.Key, e.Count)
}

// maxKeys bounds the attempts to record a key under the next free ref while other processes
// record keys of their own.
const maxKeys = 100

// Attach checks c's keyring against the keys the database's codes and secrets are sealed under,
// and returns c bound to the database: the numbers its rows name the keys by and the database's
// digest key. A *WrongKeyError refuses a ring none of whose keys the database records, a
// *MissingKeyError one that lacks a key still sealing ciphertexts. Keys of the ring the database
// does not record yet are recorded, each with the digest key sealed under it.
//
// A database that records no key yet gets the first of the ring's keys that opens the
// ciphertexts already in it (written before keys were recorded). Processes that start at once
// race safely: one key is recorded per ref, and each compares its own with those.
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
	digestKey, err := c.digestKeyOf(keys)
	if err != nil {
		return nil, err
	}
	if keys, err = c.recordRing(ctx, q, keys, digestKey); err != nil {
		return nil, err
	}
	attached, lacking := c.bind(keys, digestKey)
	if err := refuseLacking(ctx, q, lacking, attached.recorded); err != nil {
		return nil, err
	}
	return attached, nil
}

// recordRing records the keys of c's ring the database does not record yet, each under the next
// free ref with digestKey sealed under it, and returns the keys the database then records.
func (c *Cipher) recordRing(
	ctx context.Context, q store.Querier, keys []store.CodesKey, digestKey []byte,
) ([]store.CodesKey, error) {
	for attempt := 0; ; attempt++ {
		missing := c.unrecorded(keys)
		if len(missing) == 0 {
			return keys, nil
		}
		if attempt == maxKeys {
			return nil, fmt.Errorf("record codes key %s: other processes keep recording keys", missing[0].id)
		}
		sealed, err := missing[0].sealSecret(digestKey, digestKeyOwner)
		if err != nil {
			return nil, err
		}
		next := store.CodesKey{Ref: keys[len(keys)-1].Ref + 1, ID: missing[0].id, SealedDigestKey: sealed}
		if err := store.RecordCodesKey(ctx, q, next); err != nil {
			return nil, err
		}
		if keys, err = store.CodesKeys(ctx, q); err != nil {
			return nil, err
		}
	}
}

// bind returns c bound to the keys the database records, and the refs of those c's ring lacks.
func (c *Cipher) bind(keys []store.CodesKey, digestKey []byte) (*Cipher, []store.KeyRef) {
	attached := &Cipher{
		ring: make([]*masterKey, 0, len(c.ring)), byRef: map[store.KeyRef]*masterKey{},
		recorded: map[store.KeyRef]string{}, digestKey: digestKey,
	}
	byID := map[string]*masterKey{}
	for _, k := range c.ring {
		byID[k.id] = k
	}
	bound := map[string]*masterKey{}
	var lacking []store.KeyRef
	for _, rec := range keys {
		attached.recorded[rec.Ref] = rec.ID
		k := byID[rec.ID]
		if k == nil {
			lacking = append(lacking, rec.Ref)
			continue
		}
		b := *k
		b.ref = rec.Ref
		attached.byRef[rec.Ref], bound[k.id] = &b, &b
	}
	for _, k := range c.ring {
		attached.ring = append(attached.ring, bound[k.id])
	}
	attached.current = bound[c.current.id]
	return attached, lacking
}

// digestKeyOf opens the database's digest key with the first key of c's ring the database
// records; a *WrongKeyError when it records none of them.
func (c *Cipher) digestKeyOf(keys []store.CodesKey) ([]byte, error) {
	ids := make([]string, 0, len(keys))
	for _, k := range c.ring {
		for _, rec := range keys {
			if rec.ID != k.id {
				continue
			}
			digestKey, err := k.openSecret(rec.SealedDigestKey, digestKeyOwner)
			if err != nil {
				return nil, fmt.Errorf("open the digest key sealed under codes key %s: %w", k.id, err)
			}
			return digestKey, nil
		}
	}
	for _, rec := range keys {
		ids = append(ids, rec.ID)
	}
	return nil, &WrongKeyError{Key: c.current.id, Recorded: ids}
}

// unrecorded are the keys of c's ring the database does not record.
func (c *Cipher) unrecorded(keys []store.CodesKey) []*masterKey {
	var out []*masterKey
	for _, k := range c.ring {
		if !slices.ContainsFunc(keys, func(rec store.CodesKey) bool { return rec.ID == k.id }) {
			out = append(out, k)
		}
	}
	return out
}

// refuseLacking returns a *MissingKeyError for the first of the recorded keys lacking that still
// seals ciphertexts: counted through indexes on the key, so only a lacking key costs a look.
func refuseLacking(
	ctx context.Context, q store.Querier, lacking []store.KeyRef, recorded map[store.KeyRef]string,
) error {
	counts, err := store.SealedCounts(ctx, q, lacking)
	if err != nil {
		return err
	}
	for _, ref := range lacking {
		if n := counts[ref]; n > 0 {
			return &MissingKeyError{Key: recorded[ref], Count: n}
		}
	}
	return nil
}

// record records the first key of c's ring that opens the ciphertexts already in the database as
// its first key, with the database's digest key sealed under it. A key recorded meanwhile by
// another process stays: Attach compares with whichever was recorded.
func (c *Cipher) record(ctx context.Context, q store.Querier) error {
	samples, err := store.SealedSamples(ctx, q)
	if err != nil {
		return err
	}
	// A database without codes gets a digest key of its own, tied to no codes key.
	own := make([]byte, digestKeySize)
	if _, err := rand.Read(own); err != nil {
		return fmt.Errorf("generate digest key: %w", err)
	}
	var refused error
	for _, k := range c.ring {
		digestKey, ok := k.openSamples(samples, own)
		if !ok {
			if refused == nil {
				refused = &WrongKeyError{Key: k.id, Unopened: digestKey.unopened}
			}
			continue
		}
		sealed, err := k.sealSecret(digestKey.key, digestKeyOwner)
		if err != nil {
			return err
		}
		return store.RecordCodesKey(ctx, q, store.CodesKey{Ref: FirstKey, ID: k.id, SealedDigestKey: sealed})
	}
	return refused
}

// sampled is what openSamples found: the digest key, or the ciphertext that did not open.
type sampled struct {
	key      []byte
	unopened string
}

// openSamples tells whether k opens every sample, and the digest key of a database whose
// ciphertexts k opens: own unless it holds codes.
func (k *masterKey) openSamples(samples []store.SealedSample, own []byte) (sampled, bool) {
	digestKey := own
	for _, s := range samples {
		var err error
		switch {
		case s.Key != FirstKey:
			err = ErrTampered
		case s.Owner != "":
			_, err = k.openSecret(s.Ciphertext, s.Owner)
		default:
			_, err = k.open(s.Ciphertext, s.Digest)
		}
		if err != nil {
			return sampled{unopened: s.What}, false
		}
		if s.Owner == "" {
			// The codes were digested under the key derived from k: it stays the database's,
			// so their digests go on detecting duplicates whichever key is current later.
			digestKey = k.derivedDigest
		}
	}
	return sampled{key: digestKey}, true
}
