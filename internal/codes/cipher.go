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
// (webhook signing secrets), with one master key. Each use has its own subkey derived from it,
// so the digest reveals nothing about the encryption keys, and a sealed secret is no code.
//
// Every ciphertext names the key it is sealed under (a store.KeyRef), and opening one sealed
// under another key says so. A process binds its cipher to its database with Attach, which
// refuses a key that is not the database's.
type Cipher struct {
	// id is the key's fingerprint (KeyID).
	id string
	// ref is what the database's rows name this key by.
	ref store.KeyRef
	// recorded are the ids of the database's keys by ref, to name the key of a ciphertext
	// sealed under another one; nil until Attach.
	recorded  map[store.KeyRef]string
	aead      cipher.AEAD
	secrets   cipher.AEAD
	digestKey []byte
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
	return nil, fmt.Errorf(
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
	return &Cipher{
		id:  hex.EncodeToString(subkey(master, "key-id")[:keyIDSize]),
		ref: FirstKey, aead: aead, secrets: secrets, digestKey: subkey(master, "digest"),
	}, nil
}

// KeyID identifies the master key without revealing it: the first 8 bytes of
// HMAC-SHA256(key, "codeport/key-id"), in hex. It is a subkey like the others, so it tells
// nothing about the encryption keys, and checking a guessed key against it is no easier than
// against any ciphertext the database holds.
func (c *Cipher) KeyID() string { return c.id }

// Key is what a row sealed by c names its key by: store it with the ciphertext.
func (c *Cipher) Key() store.KeyRef { return c.ref }

// current returns an *OtherKeyError unless key is c's.
func (c *Cipher) current(key store.KeyRef) error {
	if key != c.ref {
		return &OtherKeyError{Key: key, ID: c.recorded[key], Current: c.id}
	}
	return nil
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
	nonce := make([]byte, c.aead.NonceSize(), c.aead.NonceSize()+len(code)+c.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, nil, fmt.Errorf("seal code: %w", err)
	}
	return c.aead.Seal(nonce, nonce, []byte(code), digest), digest, nil
}

// ErrTampered is returned when a ciphertext fails authentication (wrong key or altered data).
var ErrTampered = errors.New("ciphertext failed authentication")

// OtherKeyError is returned for a ciphertext sealed under a codes key other than the cipher's.
type OtherKeyError struct {
	// Key is the ciphertext's key; ID its id, "" when the database records no such key.
	Key store.KeyRef
	ID  string
	// Current is the id of the cipher's key.
	Current string
}

func (e *OtherKeyError) Error() string {
	if e.ID == "" {
		return fmt.Sprintf("sealed under codes key number %d, which this database does not record; "+
			"the current key is %s", e.Key, e.Current)
	}
	return fmt.Sprintf("sealed under codes key %s, not the current key %s", e.ID, e.Current)
}

// Open decrypts a ciphertext made by Seal with the same digest, sealed under key.
func (c *Cipher) Open(key store.KeyRef, ciphertext, digest []byte) (string, error) {
	if err := c.current(key); err != nil {
		return "", err
	}
	n := c.aead.NonceSize()
	if len(ciphertext) < n {
		return "", ErrTampered
	}
	plain, err := c.aead.Open(nil, ciphertext[:n], ciphertext[n:], digest)
	if err != nil {
		return "", ErrTampered
	}
	return string(plain), nil
}

// SealSecret encrypts a credential as nonce || ciphertext under the key c.Key() names. owner
// names the row the secret belongs to and is bound as additional data, so a sealed secret copied
// to another row does not open there.
func (c *Cipher) SealSecret(secret []byte, owner string) ([]byte, error) {
	nonce := make([]byte, c.secrets.NonceSize(), c.secrets.NonceSize()+len(secret)+c.secrets.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal secret: %w", err)
	}
	return c.secrets.Seal(nonce, nonce, secret, []byte(owner)), nil
}

// OpenSecret decrypts what SealSecret made for the same owner under key. *OtherKeyError means
// key is not c's; ErrTampered that the secret was sealed under another master key than its key
// names, for another owner, or altered.
func (c *Cipher) OpenSecret(key store.KeyRef, sealed []byte, owner string) ([]byte, error) {
	if err := c.current(key); err != nil {
		return nil, err
	}
	return c.openSecret(sealed, owner)
}

func (c *Cipher) openSecret(sealed []byte, owner string) ([]byte, error) {
	n := c.secrets.NonceSize()
	if len(sealed) < n {
		return nil, ErrTampered
	}
	plain, err := c.secrets.Open(nil, sealed[:n], sealed[n:], []byte(owner))
	if err != nil {
		return nil, ErrTampered
	}
	return plain, nil
}
