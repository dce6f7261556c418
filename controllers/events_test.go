package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// eventsOf returns the events recorded about the kind/name in ns, as "Type Reason: note".
func eventsOf(t *testing.T, ns, kind, name string) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := env.k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind == kind && e.Regarding.Name == name {
			out = append(out, e.Type+" "+e.Reason+": "+e.Note)
		}
	}
	return out
}

// waitEvent waits until an event of kind/name starts with prefix ("Type Reason: note…").
func waitEvent(t *testing.T, ns, kind, name, prefix string) {
	t.Helper()
	poll.Until(t, timeout, kind+" "+name+" event "+prefix, func() (bool, string) {
		got := eventsOf(t, ns, kind, name)
		for _, e := range got {
			if strings.HasPrefix(e, prefix) {
				return true, ""
			}
		}
		return false, fmt.Sprint(got)
	})
}

// TestEventsRecordChanges: Partner, Catalog and Wallet record a Normal event when a generation
// is applied (and a Wallet one per top-up credited) and a Warning with Ready's reason when they
// stop being Ready; reconciles that change nothing record nothing.
func TestEventsRecordChanges(t *testing.T) {
	ns := namespace(t)
	onboard(t, ns)
	waitEvent(t, ns, "Partner", "acme",
		"Normal Applied: Generation 1 applied: Sandbox and production accounts provisioned")
	waitEvent(t, ns, "Catalog", "eu", "Normal Applied: Generation 1 applied: 2 products in service")

	w := testfixture.Wallet("acme", "sandbox", testfixture.InNamespace(ns),
		testfixture.WithTopUps(testfixture.TopUp("wire-1", "EUR", "10.00")))
	create(t, w)
	waitEvent(t, ns, "Wallet", "acme-sandbox", "Normal TopUpApplied: Top-up wire-1 credited 10.00 EUR")
	waitEvent(t, ns, "Wallet", "acme-sandbox", "Normal Applied: Generation 1 applied")

	// Metadata-only updates reconcile without changing anything: no new events.
	partnerEvents := len(eventsOf(t, ns, "Partner", "acme"))
	var p v1alpha1.Partner
	for i := range 3 {
		update(t, ns, "acme", &p, func() { p.Annotations = map[string]string{"touched": fmt.Sprint(i)} })
	}
	time.Sleep(time.Second)
	if got := eventsOf(t, ns, "Partner", "acme"); len(got) != partnerEvents {
		t.Fatalf("reconciles with nothing to change recorded events: %v", got)
	}

	// Failures are Warnings with Ready's reason.
	var c v1alpha1.Catalog
	update(t, ns, "eu", &c, func() {
		c.Spec.ProductsFrom = []v1alpha1.ProductsSource{
			{ConfigMapRef: v1alpha1.ConfigMapKeyRef{Name: "missing-feed", Key: "products.json"}},
		}
	})
	waitEvent(t, ns, "Catalog", "eu", "Warning ConfigMapNotFound: ConfigMap missing-feed not found")
	orphan := testfixture.Wallet("nobody", "sandbox", testfixture.InNamespace(ns), testfixture.Named("orphan"))
	create(t, orphan)
	waitEvent(t, ns, "Wallet", "orphan", "Warning PartnerNotFound: Partner not found")
	update(t, ns, "acme", &p, func() { p.Spec.CatalogRef = &v1alpha1.LocalObjectReference{Name: "nowhere"} })
	waitEvent(t, ns, "Partner", "acme", "Warning CatalogNotFound:")
	for _, e := range eventsOf(t, ns, "Partner", "acme") {
		if strings.HasPrefix(e, corev1.EventTypeNormal+" Applied: Generation "+fmt.Sprint(p.Generation)) {
			t.Fatalf("a generation that is not Ready was recorded as applied: %s", e)
		}
	}
}
