package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/controllers"
	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
)

const timeout = 20 * time.Second

// watchBound is how soon a change of a referenced object must reach the object referring to it:
// well within the one-minute SecretConflict requeue and the five-minute resync, so that only a
// watch meets it, with room for a loaded machine.
const watchBound = 10 * time.Second

func catalogObj(ns string, products ...v1alpha1.CatalogProduct) *v1alpha1.Catalog {
	return testfixture.Catalog("eu", testfixture.InNamespace(ns), testfixture.WithDiscount("5"),
		testfixture.WithProducts(products...))
}

func product(code string, price int64) v1alpha1.CatalogProduct {
	return testfixture.Product(code, testfixture.WithPrice(price))
}

func partnerObj(ns string) *v1alpha1.Partner {
	return testfixture.Partner("acme", testfixture.InNamespace(ns), testfixture.WithContact("Acme", "ops@acme.example"),
		testfixture.WithCatalogRef("eu"), testfixture.WithAllowlist("127.0.0.1/32"))
}

func apiKeyObj(ns, name, environment string, kind v1alpha1.ApiKeyType) *v1alpha1.ApiKey {
	return testfixture.APIKey("acme", environment, testfixture.InNamespace(ns), testfixture.Named(name),
		testfixture.OfType(kind))
}

func ready(conditions []metav1.Condition, generation int64) (bool, string) {
	c := meta.FindStatusCondition(conditions, v1alpha1.ConditionReady)
	if c == nil {
		return false, "no Ready condition"
	}
	return c.Status == metav1.ConditionTrue && c.ObservedGeneration == generation,
		fmt.Sprintf("%s %s: %s (gen %d)", c.Status, c.Reason, c.Message, c.ObservedGeneration)
}

// secretKey waits for the ApiKey's Secret and returns its key.
func secretKey(t *testing.T, ns, secretName, notEqual string) string {
	t.Helper()
	var key string
	poll.Until(t, timeout, "key secret "+secretName, func() (bool, string) {
		var s corev1.Secret
		if !get(t, ns, secretName, &s) {
			return false, "no secret"
		}
		key = string(s.Data["apiKey"])
		return key != "" && key != notEqual, "key " + auth.DisplayPrefix(key)
	})
	return key
}

// onboard applies a catalog, a partner and its two keys, and waits until the keys work.
func onboard(t *testing.T, ns string) (sandboxKey, productionKey string) {
	t.Helper()
	create(t, catalogObj(ns, product("10000000000001", 2000), product("10000000000002", 5000)))
	create(t, partnerObj(ns))
	create(t, apiKeyObj(ns, "acme-sandbox", "sandbox", v1alpha1.ApiKeyTypeAPIKey))
	create(t, apiKeyObj(ns, "acme-production", "production", v1alpha1.ApiKeyTypeAPIKey))
	sandboxKey = secretKey(t, ns, "acme-sandbox-key", "")
	productionKey = secretKey(t, ns, "acme-production-key", "")
	poll.Until(t, timeout, "keys work", func() (bool, string) {
		s, p := ping(t, "sandbox", sandboxKey), ping(t, "production", productionKey)
		return s == 200 && p == 200, fmt.Sprintf("sandbox %d production %d", s, p)
	})
	// The partner's catalog is bound in a reconcile of its own, after the Catalog's: tests that
	// order right away must not find it empty.
	poll.Until(t, timeout, "catalog served", func() (bool, string) {
		s := getJSON(t, "sandbox", "/catalog/products/10000000000001", sandboxKey)["productCode"]
		p := getJSON(t, "production", "/catalog/products/10000000000001", productionKey)["productCode"]
		return s == "10000000000001" && p == "10000000000001", fmt.Sprintf("sandbox %v production %v", s, p)
	})
	return sandboxKey, productionKey
}

