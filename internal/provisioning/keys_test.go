package provisioning_test

import (
	"errors"
	"testing"

	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// TestRegisterKeyNeverMovesAKey: a key registered to one source is refused to every other,
// active or revoked, and the refusal changes nothing (the refused source's own key stays
// active); a key registered revoked is no source's to take. KeyState answers whose a key is.
func TestRegisterKeyNeverMovesAKey(t *testing.T) {
	ctx := t.Context()
	db := storetest.Open(t, store.Options{MaxConns: 2})
	prov := testfixture.Provisioner(t, db, nil)
	p := testfixture.Partner("acme", testfixture.InNamespace("ns"), testfixture.WithContact("Acme", "ops@acme.example"))
	if _, err := prov.ApplyPartner(ctx, p, nil, nil); err != nil {
		t.Fatal(err)
	}
	const ed, ef = "ns/ed", "ns/ef"
	register := func(source, plaintext string, revoked bool) error {
		_, err := prov.RegisterKey(ctx, provisioning.Key{Namespace: "ns", Partner: "acme", Environment: "sandbox",
			Kind: "apiKey", Source: source, Plaintext: plaintext, Revoked: revoked})
		return err
	}
	key := func() string {
		k, err := auth.GenerateKey("sandbox")
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	state := func(plaintext string) provisioning.KeyStatus {
		s, err := prov.KeyState(ctx, plaintext)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	edKey, efKey, burnt := key(), key(), key()
	for _, r := range []struct {
		source, plaintext string
	}{{ed, edKey}, {ef, efKey}} {
		if err := register(r.source, r.plaintext, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := register(ef, burnt, true); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name      string
		source    string
		plaintext string
		wantErr   error
	}{
		{"its own key again", ed, edKey, nil},
		{"another source's active key", ef, edKey, provisioning.ErrKeyOfAnotherSource},
		{"a key registered revoked by another source", ed, burnt, provisioning.ErrKeyOfAnotherSource},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := register(c.source, c.plaintext, false); !errors.Is(err, c.wantErr) {
				t.Fatalf("RegisterKey: %v; want %v", err, c.wantErr)
			}
		})
	}
	for _, c := range []struct {
		plaintext string
		want      provisioning.KeyStatus
	}{
		{edKey, provisioning.KeyStatus{Exists: true, Active: true, Source: ed}},
		{efKey, provisioning.KeyStatus{Exists: true, Active: true, Source: ef}},
		{burnt, provisioning.KeyStatus{Exists: true, Source: ef}},
		{key(), provisioning.KeyStatus{}},
	} {
		if got := state(c.plaintext); got != c.want {
			t.Errorf("key %s: %+v; want %+v", auth.DisplayPrefix(c.plaintext), got, c.want)
		}
	}
}
