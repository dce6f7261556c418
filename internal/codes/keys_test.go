package codes_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
)

const product = "10000000000001"

// sealedBefore writes ciphertexts sealed by c as a binary from before codes keys were recorded
// wrote them: under c's key-derived digest key, naming key 1 (the column's default).
type sealedBefore func(t *testing.T, db *store.DB, c *codes.Cipher)

func stockBefore(t *testing.T, db *store.DB, c *codes.Cipher) {
	t.Helper()
	_, err := codes.Import(t.Context(), db.Pool, c, product, "before", strings.NewReader("OLD-1\nOLD-2\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
}

func newPartner(t *testing.T, db *store.DB) (partnerID, accountID uuid.UUID) {
	t.Helper()
	err := db.Pool.QueryRow(t.Context(), `WITH p AS (INSERT INTO partners (namespace, name)
			VALUES ('partners', 'p-' || gen_random_uuid()) RETURNING id)
		INSERT INTO accounts (partner_id, environment) SELECT id, 'production' FROM p RETURNING partner_id, id`).
		Scan(&partnerID, &accountID)
	if err != nil {
		t.Fatal(err)
	}
	return partnerID, accountID
}

func secretBefore(t *testing.T, db *store.DB, c *codes.Cipher) {
	t.Helper()
	partnerID, _ := newPartner(t, db)
	insertWebhookSecret(t, db, c, partnerID, "whsec_before")
}

// insertWebhookSecret gives the partner a production webhook endpoint whose secret c seals,
// naming key 1 (the column's default), as binaries wrote them before codes keys were recorded.
func insertWebhookSecret(t *testing.T, db *store.DB, c *codes.Cipher, partnerID uuid.UUID, secret string) {
	t.Helper()
	sealed, err := c.SealSecret([]byte(secret), store.WebhookSecretOwner(partnerID, "production"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(t.Context(), `INSERT INTO webhook_endpoints (partner_id, environment, url, sealed_secret)
		VALUES ($1, 'production', 'https://hooks.example/codeport', $2)`, partnerID, sealed); err != nil {
		t.Fatal(err)
	}
}

func deliveredBefore(t *testing.T, db *store.DB, c *codes.Cipher) {
	t.Helper()
	_, accountID := newPartner(t, db)
	var orderID uuid.UUID
	err := db.Pool.QueryRow(t.Context(), `WITH o AS (INSERT INTO orders (account_id, external_order_code,
			payload_hash, currency, total_price, total_quantity, estimated_ready_at)
			VALUES ($1, 'before', '\x01', 'EUR', 0, 1, now()) RETURNING id)
		INSERT INTO order_lines (order_id, line_no, product_code, unit_price, quantity, currency)
		SELECT id, 0, $2, 0, 1, 'EUR' FROM o RETURNING order_id`, accountID, product).Scan(&orderID)
	if err != nil {
		t.Fatal(err)
	}
	ct, digest, err := c.Seal("SANDBOX-BEFORE")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.InsertDeliveredCodes(t.Context(), db.Pool, []store.DeliveredCode{{OrderID: orderID,
		KeyRef: c.Key(), Ciphertext: ct, Digest: digest}}); err != nil {
		t.Fatal(err)
	}
}

func attached(t *testing.T, db *store.DB, c *codes.Cipher) {
	t.Helper()
	if _, err := c.Attach(t.Context(), db.Pool); err != nil {
		t.Fatal(err)
	}
}

func recordedKeys(t *testing.T, db *store.DB) []string {
	t.Helper()
	keys, err := store.CodesKeys(t.Context(), db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%d:%s", k.Ref, k.ID))
	}
	return out
}

// TestAttach: which key a database takes. An empty one records the first key attached; one
// that records a key refuses every other; one that holds ciphertexts from before keys were
// recorded records the first key attached only if those open with it, and keeps the digest key
// derived from it, under which the codes in it were digested.
func TestAttach(t *testing.T) {
	key, other := newCipher(t), newCipher(t)
	mismatch := fmt.Sprintf("codes key %s does not match the key this database's codes and secrets are "+
		"encrypted with (key id %s); start with that key", key.KeyID(), other.KeyID())
	unopened := func(what string) string {
		return fmt.Sprintf("codes key %s does not open the codes and secrets already in this database (%s",
			key.KeyID(), what)
	}
	cases := []struct {
		name   string
		before []sealedBefore
		under  *codes.Cipher
		// refused is the start of the refusal; "" when key is attached.
		refused string
		// derived: the database keeps the digest key derived from key.
		derived bool
	}{
		{name: "empty database"},
		{name: "key recorded", before: []sealedBefore{attached}, under: key},
		{name: "another key recorded", before: []sealedBefore{attached}, under: other, refused: mismatch},
		{name: "stock sealed under the key", before: []sealedBefore{stockBefore}, under: key, derived: true},
		{name: "delivered code sealed under the key", before: []sealedBefore{deliveredBefore}, under: key, derived: true},
		{name: "webhook secret sealed under the key", before: []sealedBefore{secretBefore}, under: key},
		{
			name: "all sealed under the key", before: []sealedBefore{stockBefore, deliveredBefore, secretBefore},
			under: key, derived: true,
		},
		{
			name: "stock sealed under another key", before: []sealedBefore{stockBefore}, under: other,
			refused: unopened("stock code "),
		},
		{
			name: "delivered code sealed under another key", before: []sealedBefore{deliveredBefore}, under: other,
			refused: unopened("delivered code "),
		},
		{
			name: "webhook secret sealed under another key", before: []sealedBefore{secretBefore}, under: other,
			refused: unopened("webhook secret of partner "),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := storetest.Open(t, store.Options{MaxConns: 4})
			for _, write := range tc.before {
				write(t, db, tc.under)
			}
			if tc.refused != "" {
				checkRefused(t, db, key, tc.refused)
			} else {
				checkAttached(t, db, key, tc.derived)
			}
		})
	}
}

// checkRefused checks that key is refused, in one line that starts with refused, and that the
// refusal recorded nothing.
func checkRefused(t *testing.T, db *store.DB, key *codes.Cipher, refused string) {
	t.Helper()
	before := recordedKeys(t, db)
	_, err := key.Attach(t.Context(), db.Pool)
	var wrong *codes.WrongKeyError
	if !errors.As(err, &wrong) || !strings.HasPrefix(err.Error(), refused) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("attached: %v\nwant a refusal in one line starting %q", err, refused)
	}
	if after := recordedKeys(t, db); !slicesEqual(after, before) {
		t.Fatalf("a refused key changed the recorded keys: %v, were %v", after, before)
	}
}

// checkAttached checks that key attaches as the database's first and only key, with the digest
// key derived from it or not, and again with the same digest key, as by the next process.
func checkAttached(t *testing.T, db *store.DB, key *codes.Cipher, derived bool) {
	t.Helper()
	got, err := key.Attach(t.Context(), db.Pool)
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	if want := []string{"1:" + key.KeyID()}; !slicesEqual(recordedKeys(t, db), want) {
		t.Fatalf("recorded %v, want %v", recordedKeys(t, db), want)
	}
	if got.Key() != codes.FirstKey || got.KeyID() != key.KeyID() {
		t.Fatalf("attached as key %d (%s)", got.Key(), got.KeyID())
	}
	if isDerived := bytes.Equal(got.Digest("CODE"), key.Digest("CODE")); isDerived != derived {
		t.Fatalf("digest key derived from the codes key: %v, want %v", isDerived, derived)
	}
	again, err := key.Attach(t.Context(), db.Pool)
	if err != nil {
		t.Fatalf("attached again: %v", err)
	}
	if !bytes.Equal(again.Digest("CODE"), got.Digest("CODE")) {
		t.Fatal("attached again with another digest key")
	}
}

func slicesEqual(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

// TestAttachRace: processes with different keys that start at once on an empty database agree
// on one key: those that hold it attach with the same digest key, the others are refused.
func TestAttachRace(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			db := storetest.Open(t, store.Options{MaxConns: 8})
			keys := []*codes.Cipher{newCipher(t), newCipher(t)}
			const processes = 8
			results := make([]*codes.Cipher, processes)
			errs := make([]error, processes)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range processes {
				wg.Go(func() {
					<-start
					results[i], errs[i] = keys[i%2].Attach(context.Background(), db.Pool)
				})
			}
			close(start)
			wg.Wait()
			recorded := recordedKeys(t, db)
			if len(recorded) != 1 {
				t.Fatalf("recorded %v, want one key", recorded)
			}
			var digest []byte
			for i := range processes {
				k := keys[i%2]
				if recorded[0] != "1:"+k.KeyID() {
					var wrong *codes.WrongKeyError
					if !errors.As(errs[i], &wrong) || !strings.Contains(errs[i].Error(), "(key id "+recorded[0][2:]+")") {
						t.Errorf("process %d with key %s: %v, want refused", i, k.KeyID(), errs[i])
					}
					continue
				}
				if errs[i] != nil {
					t.Fatalf("process %d with the recorded key: %v", i, errs[i])
				}
				if digest == nil {
					digest = results[i].Digest("CODE")
				} else if !bytes.Equal(digest, results[i].Digest("CODE")) {
					t.Fatalf("processes with the recorded key digest codes differently")
				}
			}
		})
	}
}

