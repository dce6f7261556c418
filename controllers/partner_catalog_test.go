package controllers_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// TestPartnerKeepsItsCatalog: a catalogRef that cannot be bound — a typo, a Catalog not in
// service — keeps the catalog the partner serves in service, with Ready=False naming both
// catalogs and a Warning event; fixing the reference makes the partner Ready again. A partner
// never bound serves no catalog until its reference resolves.
func TestPartnerKeepsItsCatalog(t *testing.T) {
	ns := namespace(t)
	sandboxKey, _ := onboard(t, ns) // Partner acme bound to Catalog eu
	// A Catalog whose products cannot be read is never in service.
	broken := testfixture.Catalog("broken", testfixture.InNamespace(ns))
	broken.Spec.ProductsFrom = []v1alpha1.ProductsSource{
		{ConfigMapRef: v1alpha1.ConfigMapKeyRef{Name: "missing-feed", Key: "products.json"}},
	}
	create(t, broken)
	var p v1alpha1.Partner
	waitPartner := func(what, reason string, parts ...string) {
		t.Helper()
		poll.Until(t, timeout, what, func() (bool, string) {
			get(t, ns, "acme", &p)
			c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
			if c == nil || c.ObservedGeneration != p.Generation || c.Reason != reason {
				return false, c.String()
			}
			for _, part := range parts {
				if !strings.Contains(c.Message, part) {
					return false, c.Message
				}
			}
			return true, ""
		})
	}
	for _, c := range []struct {
		name, ref, reason, problem string
	}{
		{"a typo", "ue", v1alpha1.ReasonCatalogNotFound,
			`Catalog "ue" not found in namespace ` + ns + `: create it or fix spec.catalogRef`},
		{"a Catalog not in service", "broken", v1alpha1.ReasonCatalogNotReady,
			`Catalog "broken" is not in service yet: see its Ready condition`},
	} {
		update(t, ns, "acme", &p, func() { p.Spec.CatalogRef = &v1alpha1.LocalObjectReference{Name: c.ref} })
		kept := `Catalog "eu" stays in service until it is`
		waitPartner(c.name+": Ready=False naming both catalogs", c.reason, c.problem, kept)
		waitEvent(t, ns, "Partner", "acme", "Warning "+c.reason+": Accounts provisioned; "+c.problem+"; "+kept)
		resolved := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionCatalogResolved)
		if resolved == nil || resolved.Status != metav1.ConditionFalse || resolved.Reason != c.reason {
			t.Fatalf("%s: CatalogResolved %v", c.name, resolved)
		}
		waitServed(t, sandboxKey, "10000000000001", true)
	}
	update(t, ns, "acme", &p, func() { p.Spec.CatalogRef = &v1alpha1.LocalObjectReference{Name: "eu"} })
	waitPartner("the reference fixed", v1alpha1.ReasonReconciled)

	create(t, testfixture.Partner("beta", testfixture.InNamespace(ns), testfixture.WithContact("Beta", "ops@beta.example"),
		testfixture.WithCatalogRef("missing"), testfixture.WithAllowlist("127.0.0.1/32")))
	poll.Until(t, timeout, "a partner never bound", func() (bool, string) {
		var beta v1alpha1.Partner
		get(t, ns, "beta", &beta)
		c := meta.FindStatusCondition(beta.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == v1alpha1.ReasonCatalogNotFound &&
			strings.HasSuffix(c.Message, "; the partner serves no catalog until it is"), c.String()
	})
}