func TestOnboarding(t *testing.T) {
	ns := namespace(t)
	sandboxKey, productionKey := onboard(t, ns)
	if !strings.HasPrefix(sandboxKey, "cp_test_") || !strings.HasPrefix(productionKey, "cp_live_") {
		t.Fatalf("key prefixes: %s %s", auth.DisplayPrefix(sandboxKey), auth.DisplayPrefix(productionKey))
	}
	if ping(t, "production", sandboxKey) != 401 {
		t.Fatal("sandbox key accepted by production")
	}
	var p v1alpha1.Partner
	poll.Until(t, timeout, "partner ready", func() (bool, string) {
		get(t, ns, "acme", &p)
		ok, detail := ready(p.Status.Conditions, p.Generation)
		return ok && p.Status.Accounts.Sandbox != "" && p.Status.ObservedGeneration == p.Generation &&
			meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionCatalogResolved), detail
	})
	var c v1alpha1.Catalog
	poll.Until(t, timeout, "catalog ready", func() (bool, string) {
		get(t, ns, "eu", &c)
		ok, detail := ready(c.Status.Conditions, c.Generation)
		return ok && c.Status.ProductCount == 2, detail
	})
	if list := getJSON(t, "production", "/catalog/products", productionKey); list["count"] != float64(2) {
		t.Fatalf("production catalog: %v", list)
	}
	var s corev1.Secret
	get(t, ns, "acme-production-key", &s)
	if string(s.Data["environment"]) != "production" || string(s.Data["baseUrl"]) != "https://api.example/v2" ||
		!metav1.IsControlledBy(&s, &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{UID: s.OwnerReferences[0].UID}}) {
		t.Fatalf("secret: %v %v", s.Data, s.OwnerReferences)
	}
	var k v1alpha1.ApiKey
	get(t, ns, "acme-production", &k)
	if k.Status.KeyPrefix != auth.DisplayPrefix(productionKey) || k.Status.IssuedAt == nil {
		t.Fatalf("apikey status: %+v", k.Status)
	}
	// The plaintext is nowhere in the database: only its digest.
	var n int64
	err := env.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM api_keys WHERE key_prefix = $1 AND digest = sha256($2::text::bytea)`,
		k.Status.KeyPrefix, productionKey).Scan(&n)
	if err != nil || n != 1 {
		t.Fatalf("digest rows: %d", n)
	}

	// A policy change reaches the running API: ordering disabled.
	get(t, ns, "acme", &p)
	p.Spec.Ordering = &v1alpha1.OrderingSpec{Enabled: ptr(false)}
	if err := env.k8s.Update(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, timeout, "ordering disabled", func() (bool, string) {
		body := postOrder(t, "production", productionKey)
		return body == 403, fmt.Sprint(body)
	})
}

func postOrder(t *testing.T, environment, key string) int {
	t.Helper()
	req, _ := newRequest("POST", env.apiURL[environment]+"/orders",
		`{"externalOrderCode":"x","currency":"EUR","orderProducts":[{"productCode":"10000000000001","quantity":1}]}`)
	req.Header.Set("x-api-key", key)
	resp, err := apiClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func keyState(t *testing.T, key string) (exists, active bool) {
	t.Helper()
	s := keyRecord(t, key)
	return s.Exists, s.Active
}

func TestKeyLifecycle(t *testing.T) {
	ns := namespace(t)
	_, key := onboard(t, ns)
	ctx := context.Background()
	before := map[string]float64{}
	for _, e := range []string{"rotated", "reissued", "revoked"} {
		before[e] = keyEvents(t, e)
	}

	// Later reconciles (any change of the resource) never regenerate the key.
	var k v1alpha1.ApiKey
	update(t, ns, "acme-production", &k, func() { k.Annotations = map[string]string{"touched": "yes"} })
	time.Sleep(time.Second)
	if again := secretKey(t, ns, "acme-production-key", ""); again != key {
		t.Fatal("key regenerated on a later reconcile")
	}

	// Raising rotation issues a new key and revokes the previous one at once.
	update(t, ns, "acme-production", &k, func() { k.Spec.Rotation = 1 })
	rotated := secretKey(t, ns, "acme-production-key", key)
	// The API learns of both keys by notification: milliseconds, or seconds on a busy machine.
	poll.Until(t, timeout, "rotation visible to the API", func() (bool, string) {
		o, n := ping(t, "production", key), ping(t, "production", rotated)
		return o == 401 && n == 200, fmt.Sprintf("old %d new %d", o, n)
	})
	poll.Until(t, timeout, "rotation status", func() (bool, string) {
		get(t, ns, "acme-production", &k)
		return k.Status.Rotation == 1 && k.Status.KeyPrefix == auth.DisplayPrefix(rotated), fmt.Sprintf("%+v", k.Status)
	})

	// Deleting the Secret revokes its key and issues a new one.
	keySecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acme-production-key"}}
	if err := env.k8s.Delete(ctx, keySecret); err != nil {
		t.Fatal(err)
	}
	reissued := secretKey(t, ns, "acme-production-key", rotated)
	if _, active := keyState(t, rotated); active {
		t.Fatal("key of the deleted Secret still active")
	}
	poll.Until(t, timeout, "reissued key works", func() (bool, string) {
		return ping(t, "production", reissued) == 200, ""
	})

	// A database restored without the key gets it back from the Secret.
	if _, err := env.db.Pool.Exec(context.Background(), `DELETE FROM api_keys WHERE source = $1`,
		ns+"/acme-production"); err != nil {
		t.Fatal(err)
	}
	update(t, ns, "acme-production", &k, func() { k.Annotations["touched"] = "again" })
	poll.Until(t, timeout, "key restored from Secret", func() (bool, string) {
		exists, active := keyState(t, reissued)
		return exists && active, ""
	})
	if now := secretKey(t, ns, "acme-production-key", ""); now != reissued {
		t.Fatal("restoring the digest changed the key")
	}

	// Deleting the ApiKey revokes its key.
	if err := env.k8s.Delete(ctx, &k); err != nil {
		t.Fatal(err)
	}
	// The deletion's reconcile revokes the key, then the API learns of it by notification.
	poll.Until(t, timeout, "revoked on delete", func() (bool, string) {
		return ping(t, "production", reissued) == 401, ""
	})
	poll.Until(t, timeout, "key events counted", func() (bool, string) {
		got := fmt.Sprintf("rotated %v reissued %v revoked %v", keyEvents(t, "rotated")-before["rotated"],
			keyEvents(t, "reissued")-before["reissued"], keyEvents(t, "revoked")-before["revoked"])
		return got == "rotated 1 reissued 1 revoked 1", got
	})
}

// TestSecretConflict: an ApiKey never overwrites a Secret it does not own, says so, and issues
// its key within seconds of the Secret's deletion (the watch of Secrets named by ApiKeys, not a
// slow requeue). The Secret that is not the operator's is not in the operator's cache; the key
// Secret it owns is.
func TestSecretConflict(t *testing.T) {
	ns := namespace(t)
	onboard(t, ns)
	ctx := context.Background()
	create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "theirs"},
		StringData: map[string]string{"apiKey": "x"},
	})
	k := apiKeyObj(ns, "clash", "sandbox", v1alpha1.ApiKeyTypeAPIKey)
	k.Spec.SecretName = "theirs"
	create(t, k)
	poll.Until(t, timeout, "conflict reported", func() (bool, string) {
		get(t, ns, "clash", k)
		c := meta.FindStatusCondition(k.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == v1alpha1.ReasonSecretConflict && c.ObservedGeneration == k.Generation, c.String()
	})
	var s corev1.Secret
	get(t, ns, "theirs", &s)
	if string(s.Data["apiKey"]) != "x" {
		t.Fatal("someone else's Secret was overwritten")
	}
	if k.Status.ObservedGeneration != 0 {
		t.Fatalf("observedGeneration %d advanced while the key could not be issued", k.Status.ObservedGeneration)
	}

	cached := func(name string) bool {
		err := env.mgr.GetCache().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{})
		if err != nil && client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
		return err == nil
	}
	if cached("theirs") {
		t.Fatal("a Secret without the operator's label is in the operator's cache")
	}
	if !cached("acme-production-key") {
		t.Fatal("the key Secret the operator owns is not in its cache")
	}

	if err := env.k8s.Delete(ctx, &s); err != nil {
		t.Fatal(err)
	}
	var key string
	poll.Until(t, watchBound, "key issued once the name is free", func() (bool, string) {
		get(t, ns, "clash", k)
		ok, detail := ready(k.Status.Conditions, k.Generation)
		if !ok {
			return false, detail
		}
		key = secretKey(t, ns, "theirs", "")
		return true, ""
	})
	get(t, ns, "theirs", &s)
	if !metav1.IsControlledBy(&s, k) || s.Labels[controllers.ManagedByLabel] != controllers.ManagedByValue {
		t.Fatalf("issued Secret: owners %v labels %v", s.OwnerReferences, s.Labels)
	}
	poll.Until(t, timeout, "issued key works", func() (bool, string) { return ping(t, "sandbox", key) == 200, "" })
}

// TestFailedReconcileIsReported: a reconcile that fails in the database says so in Ready
// (reason and message, for the generation it tried), and status.observedGeneration stays at the
// last generation applied until the new one is.
func TestFailedReconcileIsReported(t *testing.T) {
	ns := namespace(t)
	_, key := onboard(t, ns)
	ctx := context.Background()
	var k v1alpha1.ApiKey
	poll.Until(t, timeout, "key ready", func() (bool, string) {
		get(t, ns, "acme-production", &k)
		ok, detail := ready(k.Status.Conditions, k.Generation)
		return ok && k.Status.ObservedGeneration == k.Generation, detail
	})
	applied := k.Status.ObservedGeneration

	// The database refuses this ApiKey's keys (a fault, not a state the operator manages).
	fn := "refuse_" + strings.ReplaceAll(ns, "-", "_")
	source := ns + "/acme-production"
	for _, stmt := range []string{
		`CREATE FUNCTION ` + fn + `() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected fault'; END $$`,
		`CREATE TRIGGER ` + fn + ` BEFORE INSERT ON api_keys FOR EACH ROW WHEN (NEW.source = '` + source + `')
			EXECUTE FUNCTION ` + fn + `()`,
	} {
		if _, err := env.db.Pool.Exec(context.Background(), stmt); err != nil {
			t.Fatal(err)
		}
	}
	dropped := false
	drop := func() {
		if !dropped {
			dropped = true
			_, err := env.db.Pool.Exec(context.Background(), `DROP TRIGGER `+fn+` ON api_keys; DROP FUNCTION `+fn+`()`)
			if err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(drop)

	get(t, ns, "acme-production", &k)
	k.Spec.Rotation = 1
	if err := env.k8s.Update(ctx, &k); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, timeout, "failure reported", func() (bool, string) {
		get(t, ns, "acme-production", &k)
		c := meta.FindStatusCondition(k.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonDatabaseError &&
			strings.Contains(c.Message, "injected fault") && c.ObservedGeneration == k.Generation, c.String()
	})
	if k.Status.ObservedGeneration != applied {
		t.Fatalf("observedGeneration %d advanced past %d although generation %d failed",
			k.Status.ObservedGeneration, applied, k.Generation)
	}
	if ping(t, "production", key) != 200 {
		t.Fatal("the previous key was revoked although its successor was not registered")
	}
	// No event says the rotation happened: neither the new key nor the revocation is done.
	for _, e := range eventsOf(t, ns, "ApiKey", "acme-production") {
		if e != "Normal Issued: Key "+auth.DisplayPrefix(key)+" issued into Secret acme-production-key" {
			t.Fatalf("event recorded while the rotation fails: %q", e)
		}
	}

	drop()
	poll.Until(t, timeout, "recovered", func() (bool, string) {
		get(t, ns, "acme-production", &k)
		ok, detail := ready(k.Status.Conditions, k.Generation)
		return ok && k.Status.ObservedGeneration == k.Generation && k.Status.Rotation == 1, detail
	})
	rotated := secretKey(t, ns, "acme-production-key", key)
	// The API learns of both keys by notification: milliseconds, or seconds on a busy machine.
	poll.Until(t, timeout, "rotated key in service", func() (bool, string) {
		o, n := ping(t, "production", key), ping(t, "production", rotated)
		return o == 401 && n == 200, fmt.Sprintf("old %d new %d", o, n)
	})
	waitEvent(t, ns, "ApiKey", "acme-production", "Normal Rotated: Rotation 1 requested: key "+auth.DisplayPrefix(key)+
		" revoked; key "+auth.DisplayPrefix(rotated)+" issued into Secret acme-production-key")
}

// TestResyncWritesNothing: reconciles with nothing to change (here: metadata-only updates of
// the resources) send no status write and no Secret write to the API server.
func TestResyncWritesNothing(t *testing.T) {
	ns := namespace(t)
	onboard(t, ns)
	ctx := context.Background()
	var k v1alpha1.ApiKey
	var p v1alpha1.Partner
	poll.Until(t, timeout, "partner and key ready", func() (bool, string) {
		get(t, ns, "acme-production", &k)
		get(t, ns, "acme", &p)
		okK, detailK := ready(k.Status.Conditions, k.Generation)
		okP, detailP := ready(p.Status.Conditions, p.Generation)
		return okK && okP, detailK + "; " + detailP
	})
	time.Sleep(time.Second) // the reconciles that onboarding queued are done
	keyStatus := "/apis/codeport.dev/v1alpha1/namespaces/" + ns + "/apikeys/acme-production/status"
	partnerStatus := "/apis/codeport.dev/v1alpha1/namespaces/" + ns + "/partners/acme/status"
	secretPath := "/api/v1/namespaces/" + ns + "/secrets/acme-production-key"
	// writes counts the ApiKey status, Partner status and key Secret writes so far.
	writes := func() [3]int {
		return [3]int{
			env.writes.count("PATCH", keyStatus), env.writes.count("PATCH", partnerStatus), env.writes.count("PUT", secretPath),
		}
	}
	before := writes()
	reconciles := func() float64 {
		families, err := crmetrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var n float64
		for _, f := range families {
			if f.GetName() == "controller_runtime_reconcile_total" {
				for _, m := range f.GetMetric() {
					n += m.GetCounter().GetValue()
				}
			}
		}
		return n
	}
	reconciled := reconciles()
	for i := range 5 {
		get(t, ns, "acme-production", &k)
		k.Annotations = map[string]string{"touched": fmt.Sprint(i)}
		if err := env.k8s.Update(ctx, &k); err != nil {
			t.Fatal(err)
		}
		get(t, ns, "acme", &p)
		p.Annotations = map[string]string{"touched": fmt.Sprint(i)}
		if err := env.k8s.Update(ctx, &p); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Ten updates queue ten reconciles; on a busy machine they run well after the last update.
	poll.Until(t, timeout, "the updates reconciled", func() (bool, string) {
		n := reconciles()
		return n >= reconciled+10, fmt.Sprintf("%v reconciles before, %v now", reconciled, n)
	})
	after := writes()
	if after != before {
		t.Fatalf("writes (ApiKey status, Partner status, key Secret) before %v, "+
			"after reconciles with nothing to change %v", before, after)
	}
}

// TestUnlabelledKeySecretKeepsItsKey: a key Secret the ApiKey owns but without the operator's
// label (written by an older operator) is outside the cache, so the cached client says it is
// missing; the operator checks with the API server instead of revoking the key, and labels it.
func TestUnlabelledKeySecretKeepsItsKey(t *testing.T) {
	ns := namespace(t)
	_, key := onboard(t, ns)
	ctx := context.Background()
	reissued, revoked := keyEvents(t, "reissued"), keyEvents(t, "revoked")
	var s corev1.Secret
	get(t, ns, "acme-production-key", &s)
	delete(s.Labels, controllers.ManagedByLabel)
	if err := env.k8s.Update(ctx, &s); err != nil {
		t.Fatal(err)
	}
	// The label's removal drops the Secret from the cache, which wakes its ApiKey.
	poll.Until(t, timeout, "label restored", func() (bool, string) {
		get(t, ns, "acme-production-key", &s)
		return s.Labels[controllers.ManagedByLabel] == controllers.ManagedByValue, fmt.Sprint(s.Labels)
	})
	if now := string(s.Data["apiKey"]); now != key {
		t.Fatalf("key replaced: %s, was %s", auth.DisplayPrefix(now), auth.DisplayPrefix(key))
	}
	if exists, active := keyState(t, key); !exists || !active {
		t.Fatal("key revoked")
	}
	if keyEvents(t, "reissued") != reissued || keyEvents(t, "revoked") != revoked {
		t.Fatal("key events counted a reissue or revocation")
	}
}

// storedWebhook is the endpoint of a partner's environment as the data plane holds it: its URL
// and its signing secret, opened with the codes key ("" when there is none).
func storedWebhook(t *testing.T, ns, partner, environment string) (url, secret string) {
	t.Helper()
	var row struct {
		PartnerID    uuid.UUID
		URL          string
		SealedSecret []byte
		SecretKeyRef store.KeyRef
	}
	err := env.db.Pool.QueryRow(context.Background(), `SELECT w.partner_id, w.url, w.sealed_secret, w.secret_key_ref
		FROM webhook_endpoints w JOIN partners p ON p.id = w.partner_id
		WHERE p.namespace = $1 AND p.name = $2 AND w.environment = $3`, ns, partner, environment).
		Scan(&row.PartnerID, &row.URL, &row.SealedSecret, &row.SecretKeyRef)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ""
	}
	if err != nil {
		t.Fatal(err)
	}
	if row.URL == "" {
		return "", ""
	}
	plain, err := env.cipher.OpenSecret(row.SecretKeyRef, row.SealedSecret,
		store.WebhookSecretOwner(row.PartnerID, environment))
	if err != nil {
		t.Fatalf("%s webhook secret of %s/%s does not open: %v", environment, ns, partner, err)
	}
	return row.URL, string(plain)
}

// TestWebhookSecretChangeReachesDataPlane: the webhook Secrets are the user's (no operator label,
// read uncached), and a change of one still reaches the data plane within seconds. The
// partner-wide endpoint serves both environments until one sets its own.
func TestWebhookSecretChangeReachesDataPlane(t *testing.T) {
	ns := namespace(t)
	onboard(t, ns)
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acme-webhook"},
		StringData: map[string]string{"secret": "first-signing-secret-of-24-bytes"}}
	live := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acme-live-webhook"},
		StringData: map[string]string{"secret": "live-signing-secret-of-24-bytes"}}
	create(t, secret)
	create(t, live)
	var p v1alpha1.Partner
	get(t, ns, "acme", &p)
	p.Spec.Webhook = &v1alpha1.WebhookSpec{URL: "https://hooks.acme.example/codeport",
		SecretRef: v1alpha1.SecretKeySelector{Name: "acme-webhook", Key: "secret"}}
	if err := env.k8s.Update(ctx, &p); err != nil {
		t.Fatal(err)
	}
	both := func(url, secret string) func() (bool, string) {
		return func() (bool, string) {
			get(t, ns, "acme", &p)
			ok, detail := ready(p.Status.Conditions, p.Generation)
			sbURL, sbSecret := storedWebhook(t, ns, "acme", "sandbox")
			prURL, prSecret := storedWebhook(t, ns, "acme", "production")
			return ok && sbURL == url && sbSecret == secret && prURL == url && prSecret == secret,
				fmt.Sprintf("%s; sandbox %s %q, production %s %q", detail, sbURL, sbSecret, prURL, prSecret)
		}
	}
	poll.Until(t, timeout, "webhook applied to both environments",
		both("https://hooks.acme.example/codeport", "first-signing-secret-of-24-bytes"))
	get(t, ns, "acme-webhook", secret)
	secret.Data["secret"] = []byte("second-signing-secret-of-24-bytes")
	if err := env.k8s.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, watchBound, "changed webhook secret applied",
		both("https://hooks.acme.example/codeport", "second-signing-secret-of-24-bytes"))

	// Production's own endpoint, with its own Secret, leaves sandbox on the partner-wide one.
	update(t, ns, "acme", &p, func() {
		p.Spec.Environments = &v1alpha1.EnvironmentOverrides{Production: &v1alpha1.AccessPolicy{
			Webhook: &v1alpha1.WebhookSpec{
				URL:       "https://live.acme.example/codeport",
				SecretRef: v1alpha1.SecretKeySelector{Name: "acme-live-webhook", Key: "secret"},
			},
		}}
	})
	split := func(prodSecret string) func() (bool, string) {
		return func() (bool, string) {
			sbURL, sbSecret := storedWebhook(t, ns, "acme", "sandbox")
			prURL, prSecret := storedWebhook(t, ns, "acme", "production")
			return sbURL == "https://hooks.acme.example/codeport" && sbSecret == "second-signing-secret-of-24-bytes" &&
					prURL == "https://live.acme.example/codeport" && prSecret == prodSecret,
				fmt.Sprintf("sandbox %s %q, production %s %q", sbURL, sbSecret, prURL, prSecret)
		}
	}
	poll.Until(t, timeout, "production's own endpoint applied", split("live-signing-secret-of-24-bytes"))
	get(t, ns, "acme-live-webhook", live)
	live.Data["secret"] = []byte("rotated-live-secret-of-24-bytes")
	if err := env.k8s.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, watchBound, "production's changed secret applied", split("rotated-live-secret-of-24-bytes"))
}

