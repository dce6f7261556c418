package controllers

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// countingReader serves objs, indexed as the manager's cache is, and counts its Gets.
func countingReader(t *testing.T, scheme *runtime.Scheme, reads *int, objs ...client.Object) client.Client {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithIndex(&v1alpha1.ApiKey{}, indexSecretName, apiKeySecretName).
		WithIndex(&corev1.Secret{}, indexKeyDigest, secretKeyDigest).
		Build()
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(
			ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption,
		) error {
			*reads++
			return c.Get(ctx, key, obj, opts...)
		},
	})
}

// TestPlanConfirmsWithTheAPIServer: a decision to replace or revoke a key taken on the cached
// Secret (missing, stale) is taken again on the Secret the API server has; a decision to keep
// the key costs no uncached read. The decisions on whose a key is are taken on the database's
// record of it, in one query, and on the other cached key Secrets.
func TestPlanConfirmsWithTheAPIServer(t *testing.T) {
	ctx := context.Background()
	db := openTestStore(t, "controllers_plan", 2)
	prov := testfixture.Provisioner(t, db, nil)
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)

	const ns = "plan"
	partner := testfixture.Partner("acme", testfixture.InNamespace(ns),
		testfixture.WithContact("Acme", "ops@acme.example"))
	if _, err := prov.ApplyPartner(ctx, partner, nil, nil); err != nil {
		t.Fatal(err)
	}
	k := testfixture.APIKey("acme", "production", testfixture.InNamespace(ns),
		testfixture.APIKeyWith(func(k *v1alpha1.ApiKey) {
			k.UID, k.Spec.Rotation = "4b4f7e0e-1111-4c1c-9a53-0b8a2b1c0001", 1
		}))
	other := testfixture.APIKey("acme", "production", testfixture.InNamespace(ns), testfixture.Named("other"),
		testfixture.APIKeyWith(func(k *v1alpha1.ApiKey) { k.UID = "4b4f7e0e-1111-4c1c-9a53-0b8a2b1c0002" }))
	secretOf := func(owner *v1alpha1.ApiKey, plaintext, rotation string) *corev1.Secret {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:   ns,
				Name:        owner.Spec.SecretName,
				Annotations: map[string]string{annotationRotation: rotation},
			},
			Data: map[string][]byte{SecretKeyAPIKey: []byte(plaintext)},
		}
		if err := controllerutil.SetControllerReference(owner, s, scheme); err != nil {
			t.Fatal(err)
		}
		return s
	}
	keySecret := func(plaintext, rotation string, owned bool) *corev1.Secret {
		s := secretOf(k, plaintext, rotation)
		if !owned {
			s.OwnerReferences = nil
		}
		return s
	}
	register := func(source string) string {
		plaintext, _ := auth.GenerateKey("production")
		if _, err := prov.RegisterKey(ctx, provisioning.Key{
			Namespace:   ns,
			Partner:     "acme",
			Environment: "production",
			Kind:        "apiKey",
			Source:      source,
			Plaintext:   plaintext,
		}); err != nil {
			t.Fatal(err)
		}
		return plaintext
	}
	older := register(keySource(k))
	current := register(keySource(k))
	unregistered, _ := auth.GenerateKey("production")
	othersRevoked := register(keySource(other))
	othersActive := register(keySource(other))
	shared, _ := auth.GenerateKey("production")

	for _, c := range []struct {
		name           string
		cached, server *corev1.Secret
		// others are the other cached objects.
		others        []client.Object
		want          keyAction
		wantKey       string
		uncachedReads int
	}{
		{"current in the cache: kept, no uncached read",
			keySecret(current, "1", true), keySecret(current, "1", true), nil, keyCurrent, current, 0},
		{"missing from the cache, current on the server: kept",
			nil, keySecret(current, "1", true), nil, keyCurrent, current, 1},
		{"older rotation in the cache, current on the server: kept",
			keySecret(older, "0", true), keySecret(current, "1", true), nil, keyCurrent, current, 1},
		{"revoked key in the cache, current on the server: kept",
			keySecret(older, "1", true), keySecret(current, "1", true), nil, keyCurrent, current, 1},
		{"missing from the cache, someone else's on the server: conflict",
			nil, keySecret("x", "", false), nil, keyConflict, "x", 1},
		{"missing from both: issue", nil, nil, nil, keyMissing, "", 1},
		{"unregistered on the server too: registered from the server's",
			keySecret(older, "0", true), keySecret(unregistered, "1", true), nil, keyUnregistered, unregistered, 1},
		{"another ApiKey's active key: foreign",
			keySecret(othersActive, "1", true), keySecret(othersActive, "1", true), nil, keyForeign, othersActive, 1},
		{"another ApiKey's revoked key, of an older rotation: foreign",
			keySecret(othersRevoked, "0", true), keySecret(othersRevoked, "0", true), nil, keyForeign, othersRevoked, 1},
		{"unknown key that another ApiKey's Secret holds too: shared",
			keySecret(shared, "1", true), keySecret(shared, "1", true),
			[]client.Object{secretOf(other, shared, "0")}, keyShared, shared, 1},
		{"unknown key that only an unowned Secret holds too: unregistered",
			keySecret(shared, "1", true), keySecret(shared, "1", true),
			[]client.Object{func() *corev1.Secret {
				s := secretOf(other, shared, "0")
				s.OwnerReferences = nil
				return s
			}()}, keyUnregistered, shared, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cachedReads, uncachedReads int
			var server []client.Object
			cached := append([]client.Object{}, c.others...)
			if c.cached != nil {
				cached = append(cached, c.cached)
			}
			if c.server != nil {
				server = append(server, c.server)
			}
			r := &APIKeyReconciler{Client: countingReader(t, scheme, &cachedReads, cached...),
				APIReader: countingReader(t, scheme, &uncachedReads, server...), Provisioner: prov}
			p, err := r.plan(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			gotKey := ""
			if p.secret != nil {
				gotKey = string(p.secret.Data[SecretKeyAPIKey])
			}
			if p.action != c.want || gotKey != c.wantKey || cachedReads != 1 || uncachedReads != c.uncachedReads {
				t.Fatalf("action %d key %q (cached reads %d, uncached %d); want action %d key %q (1, %d)",
					p.action, auth.DisplayPrefix(gotKey), cachedReads, uncachedReads,
					c.want, auth.DisplayPrefix(c.wantKey), c.uncachedReads)
			}
		})
	}
}

