package codes

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/codeport/codeport/internal/store"
)

// KeySize is the length of the master key: 32 bytes (AES-256).
const KeySize = 32

// Cipher seals and opens codes, and the credentials the service must use in plaintext later
// (webhook signing secrets), with a keyring of master keys: the current key seals, and every key
// of the ring opens what it sealed, so a key can be rotated while codes are sold (codes rekey
// moves the ciphertexts of older keys to the current one). Each use has its own subkey derived
// from a master key, so the digest reveals nothing about the encryption keys, and a sealed secret
// is no code.
//
// Every ciphertext names the key it is sealed under (a store.KeyRef), and opening one sealed
// under a key the ring lacks says so. A process binds its cipher to its database with Attach,
// which refuses a keyring that lacks a key still sealing ciphertexts there.
type Cipher struct {
	// current seals; it is one of ring.
	current *masterKey
	// ring are the keys, current first.
	ring []*masterKey
	// byRef are the ring's keys by what the database's rows name them by.
	byRef map[store.KeyRef]*masterKey
	// recorded are the ids of the database's keys by ref, to name the key of a ciphertext
	// sealed under one the ring lacks; nil until Attach.
	recorded  map[store.KeyRef]string
	digestKey []byte
}

// masterKey is one key of a ring, with its subkeys.
type masterKey struct {
	// id is the key's fingerprint (KeyID).
	id string
	// ref is what the database's rows name this key by.
	ref     store.KeyRef
	aead    cipher.AEAD
	secrets cipher.AEAD
	// derivedDigest is the digest key derived from this key: a database's first key's.
	derivedDigest []byte
}

// ParseKey accepts the master key as base64 (standard or URL alphabet) or hex.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, dec := range []func(string) ([]byte, error){
		base64.StdEncoding.DecodeString, base64.RawStdEncoding.DecodeString,
		base64.URLEncoding.DecodeString, base64.RawURLEncoding.DecodeString, hex.DecodeString,
	} {
		if b, err := dec(s); err == nil && len(b) == KeySize {
			return b, nil
		}
	}
	return nil, errKeyFormat()
}

// errKeyFormat says how a codes key is written.
func errKeyFormat() error {
	return fmt.Errorf(
		"codes key must be %d bytes, base64 or hex encoded (generate one with `openssl rand -base64 32`)", KeySize)
}