func TestCatalogKeepsLastGoodVersion(t *testing.T) {
	ns := namespace(t)
	sandboxKey, _ := onboard(t, ns)
	ctx := context.Background()
	// Products from a ConfigMap join the inline ones.
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "feed"},
		Data: map[string]string{"products.json": `[{"productCode":"10000000000003","name":"Feed product",` +
			`"countryCode":"DE","currencyCode":"EUR","price":700}]`}})
	var c v1alpha1.Catalog
	update(t, ns, "eu", &c, func() {
		c.Spec.ProductsFrom = []v1alpha1.ProductsSource{
			{ConfigMapRef: v1alpha1.ConfigMapKeyRef{Name: "feed", Key: "products.json"}},
		}
	})
	poll.Until(t, timeout, "feed applied", func() (bool, string) {
		get(t, ns, "eu", &c)
		return c.Status.ProductCount == 3, fmt.Sprint(c.Status.ProductCount)
	})
	// An invalid product blocks the new version; the old one keeps serving.
	var cm corev1.ConfigMap
	get(t, ns, "feed", &cm)
	cm.Data["products.json"] =
		`[{"productCode":"10000000000004","name":"No price","countryCode":"DE","currencyCode":"EUR"}]`
	if err := env.k8s.Update(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, timeout, "invalid product reported", func() (bool, string) {
		get(t, ns, "eu", &c)
		cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionReady)
		return cond != nil && cond.Reason == v1alpha1.ReasonInvalidProducts &&
			strings.Contains(cond.Message, "10000000000004") && len(c.Status.InvalidProducts) == 1, cond.String()
	})
	waitServed(t, sandboxKey, "10000000000003", true) // the last good catalog stays in service
}