// TestSecretOwner: an existing Secret is its controller's; a missing one is created by the
// oldest ApiKey naming it (by name between equals) that is not being deleted.
func TestSecretOwner(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	at := func(second int) metav1.Time { return metav1.NewTime(time.Date(2026, 1, 1, 0, 0, second, 0, time.UTC)) }
	apiKey := func(name string, created int, change ...func(*v1alpha1.ApiKey)) *v1alpha1.ApiKey {
		k := testfixture.APIKey("acme", "sandbox", testfixture.InNamespace("ns"), testfixture.Named(name),
			testfixture.WithSecretName("shared"),
			testfixture.APIKeyWith(func(k *v1alpha1.ApiKey) {
				k.UID, k.CreationTimestamp = types.UID("uid-"+name), at(created)
			}))
		for _, c := range change {
			c(k)
		}
		return k
	}
	controlledBy := func(owner client.Object) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "shared"}}
		if owner != nil {
			if err := controllerutil.SetControllerReference(owner, s, scheme); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	deleting := func(k *v1alpha1.ApiKey) {
		deleted := at(9)
		k.DeletionTimestamp = &deleted
	}
	namesOther := func(k *v1alpha1.ApiKey) { k.Spec.SecretName = "other" }
	k := apiKey("production", 5)
	for _, c := range []struct {
		name      string
		secret    *corev1.Secret
		claimants []v1alpha1.ApiKey
		wantOwner string
		wantOurs  bool
	}{
		{"existing, controlled by it", controlledBy(k), nil, "production", true},
		{"existing, controlled by an older ApiKey", controlledBy(apiKey("sandbox", 1)),
			[]v1alpha1.ApiKey{*apiKey("sandbox", 1), *k}, "sandbox", false},
		{"existing, controlled by a younger ApiKey: still that one's", controlledBy(apiKey("staging", 7)),
			[]v1alpha1.ApiKey{*apiKey("staging", 7), *k}, "staging", false},
		{"existing, controlled by no one", controlledBy(nil), nil, "", false},
		{"existing, controlled by something else", controlledBy(&v1alpha1.Partner{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "acme", UID: "uid-acme"}}), nil, "", false},
		{"missing, named by it alone", nil, nil, "production", true},
		{"missing, it is in the list too", nil, []v1alpha1.ApiKey{*k}, "production", true},
		{"missing, an older ApiKey names it", nil,
			[]v1alpha1.ApiKey{*k, *apiKey("sandbox", 1)}, "sandbox", false},
		{"missing, a younger ApiKey names it", nil,
			[]v1alpha1.ApiKey{*apiKey("a-younger", 6), *k}, "production", true},
		{"missing, created the same second: by name", nil,
			[]v1alpha1.ApiKey{*apiKey("payments", 5), *apiKey("zebra", 5)}, "payments", false},
		{"missing, the older one is being deleted", nil,
			[]v1alpha1.ApiKey{*apiKey("sandbox", 1, deleting), *k}, "production", true},
		{"missing, the older one names another Secret now", nil,
			[]v1alpha1.ApiKey{*apiKey("sandbox", 1, namesOther), *k}, "production", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			owner, ours := secretOwner(k, c.secret, c.claimants)
			if owner != c.wantOwner || ours != c.wantOurs {
				t.Fatalf("owner %q ours %v; want %q %v", owner, ours, c.wantOwner, c.wantOurs)
			}
		})
	}
}

