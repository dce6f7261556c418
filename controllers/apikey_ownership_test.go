package controllers_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// watchVersions records every version of the object of list's kind named name in ns, from now
// on: a check on them sees each state the object was in, not the ones a poll happened to read.
func watchVersions(t *testing.T, list client.ObjectList, ns, name string) func() []runtime.Object {
	t.Helper()
	wc, err := client.NewWithWatch(env.cfg, client.Options{Scheme: env.scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), list, client.InNamespace(ns),
		client.MatchingFields{"metadata.name": name})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []runtime.Object
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range w.ResultChan() {
			mu.Lock()
			seen = append(seen, e.Object)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.Stop(); <-done })
	return func() []runtime.Object {
		mu.Lock()
		defer mu.Unlock()
		return append([]runtime.Object(nil), seen...)
	}
}

// keyRecord is the database's record of a key.
func keyRecord(t *testing.T, key string) provisioning.KeyStatus {
	t.Helper()
	s, err := testfixture.Provisioner(t, env.db, nil).KeyState(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// neverShowed fails the test if a recorded version of an ApiKey showed key (by its prefix) as
// its own, in status.keyPrefix or in its Ready message.
func neverShowed(t *testing.T, versions []runtime.Object, key string) {
	t.Helper()
	prefix := auth.DisplayPrefix(key)
	for _, o := range versions {
		k, ok := o.(*v1alpha1.ApiKey)
		if !ok {
			continue
		}
		c := meta.FindStatusCondition(k.Status.Conditions, v1alpha1.ConditionReady)
		if k.Status.KeyPrefix == prefix || c != nil && strings.Contains(c.Message, prefix) {
			t.Fatalf("ApiKey %s/%s showed key %s as its own: %+v", k.Namespace, k.Name, prefix, k.Status)
		}
	}
}

// copySecretData overwrites the key Secret in ns with the data of the one in fromNS, as a copy
// and paste between namespaces does.
func copySecretData(t *testing.T, fromNS, ns, name string) {
	t.Helper()
	var from, to corev1.Secret
	get(t, fromNS, name, &from)
	update(t, ns, name, &to, func() { to.Data = maps.Clone(from.Data) })
}

// replacedKey waits until the Secret holds a key other than those given.
func replacedKey(t *testing.T, ns, name string, not ...string) string {
	t.Helper()
	var key string
	poll.Until(t, timeout, "a new key in Secret "+name, func() (bool, string) {
		var s corev1.Secret
		get(t, ns, name, &s)
		key = string(s.Data["apiKey"])
		for _, n := range not {
			if key == n {
				return false, "key " + auth.DisplayPrefix(key)
			}
		}
		return true, ""
	})
	return key
}

// keyOwnedBy waits until the database has key active for the ApiKey ns/name and the ApiKey is
// Ready showing it.
func keyOwnedBy(t *testing.T, key, ns, name string) {
	t.Helper()
	poll.Until(t, timeout, "key "+auth.DisplayPrefix(key)+" of "+ns+"/"+name, func() (bool, string) {
		var k v1alpha1.ApiKey
		get(t, ns, name, &k)
		ok, detail := ready(k.Status.Conditions, k.Generation)
		got := keyRecord(t, key)
		return ok && k.Status.KeyPrefix == auth.DisplayPrefix(key) &&
				got == provisioning.KeyStatus{Exists: true, Active: true, Source: ns + "/" + name},
			fmt.Sprintf("%s; key %+v", detail, got)
	})
}

// partners are two partners onboarded in namespaces of their own, ed and ef, with the sandbox
// keys of each, and every version of ef's sandbox ApiKey from then on.
type partners struct {
	ed, ef, edKey, efKey string
	efVersions           func() []runtime.Object
}

func twoPartners(t *testing.T) partners {
	t.Helper()
	p := partners{ed: namespace(t)}
	p.ef = p.ed + "-ef"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.ef}})
	p.edKey, _ = onboard(t, p.ed)
	p.efKey, _ = onboard(t, p.ef)
	p.efVersions = watchVersions(t, &v1alpha1.ApiKeyList{}, p.ef, "acme-sandbox")
	return p
}