// NewKey returns a random master key, base64 encoded.
func NewKey() (string, error) {
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate codes key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

func subkey(master []byte, purpose string) []byte {
	m := hmac.New(sha256.New, master)
	m.Write([]byte("codeport/" + purpose))
	return m.Sum(nil)
}

// FirstKey is the ref of a database's first codes key, the one every ciphertext written before
// keys were recorded is sealed under.
const FirstKey store.KeyRef = 1

// keyIDSize is how much of the key's fingerprint its id keeps: enough that two keys never share
// one by chance, and no more than telling keys apart needs.
const keyIDSize = 8

// NewCipher builds a cipher from a 32-byte master key as a database's first key, whose digest
// key is derived from it: what every database's key was before keys were recorded. A process
// attaches it to its database (Attach) before sealing or opening anything there.
func NewCipher(master []byte) (*Cipher, error) {
	k, err := newMasterKey(master)
	if err != nil {
		return nil, err
	}
	return newRing(k, []*masterKey{k}), nil
}

// NewKeyring builds a cipher from several master keys; the one whose id is current seals.
// Until it is attached, the cipher knows only the current key, as the first key of a database.
func NewKeyring(masters [][]byte, current string) (*Cipher, error) {
	var ring []*masterKey
	var cur *masterKey
	seen := map[string]bool{}
	for _, m := range masters {
		k, err := newMasterKey(m)
		if err != nil {
			return nil, err
		}
		if seen[k.id] {
			continue
		}
		seen[k.id] = true
		ring = append(ring, k)
		if k.id == current {
			cur = k
		}
	}
	switch {
	case len(ring) == 0:
		return nil, errors.New("the codes keyring holds no key")
	case cur == nil && current == "" && len(ring) == 1:
		cur = ring[0]
	case cur == nil && current == "":
		return nil, fmt.Errorf("the codes keyring holds %d keys (ids %s): name the one that encrypts by its id",
			len(ring), strings.Join(ids(ring), ", "))
	case cur == nil:
		return nil, fmt.Errorf("the current codes key %s is not in the keyring (ids %s)",
			current, strings.Join(ids(ring), ", "))
	}
	// The current key goes first: it is tried first on a database that records no key yet.
	ordered := []*masterKey{cur}
	for _, k := range ring {
		if k != cur {
			ordered = append(ordered, k)
		}
	}
	return newRing(cur, ordered), nil
}

// ParseKeyring parses a keyring written as keys (ParseKey) separated by commas, spaces or new
// lines; current is the id of the key that seals, which may be empty when the ring holds one key.
func ParseKeyring(text, current string) (*Cipher, error) {
	fields := strings.FieldsFunc(text, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t'
	})
	masters := make([][]byte, 0, len(fields))
	for i, f := range fields {
		m, err := ParseKey(f)
		if err != nil {
			if len(fields) > 1 {
				return nil, fmt.Errorf("key %d of the codes keyring: %w", i+1, err)
			}
			return nil, err
		}
		masters = append(masters, m)
	}
	if len(masters) == 0 {
		return nil, errKeyFormat()
	}
	return NewKeyring(masters, strings.TrimSpace(current))
}

func newRing(current *masterKey, ring []*masterKey) *Cipher {
	current.ref = FirstKey
	return &Cipher{
		current: current, ring: ring, byRef: map[store.KeyRef]*masterKey{FirstKey: current},
		digestKey: current.derivedDigest,
	}
}

func newMasterKey(master []byte) (*masterKey, error) {
	if len(master) != KeySize {
		return nil, fmt.Errorf("codes key must be %d bytes, got %d", KeySize, len(master))
	}
	aead, err := newAEAD(subkey(master, "encrypt"))
	if err != nil {
		return nil, err
	}
	secrets, err := newAEAD(subkey(master, "secret"))
	if err != nil {
		return nil, err
	}
	return &masterKey{
		id:  hex.EncodeToString(subkey(master, "key-id")[:keyIDSize]),
		ref: FirstKey, aead: aead, secrets: secrets, derivedDigest: subkey(master, "digest"),
	}, nil
}

func ids(ring []*masterKey) []string {
	out := make([]string, len(ring))
	for i, k := range ring {
		out[i] = k.id
	}
	return out
}

// KeyID identifies the current master key without revealing it: the first 8 bytes of
// HMAC-SHA256(key, "codeport/key-id"), in hex. It is a subkey like the others, so it tells
// nothing about the encryption keys, and checking a guessed key against it is no easier than
// against any ciphertext the database holds.
func (c *Cipher) KeyID() string { return c.current.id }

// KeyIDs are the ids of the ring's keys, the current one first.
func (c *Cipher) KeyIDs() []string { return ids(c.ring) }

// Key is what a row sealed by c names its key by: store it with the ciphertext.
func (c *Cipher) Key() store.KeyRef { return c.current.ref }

// key returns the ring's key that key names, or an *OtherKeyError when the ring lacks it.
func (c *Cipher) key(key store.KeyRef) (*masterKey, error) {
	k := c.byRef[key]
	if k == nil {
		return nil, &OtherKeyError{Key: key, ID: c.recorded[key], Current: c.current.id}
	}
	return k, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("codes cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("codes cipher: %w", err)
	}
	return aead, nil
}

// Digest identifies a code for uniqueness checks (HMAC-SHA256 under the digest subkey).
func (c *Cipher) Digest(code string) []byte {
	m := hmac.New(sha256.New, c.digestKey)
	m.Write([]byte(code))
	return m.Sum(nil)
}