// TestOpenNamesTheKey: a ciphertext sealed under a key other than the current one is refused
// with the key's id, not as a failed authentication.
func TestOpenNamesTheKey(t *testing.T) {
	db := storetest.Open(t, store.Options{MaxConns: 4})
	current, err := newCipher(t).Attach(t.Context(), db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	// A second key, as a rotation will record one.
	other := newCipher(t)
	if err := store.RecordCodesKey(t.Context(), db.Pool, store.CodesKey{Ref: 2, ID: other.KeyID(),
		SealedDigestKey: []byte("sealed under the other key")}); err != nil {
		t.Fatal(err)
	}
	if current, err = current.Attach(t.Context(), db.Pool); err != nil {
		t.Fatal(err)
	}
	ct, digest, err := current.Seal("CODE-1")
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := current.SealSecret([]byte("whsec"), "owner")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		key  store.KeyRef
		want string
	}{
		"current key": {key: current.Key()},
		"another recorded key": {key: 2, want: fmt.Sprintf(
			"sealed under codes key %s, which the keyring lacks (the current key is %s)",
			other.KeyID(), current.KeyID())},
		"a key not recorded": {key: 3, want: fmt.Sprintf("sealed under codes key number 3, which this database "+
			"does not record; the current key is %s", current.KeyID())},
	}
	for name, tc := range cases {
		code, codeErr := current.Open(tc.key, ct, digest)
		secret, secretErr := current.OpenSecret(tc.key, sealed, "owner")
		if tc.want == "" {
			if codeErr != nil || code != "CODE-1" || secretErr != nil || string(secret) != "whsec" {
				t.Errorf("%s: %q %v, %q %v", name, code, codeErr, secret, secretErr)
			}
			continue
		}
		for _, err := range []error{codeErr, secretErr} {
			var otherKey *codes.OtherKeyError
			if !errors.As(err, &otherKey) || err.Error() != tc.want || errors.Is(err, codes.ErrTampered) {
				t.Errorf("%s: %v, want %q", name, err, tc.want)
			}
		}
	}
}

