package controllers_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/controllers"
	"github.com/codeport/codeport/internal/test/poll"
)

// TestCatalogValidityWindow: a Catalog is Ready only inside its window [validFrom, validTo),
// where the API serves its products. Outside it, scheduled or expired, it is Ready=False with
// OutsideValidityWindow, no product in service and a Warning event, and the status turns at
// each edge of the window without any change to the spec. A scheduled catalog is not a fault: it
// does not age the oldest-not-ready gauge, and the partners bound to it stay bound and Ready,
// their CatalogResolved naming the window.
func TestCatalogValidityWindow(t *testing.T) {
	ns := namespace(t)
	sandboxKey, _ := onboard(t, ns) // catalog eu: 10000000000001 and 10000000000002, valid since an hour ago
	reg := prometheus.NewRegistry()
	reg.MustRegister(controllers.NewReadinessCollector(env.mgr.GetCache(), ns))
	age := "codeport_operator_oldest_not_ready_seconds{kind=Catalog}"
	var c v1alpha1.Catalog
	status := func() (*metav1.Condition, int32) {
		get(t, ns, "eu", &c)
		return meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionReady), c.Status.ProductCount
	}
	waitStatus := func(what string, ok func(cond *metav1.Condition, products int32) bool) {
		t.Helper()
		poll.Until(t, timeout, what, func() (bool, string) {
			cond, products := status()
			return cond != nil && cond.ObservedGeneration == c.Generation && ok(cond, products),
				fmt.Sprintf("%v, %d products", cond, products)
		})
	}
	outside := func(phrase string) func(*metav1.Condition, int32) bool {
		return func(cond *metav1.Condition, products int32) bool {
			return cond.Status == metav1.ConditionFalse && cond.Reason == v1alpha1.ReasonOutsideValidityWindow &&
				strings.Contains(cond.Message, "2 products provisioned, none in service: "+phrase) && products == 0
		}
	}
	inService := func(cond *metav1.Condition, products int32) bool {
		return cond.Status == metav1.ConditionTrue && products == 2
	}
	// The partner bound to eu stays bound and Ready either way; its CatalogResolved says
	// whether eu serves anything now (phrase "": it does).
	waitPartner := func(what, phrase string) {
		t.Helper()
		poll.Until(t, timeout, what+": the partner says so", func() (bool, string) {
			var p v1alpha1.Partner
			get(t, ns, "acme", &p)
			resolved := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionCatalogResolved)
			ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
			if resolved == nil || ready == nil ||
				resolved.Status != metav1.ConditionTrue || ready.Status != metav1.ConditionTrue {
				return false, fmt.Sprintf("%v; %v", resolved, ready)
			}
			if phrase == "" {
				return resolved.Reason == v1alpha1.ReasonReconciled && resolved.Message == `Catalog "eu" bound` &&
					ready.Message == "Sandbox and production accounts provisioned", fmt.Sprintf("%v; %v", resolved, ready)
			}
			return resolved.Reason == v1alpha1.ReasonOutsideValidityWindow &&
					strings.HasPrefix(resolved.Message, `Catalog "eu" bound; no product in service: `+phrase) &&
					strings.Contains(ready.Message, `; Catalog "eu" has no product in service: `+phrase),
				fmt.Sprintf("%v; %v", resolved, ready)
		})
	}
	waitPartner("in its window", "")

	for _, step := range []struct {
		name     string
		from, to time.Time
		phrase   string
	}{
		{"scheduled for 2036", time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC), time.Time{},
			"the catalog is valid from 2036-01-01T00:00:00Z"},
		{"expired", time.Now().Add(-2 * time.Hour), time.Now().Add(-time.Hour).Truncate(time.Second),
			"the catalog was valid until "},
	} {
		update(t, ns, "eu", &c, func() {
			c.Spec.ValidFrom = metav1.NewTime(step.from)
			c.Spec.ValidTo = nil
			if !step.to.IsZero() {
				c.Spec.ValidTo = &metav1.Time{Time: step.to}
			}
		})
		waitStatus(step.name+": outside its window", outside(step.phrase))
		waitEvent(t, ns, "Catalog", "eu", "Warning OutsideValidityWindow: 2 products provisioned, none in service: "+
			step.phrase)
		waitPartner(step.name, step.phrase)
		waitServed(t, sandboxKey, "10000000000001", false)
		if g := gauges(t, reg); g[age] != 0 {
			t.Fatalf("%s: a catalog outside its window ages the not-ready gauge: %v", step.name, g)
		}
	}

	// Edges: opening in ten seconds (time enough to see it scheduled on a loaded machine), then
	// closing ten seconds later, with no spec change between.
	opens := time.Now().Add(10 * time.Second).Truncate(time.Second)
	closes := opens.Add(10 * time.Second)
	update(t, ns, "eu", &c, func() {
		c.Spec.ValidFrom = metav1.NewTime(opens)
		c.Spec.ValidTo = &metav1.Time{Time: closes}
	})
	waitStatus("not open yet", outside("the catalog is valid from "+opens.UTC().Format(time.RFC3339)))
	waitStatus("open at validFrom", inService)
	waitServed(t, sandboxKey, "10000000000001", true)
	waitStatus("closed at validTo", outside("the catalog was valid until "+closes.UTC().Format(time.RFC3339)))
	waitPartner("closed at validTo", "the catalog was valid until "+closes.UTC().Format(time.RFC3339))
	waitServed(t, sandboxKey, "10000000000001", false)

	update(t, ns, "eu", &c, func() {
		c.Spec.ValidFrom = metav1.NewTime(time.Now().Add(-time.Hour))
		c.Spec.ValidTo = nil
	})
	waitStatus("back in its window", inService)
	waitPartner("back in its window", "")
}
