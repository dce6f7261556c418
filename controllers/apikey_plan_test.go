package controllers

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
	"github.com/codeport/codeport/internal/testfixture"
)

// countingReader serves objs and counts its Gets.
func countingReader(t *testing.T, scheme *runtime.Scheme, reads *int, objs ...client.Object) client.Client {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
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
// the key costs no uncached read.
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
	keySecret := func(plaintext, rotation string, owned bool) *corev1.Secret {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:   ns,
				Name:        k.Spec.SecretName,
				Annotations: map[string]string{annotationRotation: rotation},
			},
			Data: map[string][]byte{SecretKeyAPIKey: []byte(plaintext)},
		}
		if owned {
			if err := controllerutil.SetControllerReference(k, s, scheme); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	older, _ := auth.GenerateKey("production")
	current, _ := auth.GenerateKey("production")
	unregistered, _ := auth.GenerateKey("production")
	for _, plaintext := range []string{older, current} {
		if _, err := prov.RegisterKey(ctx, provisioning.Key{
			Namespace:   ns,
			Partner:     "acme",
			Environment: "production",
			Kind:        "apiKey",
			Source:      keySource(k),
			Plaintext:   plaintext,
		}); err != nil {
			t.Fatal(err)
		}
	}

	for _, c := range []struct {
		name           string
		cached, server *corev1.Secret
		want           keyAction
		wantKey        string
		uncachedReads  int
	}{
		{"current in the cache: kept, no uncached read",
			keySecret(current, "1", true), keySecret(current, "1", true), keyCurrent, current, 0},
		{"missing from the cache, current on the server: kept",
			nil, keySecret(current, "1", true), keyCurrent, current, 1},
		{"older rotation in the cache, current on the server: kept",
			keySecret(older, "0", true), keySecret(current, "1", true), keyCurrent, current, 1},
		{"revoked key in the cache, current on the server: kept",
			keySecret(older, "1", true), keySecret(current, "1", true), keyCurrent, current, 1},
		{"missing from the cache, someone else's on the server: conflict",
			nil, keySecret("x", "", false), keyConflict, "x", 1},
		{"missing from both: issue", nil, nil, keyMissing, "", 1},
		{"unregistered on the server too: registered from the server's",
			keySecret(older, "0", true), keySecret(unregistered, "1", true), keyUnregistered, unregistered, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cachedReads, uncachedReads int
			var cached, server []client.Object
			if c.cached != nil {
				cached = append(cached, c.cached)
			}
			if c.server != nil {
				server = append(server, c.server)
			}
			r := &ApiKeyReconciler{Client: countingReader(t, scheme, &cachedReads, cached...),
				APIReader: countingReader(t, scheme, &uncachedReads, server...), Provisioner: prov}
			secret, action, err := r.plan(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			gotKey := ""
			if secret != nil {
				gotKey = string(secret.Data[SecretKeyAPIKey])
			}
			if action != c.want || gotKey != c.wantKey || cachedReads != 1 || uncachedReads != c.uncachedReads {
				t.Fatalf("action %d key %q (cached reads %d, uncached %d); want action %d key %q (1, %d)",
					action, auth.DisplayPrefix(gotKey), cachedReads, uncachedReads,
					c.want, auth.DisplayPrefix(c.wantKey), c.uncachedReads)
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
