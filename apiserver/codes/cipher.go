// Package codes protects redemption codes: AES-256-GCM encryption at rest, keyed digests that
// detect duplicates without revealing codes, and the import of production stock.
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
)

// KeySize is the length of the master key: 32 bytes (AES-256).
const KeySize = 32

// Cipher seals and opens codes, and the credentials the service must use in plaintext later
// (webhook signing secrets), with one master key. Each use has its own subkey derived from it,
// so the digest reveals nothing about the encryption keys, and a sealed secret is no code.
type Cipher struct {
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

// NewCipher builds a cipher from a 32-byte master key.
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
	return &Cipher{aead: aead, secrets: secrets, digestKey: subkey(master, "digest")}, nil
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

// Seal encrypts code as nonce || ciphertext; the digest is bound as additional data so a
// ciphertext cannot be moved to another row unnoticed.
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

// Open decrypts a ciphertext made by Seal with the same digest.
func (c *Cipher) Open(ciphertext, digest []byte) (string, error) {
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

// SealSecret encrypts a credential as nonce || ciphertext. owner names the row the secret
// belongs to and is bound as additional data, so a sealed secret copied to another row does not
// open there.
func (c *Cipher) SealSecret(secret []byte, owner string) ([]byte, error) {
	nonce := make([]byte, c.secrets.NonceSize(), c.secrets.NonceSize()+len(secret)+c.secrets.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal secret: %w", err)
	}
	return c.secrets.Seal(nonce, nonce, secret, []byte(owner)), nil
}

// OpenSecret decrypts what SealSecret made for the same owner. ErrTampered means the secret was
// sealed under another master key, for another owner, or altered.
func (c *Cipher) OpenSecret(sealed []byte, owner string) ([]byte, error) {
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
