package auth

import (
	"crypto/rand"
	"crypto/sha256"

	"fmt"
	"hash/crc32"
	"math/big"
	"strings"

	"github.com/codeport/codeport/internal/tenancy"
)

// Key format: <prefix><32 random base62 chars><6-char base62 checksum>. The checksum lets a
// server reject typos and garbage without touching the database, and lets secret scanners
// recognise leaked keys.
const (
	prefixSandbox    = "cp_test_"
	prefixProduction = "cp_live_"
	randomLength     = 32
	checksumLength   = 6
	keyLength        = len(prefixSandbox) + randomLength + checksumLength
	base62           = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

func prefixFor(environment string) (string, error) {
	switch tenancy.Environment(environment) {
	case tenancy.Sandbox:
		return prefixSandbox, nil
	case tenancy.Production:
		return prefixProduction, nil
	default:
		return "", fmt.Errorf("unknown environment %q", environment)
	}
}

// GenerateKey returns a new random key for environment.
func GenerateKey(environment string) (string, error) {
	prefix, err := prefixFor(environment)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.Grow(keyLength)
	b.WriteString(prefix)
	limit := big.NewInt(int64(len(base62)))
	for range randomLength {
		n, err := rand.Int(rand.Reader, limit) // unbiased
		if err != nil {
			return "", fmt.Errorf("generate key: %w", err)
		}
		b.WriteByte(base62[n.Int64()])
	}
	b.WriteString(checksum(b.String()))
	return b.String(), nil
}

// checksum is CRC-32 of the prefix and random part, in fixed-width base62.
func checksum(body string) string {
	sum := checksumOf(body)
	return string(sum[:])
}

// checksumOf computes checksum without allocating: every authenticated request checks one.
// The CRC is taken bytewise over the string, as crc32.ChecksumIEEE would but without its copy
// of the key to the heap.
func checksumOf(body string) [checksumLength]byte {
	crc := ^uint32(0)
	for i := range len(body) {
		crc = crc32.IEEETable[(crc^uint32(body[i]))&0xff] ^ crc>>8
	}
	sum := uint64(^crc)
	var out [checksumLength]byte
	for i := checksumLength - 1; i >= 0; i-- {
		out[i] = base62[sum%62]
		sum /= 62
	}
	return out
}

// ParseKey checks a presented key's shape and checksum and returns its environment.
func ParseKey(s string) (environment string, ok bool) {
	if len(s) != keyLength {
		return "", false
	}
	switch {
	case strings.HasPrefix(s, prefixSandbox):
		environment = string(tenancy.Sandbox)
	case strings.HasPrefix(s, prefixProduction):
		environment = string(tenancy.Production)
	default:
		return "", false
	}
	for i := len(prefixSandbox); i < len(s); i++ {
		if !isBase62(s[i]) {
			return "", false
		}
	}
	if sum := checksumOf(s[:len(s)-checksumLength]); string(sum[:]) != s[len(s)-checksumLength:] {
		return "", false
	}
	return environment, true
}

func isBase62(c byte) bool {
	return '0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z'
}

// Digest is what the database stores of a key: SHA-256 of the plaintext.
func Digest(plaintext string) [32]byte {
	// A key fits the stack buffer, so hashing one allocates nothing.
	var buf [keyLength]byte
	return sha256.Sum256(append(buf[:0], plaintext...))
}

// MaskKeys overwrites in place, with '*', every character of b that would tell a key: of each
// key prefix followed by base62 characters, all but the prefix and the first 4 characters that
// DisplayPrefix shows. For text such as a request's path, which a client may have put a key into
// by mistake, before it is logged.
func MaskKeys(b []byte) {
	shown := len(prefixSandbox) + 4
	for i := 0; i+len(prefixSandbox) <= len(b); i++ {
		if s := string(b[i : i+len(prefixSandbox)]); s != prefixSandbox && s != prefixProduction {
			continue
		}
		j := i + len(prefixSandbox)
		for ; j < len(b) && isBase62(b[j]); j++ {
			if j >= i+shown {
				b[j] = '*'
			}
		}
		i = j - 1
	}
}

// DisplayPrefix is the part of a key safe to show in status and logs (prefix + 4 characters).
func DisplayPrefix(plaintext string) string {
	n := len(prefixSandbox) + 4
	if len(plaintext) < n {
		return ""
	}
	return plaintext[:n]
}