// TestJudgeKey: a key is kept or registered only when the database has it as the ApiKey's, or
// knows it as nobody's and no other ApiKey's Secret holds it.
func TestJudgeKey(t *testing.T) {
	k := testfixture.APIKey("acme", "production", testfixture.InNamespace("ns"),
		testfixture.APIKeyWith(func(k *v1alpha1.ApiKey) { k.Spec.Rotation = 2 }))
	own, other := keySource(k), "other-ns/acme-production"
	stored := func(active bool, source string) provisioning.KeyStatus {
		return provisioning.KeyStatus{Exists: true, Active: active, Source: source}
	}
	for _, c := range []struct {
		name  string
		facts keyFacts
		want  keyAction
	}{
		{"its own active key of this rotation", keyFacts{wellFormed: true, rotation: 2, stored: stored(true, own)},
			keyCurrent},
		{"not a key of the environment", keyFacts{}, keyInvalid},
		{"its own key of an older rotation", keyFacts{wellFormed: true, rotation: 1, stored: stored(true, own)},
			keyRotate},
		{"its own revoked key", keyFacts{wellFormed: true, rotation: 2, stored: stored(false, own)}, keyRevoked},
		{"another ApiKey's active key", keyFacts{wellFormed: true, rotation: 2, stored: stored(true, other)},
			keyForeign},
		{"another ApiKey's revoked key", keyFacts{wellFormed: true, rotation: 2, stored: stored(false, other)},
			keyForeign},
		{"another ApiKey's key, of an older rotation", keyFacts{wellFormed: true, rotation: 1,
			stored: stored(true, other)}, keyForeign},
		{"a key of no recorded source", keyFacts{wellFormed: true, rotation: 2, stored: stored(true, "")},
			keyForeign},
		{"unknown to the database", keyFacts{wellFormed: true, rotation: 2}, keyUnregistered},
		{"unknown, of a newer rotation (an interrupted rotation)", keyFacts{wellFormed: true, rotation: 3},
			keyUnregistered},
		{"unknown and in another ApiKey's Secret", keyFacts{wellFormed: true, rotation: 2, heldElsewhere: true},
			keyShared},
		{"unknown, in another ApiKey's Secret, of an older rotation", keyFacts{wellFormed: true, rotation: 1,
			heldElsewhere: true}, keyShared},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := judgeKey(k, c.facts); got != c.want {
				t.Fatalf("judgeKey = %d; want %d", got, c.want)
			}
		})
	}
}

// openTestStore creates a database of the test's own, migrated, and opens it; both go at cleanup.
func openTestStore(t *testing.T, name string, maxConns int32) *store.DB {
	t.Helper()
	ctx := context.Background()
	database, err := storetest.Create(ctx, name, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = database.Drop(context.Background()) })
	db, err := store.Open(ctx, database.URL, store.Options{MaxConns: maxConns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}
