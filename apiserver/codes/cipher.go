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

// Cipher seals and opens codes with one master key. Encryption and digest use separate
// subkeys derived from it, so the digest reveals nothing about the encryption key.
type Cipher struct {
	aead      cipher.AEAD
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
	return nil, fmt.Errorf("codes key must be %d bytes, base64 or hex encoded (generate one with `openssl rand -base64 32`)", KeySize)
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
	block, err := aes.NewCipher(subkey(master, "encrypt"))
	if err != nil {
		return nil, fmt.Errorf("codes cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("codes cipher: %w", err)
	}
	return &Cipher{aead: aead, digestKey: subkey(master, "digest")}, nil
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
var ErrTampered = errors.New("code ciphertext failed authentication")

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
