package auth

import (
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
)

func TestGenerateKeyFormat(t *testing.T) {
	seen := map[string]bool{}
	for _, env := range []string{"sandbox", "production"} {
		for range 200 {
			k, err := GenerateKey(env)
			if err != nil {
				t.Fatal(err)
			}
			if seen[k] {
				t.Fatalf("duplicate key generated")
			}
			seen[k] = true
			got, ok := ParseKey(k)
			if !ok || got != env {
				t.Fatalf("ParseKey(%q) = %q, %v; want %q", k, got, ok, env)
			}
		}
	}
	if _, err := GenerateKey("staging"); err == nil {
		t.Error("GenerateKey(staging) succeeded")
	}
}

func TestParseKeyRejects(t *testing.T) {
	valid, err := GenerateKey("production")
	if err != nil {
		t.Fatal(err)
	}
	typo := []byte(valid)
	if typo[12] == 'a' {
		typo[12] = 'b'
	} else {
		typo[12] = 'a'
	}
	cases := map[string]string{
		"empty":           "",
		"wrong prefix":    "cp_prod_" + valid[8:],
		"no prefix":       valid[8:],
		"too short":       valid[:len(valid)-1],
		"too long":        valid + "A",
		"bad alphabet":    valid[:20] + "-" + valid[21:],
		"one-char typo":   string(typo),
		"bad checksum":    valid[:len(valid)-6] + "000000",
		"uppercase brand": strings.ToUpper(valid[:8]) + valid[8:],
	}
	// Characters next to base62's ranges, in a key whose checksum matches: only the alphabet
	// check can refuse it.
	for _, c := range []byte("/:@[`{\x00\x80") {
		body := valid[:20] + string([]byte{c}) + valid[21:len(valid)-checksumLength]
		cases[fmt.Sprintf("%q with its checksum", c)] = body + checksum(body)
	}
	for name, key := range cases {
		if env, ok := ParseKey(key); ok {
			t.Errorf("%s: ParseKey(%q) accepted as %s", name, key, env)
		}
	}
}

func TestDisplayPrefix(t *testing.T) {
	k, _ := GenerateKey("sandbox")
	if p := DisplayPrefix(k); len(p) != 12 || !strings.HasPrefix(k, p) || !strings.HasPrefix(p, "cp_test_") {
		t.Errorf("DisplayPrefix = %q", p)
	}
}

func FuzzParseKey(f *testing.F) {
	k, _ := GenerateKey("sandbox")
	f.Add(k)
	f.Add("cp_live_")
	f.Add("")
	f.Add(strings.Repeat("z", keyLength))
	f.Fuzz(func(t *testing.T, s string) {
		env, ok := ParseKey(s)
		if ok && env != "sandbox" && env != "production" {
			t.Fatalf("accepted %q with environment %q", s, env)
		}
	})
}

// TestKeyCheckDoesNotAllocate: every authenticated request parses and digests its key, so
// neither may allocate.
func TestKeyCheckDoesNotAllocate(t *testing.T) {
	key, err := GenerateKey("production")
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, ok := ParseKey(key); !ok {
			t.Fatal("generated key rejected")
		}
		_ = Digest(key)
	})
	if allocs != 0 {
		t.Fatalf("ParseKey and Digest allocate %.0f times per key", allocs)
	}
}

func TestChecksumIsCRC32(t *testing.T) {
	for _, body := range []string{"", "cp_live_", "cp_test_0123456789abcdefghijABCDEFGHIJ"} {
		want := uint64(crc32.ChecksumIEEE([]byte(body)))
		var digits [checksumLength]byte
		for i := checksumLength - 1; i >= 0; i-- {
			digits[i] = base62[want%62]
			want /= 62
		}
		if got := checksumOf(body); got != digits {
			t.Fatalf("checksum of %q = %s, want %s", body, got[:], digits[:])
		}
	}
}