// TestForeignKeyInSecret: a key Secret overwritten with another partner's key Secret (a copy
// between namespaces) is a tampered Secret. Its ApiKey never takes the other key for its own,
// not even for a moment in its status: it issues a key of its own into the Secret, its previous
// key is revoked, and a Warning names the other key by its prefix only. The other partner's key
// keeps working.
func TestForeignKeyInSecret(t *testing.T) {
	p := twoPartners(t)
	ed, ef, edKey, efKey, efVersions := p.ed, p.ef, p.edKey, p.efKey, p.efVersions

	copySecretData(t, ed, ef, "acme-sandbox-key")
	fresh := replacedKey(t, ef, "acme-sandbox-key", edKey, efKey)
	if auth.DisplayPrefix(fresh) == auth.DisplayPrefix(edKey) {
		t.Fatalf("the new key has the other key's prefix %s", auth.DisplayPrefix(edKey))
	}
	keyOwnedBy(t, fresh, ef, "acme-sandbox")
	if got := keyRecord(t, efKey); !got.Exists || got.Active {
		t.Fatalf("the replaced key of the tampered Secret: %+v; want revoked", got)
	}
	waitEvent(t, ef, "ApiKey", "acme-sandbox",
		"Warning ForeignKey: Secret acme-sandbox-key held key "+auth.DisplayPrefix(edKey)+", which is another ApiKey's")
	poll.Until(t, timeout, "the API refuses the replaced key, takes the new one", func() (bool, string) {
		o, n := ping(t, "sandbox", efKey), ping(t, "sandbox", fresh)
		return o == 401 && n == 200, fmt.Sprintf("replaced %d new %d", o, n)
	})

	// The other partner's key is left as it was.
	keyOwnedBy(t, edKey, ed, "acme-sandbox")
	if code := ping(t, "sandbox", edKey); code != 200 {
		t.Fatalf("the copied key's partner is refused: %d", code)
	}
	if now := secretKey(t, ed, "acme-sandbox-key", ""); now != edKey {
		t.Fatal("the copied key's own Secret changed")
	}
	for _, ns := range []string{ed, ef} {
		for _, e := range eventsOf(t, ns, "ApiKey", "acme-sandbox") {
			if strings.Contains(e, edKey) {
				t.Fatalf("an event carries a plaintext key: %s", strings.ReplaceAll(e, edKey, "<key>"))
			}
			if ns == ed && strings.Contains(e, "ForeignKey") {
				t.Fatalf("the copied key's ApiKey recorded %q", e)
			}
		}
	}
	neverShowed(t, efVersions(), edKey)
}

// TestSharedKeyUnknownToTheDatabase: a key the database does not know (lost with a restore)
// that the Secrets of two ApiKeys hold is registered by neither: the ApiKey that finds it first
// registers it revoked and issues a key of its own; the other finds it registered to another
// ApiKey and issues one too. No ApiKey ever shows another's key as its own.
func TestSharedKeyUnknownToTheDatabase(t *testing.T) {
	p := twoPartners(t)
	ed, ef, edKey, efKey, efVersions := p.ed, p.ef, p.edKey, p.efKey, p.efVersions

	// The restored database lacks ed's key (issued after the backup); then ed's key is copied
	// into ef's Secret, which wakes ef's ApiKey first.
	if _, err := env.db.Pool.Exec(context.Background(), `DELETE FROM api_keys WHERE source = $1`,
		ed+"/acme-sandbox"); err != nil {
		t.Fatal(err)
	}
	copySecretData(t, ed, ef, "acme-sandbox-key")
	efFresh := replacedKey(t, ef, "acme-sandbox-key", edKey, efKey)
	keyOwnedBy(t, efFresh, ef, "acme-sandbox")
	waitEvent(t, ef, "ApiKey", "acme-sandbox", "Warning ForeignKey: Secret acme-sandbox-key held key "+
		auth.DisplayPrefix(edKey)+", which the database does not know and another ApiKey's Secret holds too")
	if got := keyRecord(t, edKey); got != (provisioning.KeyStatus{Exists: true, Source: ef + "/acme-sandbox"}) {
		t.Fatalf("the shared key: %+v; want registered revoked", got)
	}

	// ed's ApiKey, woken (as the operator's start after a restore wakes every one), finds its
	// Secret's key registered to another ApiKey and replaces it too.
	var k v1alpha1.ApiKey
	update(t, ed, "acme-sandbox", &k, func() { k.Annotations = map[string]string{"touched": "yes"} })
	edFresh := replacedKey(t, ed, "acme-sandbox-key", edKey)
	keyOwnedBy(t, edFresh, ed, "acme-sandbox")
	poll.Until(t, timeout, "the API takes both new keys, refuses the shared one", func() (bool, string) {
		s, d, f := ping(t, "sandbox", edKey), ping(t, "sandbox", edFresh), ping(t, "sandbox", efFresh)
		return s == 401 && d == 200 && f == 200, fmt.Sprintf("shared %d ed %d ef %d", s, d, f)
	})
	neverShowed(t, efVersions(), edKey)
}
