package codes_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/codeport/codeport/internal/codes"
)

func newCipher(t *testing.T) *codes.Cipher {
	t.Helper()
	key, err := codes.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return cipherOf(t, key)
}

// cipherOf is the cipher of a base64 or hex key.
func cipherOf(t *testing.T, key string) *codes.Cipher {
	t.Helper()
	raw, err := codes.ParseKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := codes.NewCipher(raw)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSealOpen(t *testing.T) {
	c := newCipher(t)
	ct, digest, err := c.Seal("ABCD-1234")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(ct, []byte("ABCD-1234")) {
		t.Fatal("ciphertext contains the code")
	}
	if got, err := c.Open(c.Key(), ct, digest); err != nil || got != "ABCD-1234" {
		t.Fatalf("open: %q %v", got, err)
	}
	// Same code, same digest (duplicates are detectable), different ciphertext (random nonce).
	ct2, digest2, _ := c.Seal("ABCD-1234")
	if !bytes.Equal(digest, digest2) || bytes.Equal(ct, ct2) {
		t.Fatal("digest must be stable and ciphertext randomised")
	}
	tampered := append([]byte{}, ct...)
	tampered[len(tampered)-1] ^= 1
	if _, err := c.Open(c.Key(), tampered, digest); err == nil {
		t.Fatal("tampered ciphertext opened")
	}
	_, otherDigest, _ := c.Seal("OTHER")
	if _, err := c.Open(c.Key(), ct, otherDigest); err == nil {
		t.Fatal("ciphertext moved to another code's digest opened")
	}
	if _, err := newCipher(t).Open(c.Key(), ct, digest); err == nil {
		t.Fatal("opened with another key")
	}
}

func TestSealOpenSecret(t *testing.T) {
	c := newCipher(t)
	secret := []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	sealed, err := c.SealSecret(secret, "partner-1/production")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, secret) || bytes.Contains(sealed, []byte("MfKQ9r8G")) {
		t.Fatal("sealed secret holds the plaintext")
	}
	again, _ := c.SealSecret(secret, "partner-1/production")
	if bytes.Equal(sealed, again) {
		t.Fatal("sealing is deterministic: equal secrets would show in a dump")
	}
	if got, err := c.OpenSecret(c.Key(), sealed, "partner-1/production"); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("open: %q %v", got, err)
	}
	tampered := bytes.Clone(sealed)
	tampered[len(tampered)-1] ^= 1
	cases := map[string]struct {
		c      *codes.Cipher
		sealed []byte
		owner  string
	}{
		"another owner":      {c, sealed, "partner-1/sandbox"},
		"another master key": {newCipher(t), sealed, "partner-1/production"},
		"altered":            {c, tampered, "partner-1/production"},
		"truncated":          {c, sealed[:5], "partner-1/production"},
	}
	for name, tc := range cases {
		if _, err := tc.c.OpenSecret(tc.c.Key(), tc.sealed, tc.owner); !errors.Is(err, codes.ErrTampered) {
			t.Errorf("%s: %v, want ErrTampered", name, err)
		}
	}
	// A sealed secret is not a code, and a code is not a sealed secret: each use has its own key.
	if _, err := c.Open(c.Key(), sealed, c.Digest(string(secret))); !errors.Is(err, codes.ErrTampered) {
		t.Errorf("a sealed secret opened as a code: %v", err)
	}
}

func TestParseKey(t *testing.T) {
	for _, bad := range []string{"", "short", strings.Repeat("a", 64) + "zz", "dG9vIHNob3J0"} {
		if _, err := codes.ParseKey(bad); err == nil {
			t.Errorf("key %q accepted", bad)
		}
	}
	if _, err := codes.ParseKey(strings.Repeat("ab", 32)); err != nil {
		t.Errorf("hex key refused: %v", err)
	}
}

func TestReadCodes(t *testing.T) {
	cases := map[string][]string{
		"A1\n\nA2\r\n  A3  \n":            {"A1", "A2", "A3"},
		"code\nA1\nA2\n":                  {"A1", "A2"},
		"code,pin\nA1,111\nA2,222\n":      {"A1", "A2"},
		"A1,serial-1\n\"A,2\",serial-2\n": {"A1", "A,2"},
	}
	for in, want := range cases {
		var got []string
		if err := codes.ReadCodes(strings.NewReader(in), func(c string) error {
			got = append(got, c)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}
