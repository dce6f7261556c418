package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/provisioning"
)

// CatalogStockReconciler records a Catalog's production stock in status.stock. Stock changes
// with orders, which no watch sees, so each Catalog is counted again every
// Options.StockRefresh; the status is written only when the counts changed. It is a controller
// of its own so that a count never re-applies the catalog's products, and the catalog's own
// reconciler ignores its writes (stockOnly).
type CatalogStockReconciler struct {
	client.Client
	Provisioner *provisioning.Provisioner
	Options     Options
}

// Reconcile counts the catalog's stock and patches status.stock when it changed.
func (r *CatalogStockReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var c v1alpha1.Catalog
	if err := r.Get(ctx, req.NamespacedName, &c); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !c.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	counted, err := r.Provisioner.CatalogStock(ctx, c.Namespace, c.Name)
	if provisioning.IsNotFound(err) {
		// Not applied yet (or invalid from the start): the catalog's reconciler writes it.
		return ctrl.Result{RequeueAfter: r.Options.NotReadyRetry}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("count stock of catalog %s/%s: %w", c.Namespace, c.Name, err)
	}
	stock := &v1alpha1.CatalogStock{LowThreshold: clampInt32(counted.Threshold), Low: clampInt32(counted.Low),
		OutOfStock: clampInt32(counted.OutOfStock)}
	for _, p := range counted.Lowest {
		stock.Lowest = append(stock.Lowest, v1alpha1.ProductStock{ProductCode: p.ProductCode,
			Available: clampInt32(p.Available)})
	}
	if !equality.Semantic.DeepEqual(c.Status.Stock, stock) {
		before := c.DeepCopy()
		c.Status.Stock = stock
		if err := patchStatus(ctx, r.Client, before, &c); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: r.Options.StockRefresh}, nil
}

func clampInt32(n int64) int32 { return int32(min(max(n, 0), 1<<31-1)) }

// SetupWithManager counts a Catalog when it is created or its spec changes (the threshold, the
// products), then every StockRefresh.
func (r *CatalogStockReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Catalog{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("catalogstock").
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Options.Concurrency}).
		Complete(r)
}

// stockOnly drops the updates of a Catalog that changed nothing but status.stock: the
// catalog's reconciler has nothing to do about them, and without this each count that changed
// would re-apply the catalog's products.
var stockOnly = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	older, ok1 := e.ObjectOld.(*v1alpha1.Catalog)
	newer, ok2 := e.ObjectNew.(*v1alpha1.Catalog)
	if !ok1 || !ok2 || equality.Semantic.DeepEqual(older.Status.Stock, newer.Status.Stock) {
		return true
	}
	o, n := older.DeepCopy(), newer.DeepCopy()
	o.Status.Stock, n.Status.Stock = nil, nil
	o.ResourceVersion, n.ResourceVersion = "", ""
	o.ManagedFields, n.ManagedFields = nil, nil
	return !equality.Semantic.DeepEqual(o, n)
}}