// TestImportSkipsCodesImportedBefore: codes imported again, by a later process with the same key,
// are recognised as duplicates; on a database whose codes were imported before keys were
// recorded too, since it keeps the digest key they were digested under.
func TestImportSkipsCodesImportedBefore(t *testing.T) {
	const file = "DUP-1\nDUP-2\nDUP-3\n"
	cases := map[string]func(*testing.T, *store.DB, *codes.Cipher){
		"imported by an attached process": func(t *testing.T, db *store.DB, c *codes.Cipher) {
			t.Helper()
			first, err := c.Attach(t.Context(), db.Pool)
			if err != nil {
				t.Fatal(err)
			}
			if res, err := codes.Import(t.Context(), db.Pool, first, product, "a", strings.NewReader(file), nil); err != nil ||
				res.Imported != 3 {
				t.Fatalf("first import: %+v %v", res, err)
			}
		},
		"imported before keys were recorded": func(t *testing.T, db *store.DB, c *codes.Cipher) {
			t.Helper()
			if res, err := codes.Import(t.Context(), db.Pool, c, product, "a", strings.NewReader(file), nil); err != nil ||
				res.Imported != 3 {
				t.Fatalf("first import: %+v %v", res, err)
			}
		},
	}
	for name, importFirst := range cases {
		t.Run(name, func(t *testing.T) {
			db := storetest.Open(t, store.Options{MaxConns: 4})
			key, err := codes.NewKey()
			if err != nil {
				t.Fatal(err)
			}
			importFirst(t, db, cipherOf(t, key))
			// A later process, with the same key.
			later, err := cipherOf(t, key).Attach(t.Context(), db.Pool)
			if err != nil {
				t.Fatal(err)
			}
			res, err := codes.Import(t.Context(), db.Pool, later, product, "b", strings.NewReader(file), nil)
			if err != nil || res.Imported != 0 || res.Duplicates != 3 {
				t.Fatalf("import again: %+v %v, want 3 duplicates", res, err)
			}
		})
	}
}

