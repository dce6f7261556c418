package codes_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/codes/codestest"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
)

// attachRing attaches the ring of keys whose current key is current.
func attachRing(t *testing.T, db *store.DB, keys []string, current string) (*codes.Cipher, error) {
	t.Helper()
	c, err := codes.ParseKeyring(strings.Join(keys, ","), current)
	if err != nil {
		t.Fatal(err)
	}
	return c.Attach(t.Context(), db.Pool)
}

func mustAttachRing(t *testing.T, db *store.DB, keys []string, current string) *codes.Cipher {
	t.Helper()
	c, err := attachRing(t, db, keys, current)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// openAll opens every code of the stock and of the deliveries, and every webhook secret, with
// c, and returns them sorted.
func openAll(t *testing.T, db *store.DB, c *codes.Cipher) []string {
	t.Helper()
	opened := openStock(t, db, c)
	for _, code := range openCodes(t, db, c, `SELECT key_ref, ciphertext, digest FROM delivered_codes`) {
		opened = append(opened, "delivered:"+code)
	}
	rows, err := db.Pool.Query(t.Context(), `SELECT partner_id, environment, secret_key_ref, sealed_secret
		FROM webhook_endpoints`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var partnerID uuid.UUID
		var env string
		var ref store.KeyRef
		var sealed []byte
		if err := rows.Scan(&partnerID, &env, &ref, &sealed); err != nil {
			t.Fatal(err)
		}
		secret, err := c.OpenSecret(ref, sealed, store.WebhookSecretOwner(partnerID, env))
		if err != nil {
			t.Fatalf("webhook secret: %v", err)
		}
		opened = append(opened, "secret:"+string(secret))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(opened)
	return opened
}

// TestRotateKeyring: a key joins the ring, becomes current, and the older one leaves it once
// codes rekey moved every ciphertext off it. Until then a ring without it is refused, naming
// the key and what it still seals; a rekey killed half way goes on when run again, and every
// code and secret opens before, during and after.
func TestRotateKeyring(t *testing.T) {
	db := storetest.Open(t, store.Options{MaxConns: 4})
	keys, ids := codestest.Keys(t, 2)
	first := mustAttachRing(t, db, keys[:1], "")
	codestest.Stock(t, db.Pool, first, product, "K1", 40)
	deliveredBefore(t, db, first)
	secretBefore(t, db, first)
	before := openAll(t, db, first)

	// The new key joins the ring, decrypting only; then it seals.
	mustAttachRing(t, db, keys, ids[0])
	second := mustAttachRing(t, db, keys, ids[1])
	if got := recordedKeys(t, db); !slices.Equal(got, []string{"1:" + ids[0], "2:" + ids[1]}) {
		t.Fatalf("recorded keys %v", got)
	}
	codestest.Stock(t, db.Pool, second, product, "K2", 5)
	before = append(before, openStock(t, db, second)[40:]...)
	slices.Sort(before)
	if got := openAll(t, db, second); !slices.Equal(got, before) {
		t.Fatalf("opened with the ring %v, want %v", got, before)
	}
	// The first key alone no longer opens everything: it is refused too.
	if _, err := attachRing(t, db, keys[:1], ""); err == nil {
		t.Fatal("a ring lacking the key of 5 codes attached")
	}

	_, err := attachRing(t, db, keys[1:], "")
	want := fmt.Sprintf("codes key %s still encrypts 42 codes and secrets but is not in the keyring; "+
		"add it back, and run `codeport codes rekey` before removing it", ids[0])
	var missing *codes.MissingKeyError
	if !errors.As(err, &missing) || err.Error() != want {
		t.Fatalf("ring without the older key: %v\nwant: %s", err, want)
	}

	// Killed after its first batches, rekey has moved those and left the rest.
	ctx, kill := context.WithCancel(t.Context())
	moved, err := second.Rekey(ctx, db.Pool, 7, func(p codes.RekeyProgress) {
		if p.Done >= 14 {
			kill()
		}
	})
	if err == nil || moved != 14 {
		t.Fatalf("killed rekey moved %d: %v", moved, err)
	}
	checkRemaining(t, db, second, map[string]int64{ids[0]: 42 - 14, ids[1]: 5 + 14})
	if got := openAll(t, db, second); !slices.Equal(got, before) {
		t.Fatalf("opened half way %v, want %v", got, before)
	}
	var batches []int
	moved, err = second.Rekey(t.Context(), db.Pool, 7, func(p codes.RekeyProgress) {
		if p.Key != ids[0] {
			t.Errorf("rekeyed a batch of key %s, want %s", p.Key, ids[0])
		}
		batches = append(batches, p.Rows)
	})
	if err != nil || moved != 42-14 {
		t.Fatalf("rekey run again moved %d: %v (batches %v)", moved, err, batches)
	}
	checkRemaining(t, db, second, map[string]int64{ids[0]: 0, ids[1]: 47})

	last := mustAttachRing(t, db, keys[1:], "")
	if got := openAll(t, db, last); !slices.Equal(got, before) {
		t.Fatalf("opened with the new key alone %v, want %v", got, before)
	}
	// A code imported again under the new key is still known by its digest.
	res, err := codes.Import(t.Context(), db.Pool, last, product, "again", strings.NewReader("K1-1\n"), nil)
	if err != nil || res.Duplicates != 1 {
		t.Fatalf("import of a code in stock after rotation: %+v %v", res, err)
	}
}

func checkRemaining(t *testing.T, db *store.DB, c *codes.Cipher, want map[string]int64) {
	t.Helper()
	left, err := c.Remaining(t.Context(), db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, k := range left {
		got[k.Key] = k.Count
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("remaining %v, want %v", got, want)
	}
}

// TestKeyringNamesTheCurrentKey: a ring of several keys needs the id of the one that seals.
func TestKeyringNamesTheCurrentKey(t *testing.T) {
	keys, ids := codestest.Keys(t, 2)
	_, err := codes.ParseKeyring(keys[0]+"\n"+keys[1], "")
	want := fmt.Sprintf("the codes keyring holds 2 keys (ids %s, %s): name the one that encrypts by its id",
		ids[0], ids[1])
	if err == nil || err.Error() != want {
		t.Errorf("ring without its current id: %v\nwant: %s", err, want)
	}
	if _, err := codes.ParseKeyring(keys[0], ids[1]); err == nil {
		t.Error("a current id outside the ring was taken")
	}
	c, err := codes.ParseKeyring(keys[0]+", "+keys[1], ids[1])
	if err != nil || c.KeyID() != ids[1] || !slices.Equal(c.KeyIDs(), []string{ids[1], ids[0]}) {
		t.Errorf("ring: %v %v", c, err)
	}
}
