package provisioning_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/codes/codestest"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// TestWebhookSecretMovesToTheCurrentKey: once a newer codes key is current, applying a partner
// seals its webhook secret again under it, naming it, rather than keeping the ciphertext of the
// older key under the newer key's ref, which would not open.
func TestWebhookSecretMovesToTheCurrentKey(t *testing.T) {
	db := storetest.Open(t, store.Options{MaxConns: 2})
	keys, ids := codestest.Keys(t, 2)
	attach := func(current string) *codes.Cipher {
		t.Helper()
		c, err := codes.ParseKeyring(keys[0]+","+keys[1], current)
		if err == nil {
			c, err = c.Attach(t.Context(), db.Pool)
		}
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	p := testfixture.Partner("acme", testfixture.InNamespace("ns"), testfixture.WithContact("Acme", "ops@acme.example"))
	hooks := provisioning.Webhooks{"production": {URL: "https://hooks.example/acme", Secret: []byte("whsec_1")}}
	for _, current := range ids {
		c := attach(current)
		prov := testfixture.Provisioner(t, db, c)
		if _, err := prov.ApplyPartner(t.Context(), p, nil, hooks); err != nil {
			t.Fatal(err)
		}
		var ref store.KeyRef
		var sealed []byte
		var partnerID uuid.UUID
		if err := db.Pool.QueryRow(t.Context(), `SELECT partner_id, secret_key_ref, sealed_secret
			FROM webhook_endpoints WHERE environment = 'production'`).Scan(&partnerID, &ref, &sealed); err != nil {
			t.Fatal(err)
		}
		if ref != c.Key() {
			t.Fatalf("current key %s: secret sealed under ref %d, want %d", current, ref, c.Key())
		}
		secret, err := c.OpenSecret(ref, sealed, store.WebhookSecretOwner(partnerID, "production"))
		if err != nil || string(secret) != "whsec_1" {
			t.Fatalf("current key %s: secret %q: %v", current, secret, err)
		}
	}
}
