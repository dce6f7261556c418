package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// TestSecretNameHasOneOwner: two ApiKeys naming one Secret. The Secret stays with the one that
// created it, and when it is deleted the oldest ApiKey naming it creates it again, every time,
// whichever reconcile runs first: an application reading the Secret never switches
// environment. The other one is Ready=False/SecretConflict naming the owner, issues nothing and
// never says it did. Once the owner is deleted, the other one takes the name.
func TestSecretNameHasOneOwner(t *testing.T) {
	ns := namespace(t)
	onboard(t, ns)
	ctx := context.Background()
	const shared = "shared-key"
	// The production ApiKey's name sorts first; it is created a second later, so that creation
	// time, not the name, is what makes it second.
	sandbox := testfixture.APIKey("acme", "sandbox", testfixture.InNamespace(ns), testfixture.Named("zz-sandbox"),
		testfixture.WithSecretName(shared))
	create(t, sandbox)
	time.Sleep(time.Until(sandbox.CreationTimestamp.Add(1100 * time.Millisecond)))
	production := testfixture.APIKey("acme", "production", testfixture.InNamespace(ns),
		testfixture.Named("aa-production"), testfixture.WithSecretName(shared))
	create(t, production)
	secretVersions := watchVersions(t, &corev1.SecretList{}, ns, shared)

	// ownedSecret waits for a Secret other than previous, controlled by owner.
	ownedSecret := func(owner *v1alpha1.ApiKey, previous types.UID) *corev1.Secret {
		t.Helper()
		var s corev1.Secret
		poll.Until(t, timeout, "Secret "+shared+" of "+owner.Name, func() (bool, string) {
			if !get(t, ns, shared, &s) {
				return false, "no Secret"
			}
			return s.UID != previous && metav1.IsControlledBy(&s, owner) && len(s.Data["apiKey"]) > 0,
				fmt.Sprintf("uid %s owners %v", s.UID, s.OwnerReferences)
		})
		return &s
	}
	refused := func() {
		t.Helper()
		poll.Until(t, timeout, "aa-production refused", func() (bool, string) {
			get(t, ns, "aa-production", production)
			c := meta.FindStatusCondition(production.Status.Conditions, v1alpha1.ConditionReady)
			return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonSecretConflict &&
				c.ObservedGeneration == production.Generation &&
				strings.Contains(c.Message, "ApiKey zz-sandbox"), c.String()
		})
	}

	var previous types.UID
	for i := range 5 {
		s := ownedSecret(sandbox, previous)
		if environment := string(s.Data["environment"]); environment != "sandbox" {
			t.Fatalf("round %d: Secret of environment %s", i, environment)
		}
		refused()
		previous = s.UID
		if err := env.k8s.Delete(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	ownedSecret(sandbox, previous)
	refused()
	waitEvent(t, ns, "ApiKey", "aa-production", "Warning SecretConflict: Secret "+shared+" belongs to ApiKey zz-sandbox")
	waitEvent(t, ns, "ApiKey", "zz-sandbox", "Warning SecretDeleted: Secret "+shared+" was deleted: key ")
	for _, e := range eventsOf(t, ns, "ApiKey", "aa-production") {
		if !strings.HasPrefix(e, "Warning SecretConflict: ") {
			t.Fatalf("the ApiKey that owns no Secret recorded %q", e)
		}
	}
	var issued int
	if err := env.db.Pool.QueryRow(ctx, `SELECT count(*) FROM api_keys WHERE source = $1`,
		ns+"/aa-production").Scan(&issued); err != nil {
		t.Fatal(err)
	}
	if issued != 0 || production.Status.KeyPrefix != "" {
		t.Fatalf("the ApiKey that owns no Secret: %d keys in the database, status %+v", issued, production.Status)
	}
	for _, o := range secretVersions() {
		if s := o.(*corev1.Secret); string(s.Data["environment"]) != "sandbox" {
			t.Fatalf("Secret %s was of environment %q once", shared, s.Data["environment"])
		}
	}

	// The owner goes. envtest runs no garbage collector: the test deletes the Secret the owner
	// controlled, as the cluster's garbage collector does once the owner is gone.
	if err := env.k8s.Delete(ctx, sandbox); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, timeout, "zz-sandbox deleted", func() (bool, string) {
		return !get(t, ns, "zz-sandbox", &v1alpha1.ApiKey{}), ""
	})
	var s corev1.Secret
	get(t, ns, shared, &s)
	if err := env.k8s.Delete(ctx, &s); err != nil {
		t.Fatal(err)
	}
	taken := ownedSecret(production, s.UID)
	if environment := string(taken.Data["environment"]); environment != "production" {
		t.Fatalf("Secret taken over by aa-production is of environment %s", environment)
	}
	key := string(taken.Data["apiKey"])
	keyOwnedBy(t, key, ns, "aa-production")
	poll.Until(t, timeout, "the new owner's key works", func() (bool, string) {
		return ping(t, "production", key) == 200, ""
	})
}