// TestAttachAfterUpgrade: a database migrated from before codes keys were recorded, holding
// stock and a webhook secret, takes the key they were sealed under on the first start after the
// upgrade, and refuses any other; its ciphertexts then open, and its codes are still recognised
// when imported again.
func TestAttachAfterUpgrade(t *testing.T) {
	ctx := t.Context()
	d, err := storetest.Create(ctx, t.Name(), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Drop(context.Background()) })
	db, err := store.Open(ctx, d.URL, store.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	m, err := store.NewMigrator(db.SQL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.DownTo(ctx, 21); err != nil {
		t.Fatal(err)
	}
	keyText, err := codes.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	partnerID := writeBeforeUpgrade(t, db, cipherOf(t, keyText))
	if _, err := m.Up(ctx); err != nil {
		t.Fatalf("migrate over existing ciphertexts: %v", err)
	}

	wrong := newCipher(t)
	_, err = wrong.Attach(ctx, db.Pool)
	if want := fmt.Sprintf("codes key %s does not open the codes and secrets already in this database (stock code ",
		wrong.KeyID()); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("another key after the upgrade: %v\nwant: %s…", err, want)
	}
	if recorded := recordedKeys(t, db); len(recorded) != 0 {
		t.Fatalf("a refused key was recorded: %v", recorded)
	}

	current, err := cipherOf(t, keyText).Attach(ctx, db.Pool)
	if err != nil {
		t.Fatalf("the key of the codes after the upgrade: %v", err)
	}
	if want := []string{"1:" + current.KeyID()}; !slicesEqual(recordedKeys(t, db), want) {
		t.Fatalf("recorded %v, want %v", recordedKeys(t, db), want)
	}
	if opened := openStock(t, db, current); strings.Join(opened, ",") != "UPG-1,UPG-2" {
		t.Fatalf("stock from before the upgrade opened as %v", opened)
	}
	var sealed []byte
	var ref store.KeyRef
	err = db.Pool.QueryRow(ctx, `SELECT sealed_secret, secret_key_ref FROM webhook_endpoints
		WHERE partner_id = $1 AND environment = 'production'`, partnerID).Scan(&sealed, &ref)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := current.OpenSecret(ref, sealed, store.WebhookSecretOwner(partnerID, "production"))
	if err != nil || string(plain) != "whsec_upgrade" {
		t.Fatalf("webhook secret from before the upgrade: %q %v", plain, err)
	}
	res, err := codes.Import(ctx, db.Pool, current, product, "again", strings.NewReader("UPG-1\nUPG-2\nUPG-3\n"), nil)
	if err != nil || res.Imported != 1 || res.Duplicates != 2 {
		t.Fatalf("import after the upgrade: %+v %v, want the two codes from before skipped", res, err)
	}
	if _, err := wrong.Attach(ctx, db.Pool); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("another key once the key is recorded: %v", err)
	}
}

// writeBeforeUpgrade writes what a binary from before codes keys were recorded wrote with its
// one key, previous, in a schema of that time: two codes of stock and a partner's sealed webhook
// secret. It returns the partner.
func writeBeforeUpgrade(t *testing.T, db *store.DB, previous *codes.Cipher) uuid.UUID {
	t.Helper()
	for _, code := range []string{"UPG-1", "UPG-2"} {
		ct, digest, err := previous.Seal(code)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Pool.Exec(t.Context(), `INSERT INTO code_stock (product_code, ciphertext, digest)
			VALUES ($1, $2, $3)`, product, ct, digest); err != nil {
			t.Fatal(err)
		}
	}
	partnerID, _ := newPartner(t, db)
	insertWebhookSecret(t, db, previous, partnerID, "whsec_upgrade")
	return partnerID
}

// openStock opens every code of the stock with c, in import order.
func openStock(t *testing.T, db *store.DB, c *codes.Cipher) []string {
	t.Helper()
	return openCodes(t, db, c, `SELECT key_ref, ciphertext, digest FROM code_stock ORDER BY id`)
}

// openCodes opens with c every code query reads as key_ref, ciphertext and digest.
func openCodes(t *testing.T, db *store.DB, c *codes.Cipher, query string) []string {
	t.Helper()
	rows, err := db.Pool.Query(t.Context(), query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var opened []string
	for rows.Next() {
		var ref store.KeyRef
		var ct, digest []byte
		if err := rows.Scan(&ref, &ct, &digest); err != nil {
			t.Fatal(err)
		}
		code, err := c.Open(ref, ct, digest)
		if err != nil {
			t.Fatalf("code: %v", err)
		}
		opened = append(opened, code)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return opened
}
