package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// KeyRef is the number a ciphertext names the codes key it is sealed under by: the ref of a row
// of codes_keys.
type KeyRef int16

// CodesKey is a codes key the database's codes and secrets are sealed under.
type CodesKey struct {
	Ref KeyRef
	// ID is the key's fingerprint, never the key.
	ID string
	// SealedDigestKey is the database's digest key, sealed under this key.
	SealedDigestKey []byte
}

// CodesKeys returns the codes keys the database records, by ref; none before the first process
// that holds a key has started on it.
func CodesKeys(ctx context.Context, q Querier) ([]CodesKey, error) {
	rows, err := q.Query(ctx, `SELECT ref, key_id, sealed_digest_key FROM codes_keys ORDER BY ref`)
	if err != nil {
		return nil, fmt.Errorf("read codes keys: %w", err)
	}
	var keys []CodesKey
	var k CodesKey
	if _, err := pgx.ForEachRow(rows, []any{&k.Ref, &k.ID, &k.SealedDigestKey}, func() error {
		keys = append(keys, k)
		k = CodesKey{}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read codes keys: %w", err)
	}
	return keys, nil
}

// RecordCodesKey records k unless a key of its ref or id is recorded already. Processes starting
// at once on a database that records none each try; one row wins, and each then reads CodesKeys
// to learn which.
func RecordCodesKey(ctx context.Context, q Querier, k CodesKey) error {
	_, err := q.Exec(ctx, `INSERT INTO codes_keys (ref, key_id, sealed_digest_key) VALUES ($1, $2, $3)
		ON CONFLICT DO NOTHING`, k.Ref, k.ID, k.SealedDigestKey)
	if err != nil {
		return fmt.Errorf("record codes key %s: %w", k.ID, err)
	}
	return nil
}

// SealedSample is a ciphertext of the database, to check which key opens it.
type SealedSample struct {
	// What names the row, for messages.
	What       string
	Key        KeyRef
	Ciphertext []byte
	// Digest is the code's digest; nil for a secret.
	Digest []byte
	// Owner is what a secret is bound to (WebhookSecretOwner); "" for a code.
	Owner string
}

// sealedSamplesSQL picks one ciphertext of each kind, each by an index or the first row read:
// the first stock code imported, a delivered code, an archived one, the sealed webhook secret
// written last.
const sealedSamplesSQL = `
(SELECT 'stock code ' || id, key_ref, ciphertext, digest, NULL::uuid, NULL::text
    FROM code_stock ORDER BY id LIMIT 1)
UNION ALL
(SELECT format('delivered code %s/%s/%s', order_id, line_no, unit_no), key_ref, ciphertext, digest, NULL, NULL
    FROM delivered_codes LIMIT 1)
UNION ALL
(SELECT format('archived code %s/%s/%s', order_id, line_no, unit_no), key_ref, ciphertext, digest, NULL, NULL
    FROM delivered_codes_archive LIMIT 1)
UNION ALL
(SELECT format('webhook secret of partner %s (%s)', partner_id, environment), secret_key_ref, sealed_secret, NULL,
        partner_id, environment
    FROM webhook_endpoints WHERE sealed_secret IS NOT NULL ORDER BY updated_at DESC LIMIT 1)`

// SealedSamples returns a few of the database's ciphertexts, at most one stock code, one
// delivered code, one archived code and one webhook secret: those a key must open before it is recorded as the key
// of a database that holds ciphertexts already.
func SealedSamples(ctx context.Context, q Querier) ([]SealedSample, error) {
	rows, err := q.Query(ctx, sealedSamplesSQL)
	if err != nil {
		return nil, fmt.Errorf("sample ciphertexts: %w", err)
	}
	var samples []SealedSample
	var s SealedSample
	var partnerID *uuid.UUID
	var environment *string
	if _, err := pgx.ForEachRow(rows, []any{&s.What, &s.Key, &s.Ciphertext, &s.Digest, &partnerID, &environment},
		func() error {
			if partnerID != nil && environment != nil {
				s.Owner = WebhookSecretOwner(*partnerID, *environment)
			}
			samples = append(samples, s)
			s = SealedSample{}
			return nil
		}); err != nil {
		return nil, fmt.Errorf("sample ciphertexts: %w", err)
	}
	return samples, nil
}
