package controllers_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/test/poll"
)

// TestWatchNamespaces: an operator limited to one namespace (--watch-namespaces) reconciles the
// Partner there and leaves alone, in the API server and in the database, the Partner of a
// namespace it does not watch. No other operator sees either namespace.
func TestWatchNamespaces(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	watched, unwatched := scopedNamespaces[0], scopedNamespaces[1]
	for _, ns := range scopedNamespaces {
		create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	if err := startManagerIn(ctx, nil, []string{watched}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range scopedNamespaces {
		create(t, catalogObj(ns, product("10000000000001", 2000)))
		create(t, partnerObj(ns))
	}
	var p v1alpha1.Partner
	poll.Until(t, timeout, "partner of the watched namespace ready", func() (bool, string) {
		get(t, watched, "acme", &p)
		ok, detail := ready(p.Status.Conditions, p.Generation)
		return ok && p.Status.Accounts.Production != "", detail
	})
	if _, err := store.AccountOf(ctx, env.db.Pool, watched, "acme", "production"); err != nil {
		t.Fatalf("account of the watched partner: %v", err)
	}
	// The watched one took a few seconds at most; give the other as long again, and more.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		var other v1alpha1.Partner
		get(t, unwatched, "acme", &other)
		if len(other.Finalizers) > 0 || len(other.Status.Conditions) > 0 {
			t.Fatalf("partner of an unwatched namespace reconciled: finalizers %v, status %+v",
				other.Finalizers, other.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
	_, err := store.AccountOf(ctx, env.db.Pool, unwatched, "acme", "production")
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("partner of an unwatched namespace provisioned: %v", err)
	}
}
