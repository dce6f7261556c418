package provisioning

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/provisioning/configdb"
)

// Key is a credential issued by an ApiKey resource.
type Key struct {
	Namespace   string
	Partner     string
	Environment string
	// Kind is "apiKey" or "bearerToken".
	Kind string
	// Source identifies the issuing resource ("namespace/name"); one source has at most one
	// active key.
	Source    string
	Rotation  int64
	Plaintext string
	// PreviousKeyGrace, when positive, keeps the key this one replaces valid for that long
	// instead of revoking it at once (an ApiKey's previousKeyGracePeriod, on rotation).
	PreviousKeyGrace time.Duration
	// Revoked registers the key as revoked and changes no other key: its plaintext is held
	// where it must not be, and registering its digest is what keeps every source from ever
	// registering it as theirs.
	Revoked bool
}

// KeyStatus is what the database records of a key.
type KeyStatus = configdb.KeyStatus

// ErrKeyOfAnotherSource means the key is registered to another source. A key is never moved
// between sources: whoever holds another resource's key is not that resource.
var ErrKeyOfAnotherSource = errors.New("key is registered to another source")

// RegisterKey stores the key's digest for the partner's account and revokes every other key of
// the same source, in one transaction: issuing a new key revokes the previous one at once, or,
// with PreviousKeyGrace, gives it that long (see configdb.ExpireKeysOf). Registering the same key
// again changes nothing, so callers may repeat it freely; a key registered to another source is
// refused with ErrKeyOfAnotherSource, and then nothing changes either.
func (p *Provisioner) RegisterKey(ctx context.Context, k Key) (revoked int64, err error) {
	env, ok := auth.ParseKey(k.Plaintext)
	if !ok || env != k.Environment {
		return 0, fmt.Errorf("key for %s is not a well-formed %s key", k.Source, k.Environment)
	}
	acct, err := p.account(ctx, k.Namespace, k.Partner, k.Environment)
	if err != nil {
		return 0, err
	}
	digest := auth.Digest(k.Plaintext)
	err = p.config.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		row := configdb.APIKey{AccountID: acct.ID, Kind: k.Kind, Digest: digest[:],
			KeyPrefix: auth.DisplayPrefix(k.Plaintext),
			Source:    k.Source, Rotation: k.Rotation}
		if k.Revoked {
			now := time.Now()
			row.RevokedAt = &now
		}
		inserted, err := configdb.InsertKey(tx, &row)
		switch {
		case err != nil:
			return err
		case k.Revoked:
			// Registered revoked, or registered already: either way no source can take it now.
			return nil
		case !inserted:
			// The insert waited for a concurrent one of the same digest to commit, so this read
			// sees whoever registered it.
			stored, err := configdb.KeyState(ctx, tx, digest[:])
			if err != nil {
				return err
			}
			if stored.Source != k.Source {
				return fmt.Errorf("key %s for %s: %w", row.KeyPrefix, k.Source, ErrKeyOfAnotherSource)
			}
		}
		if k.PreviousKeyGrace > 0 {
			_, err := configdb.ExpireKeysOf(tx, k.Source, digest[:], k.PreviousKeyGrace)
			return err
		}
		revoked, err = configdb.RevokeKeysOf(tx, k.Source, digest[:])
		return err
	})
	return revoked, err
}

// RevokeKeys revokes every key issued by source.
func (p *Provisioner) RevokeKeys(ctx context.Context, source string) (int64, error) {
	return configdb.RevokeKeysOf(p.config.WithContext(ctx), source, nil)
}

// PreviousKey is the key of source still valid in a rotation's grace period, if any.
func (p *Provisioner) PreviousKey(ctx context.Context, source string) (configdb.ExpiringKey, bool, error) {
	return configdb.ExpiringKeyOf(ctx, p.config, source)
}

// RevokeExpiredKeys records as revoked the keys of source whose grace period has ended (the API
// refuses them already).
func (p *Provisioner) RevokeExpiredKeys(ctx context.Context, source string) (int64, error) {
	return configdb.RevokeExpiredKeysOf(ctx, p.config, source)
}

// KeyState reports whether a key is registered, whether it is still active and to which
// source, in one query.
func (p *Provisioner) KeyState(ctx context.Context, plaintext string) (KeyStatus, error) {
	digest := auth.Digest(plaintext)
	return configdb.KeyState(ctx, p.config, digest[:])
}