func TestWalletTopUpsAndLedgerRefresh(t *testing.T) {
	ns := namespace(t)
	sandboxKey, _ := onboard(t, ns)
	ctx := context.Background()
	w := testfixture.Wallet("acme", "sandbox", testfixture.InNamespace(ns), testfixture.WithThreshold("100.00"),
		testfixture.WithTopUps(testfixture.TopUp("wire-1", "EUR", "500.00"), testfixture.TopUp("wire-2", "EUR", "250.50")))
	create(t, w)
	poll.Until(t, timeout, "top-ups applied", func() (bool, string) {
		get(t, ns, "acme-sandbox", w)
		return w.Status.Balances["EUR"] == "750.50" && w.Status.AppliedTopUps == 2 && !w.Status.LowBalance,
			fmt.Sprintf("%+v", w.Status)
	})
	// A second operator reconciles concurrently, then goes away (a restart); 20 reconciles later
	// the top-ups are still applied exactly once.
	replicaCtx, stopReplica := context.WithCancel(ctx)
	defer stopReplica()
	if err := startManager(replicaCtx, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if i == 10 {
			stopReplica()
		}
		get(t, ns, "acme-sandbox", w)
		w.Annotations = map[string]string{"n": fmt.Sprint(i)}
		if err := env.k8s.Update(ctx, w); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	if b := getJSON(t, "sandbox", "/wallet", sandboxKey)["balances"].(map[string]any)["EUR"]; b != 750.5 {
		t.Fatalf("balance after repeated reconciles: %v", b)
	}

	// Money spent on orders shows in status within seconds, without touching the Wallet:
	// 35 units of 20.00 EUR.
	req, _ := newRequest("POST", env.apiURL["sandbox"]+"/orders",
		`{"externalOrderCode":"spend","currency":"EUR","orderProducts":[{"productCode":"10000000000001","quantity":35}]}`)
	req.Header.Set("x-api-key", sandboxKey)
	resp, err := apiClient(t).Do(req)
	if err != nil || resp.StatusCode != 202 {
		t.Fatalf("order: %v %v", resp, err)
	}
	resp.Body.Close()
	// The order is fulfilled, then the ledger follower reads its entries within an interval and
	// the Wallet is reconciled: seconds, more on a busy machine, and far below the five-minute
	// resync, so only the follower meets the bound.
	poll.Until(t, timeout, "status follows the ledger", func() (bool, string) {
		get(t, ns, "acme-sandbox", w)
		return w.Status.Balances["EUR"] == "50.50" && w.Status.LowBalance, fmt.Sprintf("%+v", w.Status)
	})

	// Removing a top-up does not reverse it; a condition says so.
	get(t, ns, "acme-sandbox", w)
	w.Spec.TopUps = w.Spec.TopUps[:1]
	if err := env.k8s.Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, timeout, "removal reported", func() (bool, string) {
		get(t, ns, "acme-sandbox", w)
		c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionTopUpsReconciled)
		return c != nil && c.Reason == v1alpha1.ReasonTopUpRemoved && c.ObservedGeneration == w.Generation &&
			w.Status.Balances["EUR"] == "50.50", c.String()
	})
}