// Seal encrypts code as nonce || ciphertext under the key c.Key() names; the digest is bound as
// additional data so a ciphertext cannot be moved to another row unnoticed.
func (c *Cipher) Seal(code string) (ciphertext, digest []byte, err error) {
	digest = c.Digest(code)
	ciphertext, err = c.current.seal([]byte(code), digest)
	return ciphertext, digest, err
}

// seal encrypts a code as nonce || ciphertext, bound to digest.
func (k *masterKey) seal(code, digest []byte) ([]byte, error) {
	nonce := make([]byte, k.aead.NonceSize(), k.aead.NonceSize()+len(code)+k.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal code: %w", err)
	}
	return k.aead.Seal(nonce, nonce, code, digest), nil
}

// ErrTampered is returned when a ciphertext fails authentication (wrong key or altered data).
var ErrTampered = errors.New("ciphertext failed authentication")

// OtherKeyError is returned for a ciphertext sealed under a codes key the cipher's ring lacks.
type OtherKeyError struct {
	// Key is the ciphertext's key; ID its id, "" when the database records no such key.
	Key store.KeyRef
	ID  string
	// Current is the id of the cipher's current key.
	Current string
}

// Error implements error.
func (e *OtherKeyError) Error() string {
	if e.ID == "" {
		return fmt.Sprintf("sealed under codes key number %d, which this database does not record; "+
			"the current key is %s", e.Key, e.Current)
	}
	return fmt.Sprintf("sealed under codes key %s, which the keyring lacks (the current key is %s)", e.ID, e.Current)
}

// Open decrypts a ciphertext made by Seal with the same digest, sealed under key.
func (c *Cipher) Open(key store.KeyRef, ciphertext, digest []byte) (string, error) {
	k, err := c.key(key)
	if err != nil {
		return "", err
	}
	plain, err := k.open(ciphertext, digest)
	return string(plain), err
}

func (k *masterKey) open(ciphertext, digest []byte) ([]byte, error) {
	n := k.aead.NonceSize()
	if len(ciphertext) < n {
		return nil, ErrTampered
	}
	plain, err := k.aead.Open(nil, ciphertext[:n], ciphertext[n:], digest)
	if err != nil {
		return nil, ErrTampered
	}
	return plain, nil
}

// SealSecret encrypts a credential as nonce || ciphertext under the key c.Key() names. owner
// names the row the secret belongs to and is bound as additional data, so a sealed secret copied
// to another row does not open there.
func (c *Cipher) SealSecret(secret []byte, owner string) ([]byte, error) {
	return c.current.sealSecret(secret, owner)
}

func (k *masterKey) sealSecret(secret []byte, owner string) ([]byte, error) {
	nonce := make([]byte, k.secrets.NonceSize(), k.secrets.NonceSize()+len(secret)+k.secrets.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal secret: %w", err)
	}
	return k.secrets.Seal(nonce, nonce, secret, []byte(owner)), nil
}

// OpenSecret decrypts what SealSecret made for the same owner under key. *OtherKeyError means
// c's ring lacks key; ErrTampered that the secret was sealed under another master key than its
// key names, for another owner, or altered.
func (c *Cipher) OpenSecret(key store.KeyRef, sealed []byte, owner string) ([]byte, error) {
	k, err := c.key(key)
	if err != nil {
		return nil, err
	}
	return k.openSecret(sealed, owner)
}

func (k *masterKey) openSecret(sealed []byte, owner string) ([]byte, error) {
	n := k.secrets.NonceSize()
	if len(sealed) < n {
		return nil, ErrTampered
	}
	plain, err := k.secrets.Open(nil, sealed[:n], sealed[n:], []byte(owner))
	if err != nil {
		return nil, ErrTampered
	}
	return plain, nil
}
