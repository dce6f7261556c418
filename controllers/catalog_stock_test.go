package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/controllers"
	"github.com/codeport/codeport/internal/codes/codestest"
	"github.com/codeport/codeport/internal/test/poll"
)

// TestCatalogStockStatus: the operator counts a Catalog's production stock into status.stock
// (low and out-of-stock products, the lowest ones first) and counts it again on its own, as
// orders and imports change it without touching the Catalog; while nothing changes, the counts
// that follow write nothing.
func TestCatalogStockStatus(t *testing.T) {
	ns := namespace(t)
	// Codes of their own: stock is shared by every catalog holding a product.
	const plenty, few, none = "40000000000001", "40000000000002", "40000000000003"
	threshold := int32(3)
	c := catalogObj(ns, product(plenty, 500), product(few, 500), product(none, 500))
	c.Spec.StockLowThreshold = &threshold
	create(t, c)
	stockOf := func() (string, *v1alpha1.Catalog) {
		var got v1alpha1.Catalog
		get(t, ns, "eu", &got)
		if got.Status.Stock == nil {
			return "none", &got
		}
		s := got.Status.Stock
		var lowest []string
		for _, p := range s.Lowest {
			lowest = append(lowest, fmt.Sprintf("%s:%d", p.ProductCode, p.Available))
		}
		return fmt.Sprintf("threshold %d low %d out %d lowest %s", s.LowThreshold, s.Low, s.OutOfStock,
			strings.Join(lowest, ",")), &got
	}
	want := fmt.Sprintf("threshold 3 low 3 out 3 lowest %s:0,%s:0,%s:0", plenty, few, none)
	poll.Until(t, timeout, "stock of a catalog without codes", func() (bool, string) {
		got, _ := stockOf()
		return got == want, got
	})

	codestest.Stock(t, env.db.Pool, env.cipher, plenty, "STATUS-"+plenty, 5)
	codestest.Stock(t, env.db.Pool, env.cipher, few, "STATUS-"+few, 2)
	want = fmt.Sprintf("threshold 3 low 2 out 1 lowest %s:0,%s:2", none, few)
	poll.Until(t, timeout, "stock counted again after an import", func() (bool, string) {
		got, _ := stockOf()
		return got == want, got
	})

	// Nothing changes now: the counts that follow write nothing.
	statusPath := "/apis/codeport.dev/v1alpha1/namespaces/" + ns + "/catalogs/eu/status"
	writes := env.writes.count("PATCH", statusPath)
	// Every Catalog of the cluster is counted each refresh: three rounds of them all.
	var all v1alpha1.CatalogList
	if err := env.k8s.List(context.Background(), &all); err != nil {
		t.Fatal(err)
	}
	counted, rounds := stockCounts(t), float64(3*len(all.Items))
	poll.Until(t, timeout, "three more counts of every catalog", func() (bool, string) {
		n := stockCounts(t)
		return n >= counted+rounds, fmt.Sprintf("%v counts before, %v now, want %v more", counted, n, rounds)
	})
	if after := env.writes.count("PATCH", statusPath); after != writes {
		t.Fatalf("%d status writes while the stock did not change", after-writes)
	}
	if got, _ := stockOf(); got != want {
		t.Fatalf("stock %s, want %s", got, want)
	}
}

// stockCounts is how many times the catalog stock controller has reconciled, in every test.
func stockCounts(t *testing.T) float64 {
	t.Helper()
	return controllerCounter(t, "controller_runtime_reconcile_total", "catalogstock")
}

// controllerCounter sums controller-runtime's counter metric of the named controller over every
// operator of the suite (they share the metrics registry).
func controllerCounter(t *testing.T, metric, controller string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// TestCatalogReconcilerIgnoresStockCounts: an update of a Catalog that changed only
// status.stock does not reach the catalog's reconciler (it would re-apply every product for a
// count); any other change does.
func TestCatalogReconcilerIgnoresStockCounts(t *testing.T) {
	base := catalogObj("ns", product("10000000000001", 500))
	counted := func(low int32) *v1alpha1.Catalog {
		c := base.DeepCopy()
		c.ResourceVersion = fmt.Sprint(low)
		c.Status.Stock = &v1alpha1.CatalogStock{LowThreshold: 3, Low: low}
		return c
	}
	tests := []struct {
		name   string
		change func(c *v1alpha1.Catalog)
		want   bool
	}{
		{"the stock only", func(*v1alpha1.Catalog) {}, false},
		{"the stock and a condition", func(c *v1alpha1.Catalog) {
			c.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse}}
		}, true},
		{"the stock and the spec", func(c *v1alpha1.Catalog) { c.Generation++ }, true},
		{"the stock and an annotation", func(c *v1alpha1.Catalog) { c.Annotations = map[string]string{"a": "b"} }, true},
	}
	for _, tt := range tests {
		newer := counted(1)
		tt.change(newer)
		if got := controllers.StockOnly.Update(event.UpdateEvent{ObjectOld: counted(0), ObjectNew: newer}); got != tt.want {
			t.Errorf("%s: reaches the reconciler %v, want %v", tt.name, got, tt.want)
		}
	}
	same := counted(0)
	same.Annotations = map[string]string{"a": "b"}
	if !controllers.StockOnly.Update(event.UpdateEvent{ObjectOld: counted(0), ObjectNew: same}) {
		t.Error("an update with the same stock and another annotation does not reach the reconciler")
	}
}