func TestPartnerDeletionSuspendsAndRevokes(t *testing.T) {
	ns := namespace(t)
	sandboxKey, productionKey := onboard(t, ns)
	ctx := context.Background()
	acct, err := store.AccountOf(ctx, env.db.Pool, ns, "acme", "production")
	if err != nil {
		t.Fatal(err)
	}
	// Wallet ordering off, through the Partner: the order needs no funds.
	var p v1alpha1.Partner
	get(t, ns, "acme", &p)
	p.Spec.Ordering = &v1alpha1.OrderingSpec{WalletEnabled: ptr(false)}
	if err := env.k8s.Update(ctx, &p); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, timeout, "wallet ordering off applied", func() (bool, string) {
		get(t, ns, "acme", &p)
		ok, detail := ready(p.Status.Conditions, p.Generation)
		return ok && p.Status.ObservedGeneration == p.Generation, detail
	})
	poll.Until(t, timeout, "order placed", func() (bool, string) {
		code := postOrder(t, "production", productionKey)
		return code == 202, fmt.Sprint(code)
	})
	partner := &v1alpha1.Partner{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acme"}}
	if err := env.k8s.Delete(ctx, partner); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, timeout, "keys revoked", func() (bool, string) {
		s, p := ping(t, "sandbox", sandboxKey), ping(t, "production", productionKey)
		return s == 401 && p == 401, fmt.Sprintf("%d %d", s, p)
	})
	poll.Until(t, timeout, "partner gone", func() (bool, string) {
		return !get(t, ns, "acme", &v1alpha1.Partner{}), ""
	})
	var suspended bool
	err = env.db.Pool.QueryRow(ctx, `SELECT suspended FROM accounts WHERE id = $1`, acct.ID).Scan(&suspended)
	if err != nil || !suspended {
		t.Fatalf("account after deletion: suspended %v, %v", suspended, err)
	}
	if _, err := store.FindOrderByExternalCode(ctx, env.db.Pool, acct.ID, "x"); err != nil {
		t.Fatalf("order of the deleted partner: %v", err)
	}
	// ApiKeys of the deleted partner say why they are not ready.
	poll.Until(t, timeout, "apikey reports missing partner", func() (bool, string) {
		var k v1alpha1.ApiKey
		get(t, ns, "acme-sandbox", &k)
		c := meta.FindStatusCondition(k.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == v1alpha1.ReasonPartnerNotFound, c.String()
	})
}

// TestScale200Partners onboards 200 partners, each with a key and a wallet, and reports how long
// they take to become Ready. The bound is generous; the measured time is logged.
func TestScale200Partners(t *testing.T) {
	ns := namespace(t)
	create(t, catalogObj(ns, product("10000000000001", 2000)))
	start := time.Now()
	const n = 200
	for i := range n {
		p := partnerObj(ns)
		p.Name = fmt.Sprintf("p%03d", i)
		create(t, p)
		k := apiKeyObj(ns, p.Name, "production", v1alpha1.ApiKeyTypeAPIKey)
		k.Spec.PartnerRef.Name = p.Name
		create(t, k)
		create(t, testfixture.Wallet(p.Name, "production", testfixture.InNamespace(ns), testfixture.Named(p.Name),
			testfixture.WithTopUps(testfixture.TopUp("initial", "EUR", "100.00"))))
	}
	poll.Until(t, 3*time.Minute, "200 partners ready", func() (bool, string) {
		readyCount := func(list []metav1.Condition) bool { return meta.IsStatusConditionTrue(list, v1alpha1.ConditionReady) }
		var partners v1alpha1.PartnerList
		var keys v1alpha1.ApiKeyList
		var wallets v1alpha1.WalletList
		_ = env.k8s.List(context.Background(), &partners, client.InNamespace(ns))
		_ = env.k8s.List(context.Background(), &keys, client.InNamespace(ns))
		_ = env.k8s.List(context.Background(), &wallets, client.InNamespace(ns))
		p, k, w := 0, 0, 0
		for i := range partners.Items {
			if readyCount(partners.Items[i].Status.Conditions) {
				p++
			}
		}
		for i := range keys.Items {
			if readyCount(keys.Items[i].Status.Conditions) {
				k++
			}
		}
		for i := range wallets.Items {
			if readyCount(wallets.Items[i].Status.Conditions) && wallets.Items[i].Status.Balances["EUR"] == "100.00" {
				w++
			}
		}
		return p == n && k == n && w == n, fmt.Sprintf("partners %d keys %d wallets %d", p, k, w)
	})
	t.Logf("200 partners with keys and wallets Ready in %s", time.Since(start).Round(100*time.Millisecond))
}
