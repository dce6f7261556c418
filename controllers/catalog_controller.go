package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/provisioning"
)

// CatalogReconciler provisions a Catalog's products (inline, from ConfigMaps and from the
// CatalogShards naming it). A catalog with
// invalid products is not applied: the last good version stays in service and the status names
// the offending productCodes.
type CatalogReconciler struct {
	client.Client
	// APIReader reads productsFrom ConfigMaps: they are the user's, not the operator's, so they
	// are not in the cache; their changes arrive through the metadata-only watch of referenced
	// ConfigMaps.
	APIReader   client.Reader
	Provisioner *provisioning.Provisioner
	Recorder    events.EventRecorder
	Options     Options
}

// +kubebuilder:rbac:groups=codeport.dev,resources=catalogs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=codeport.dev,resources=catalogs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=codeport.dev,resources=catalogs/finalizers,verbs=update
// +kubebuilder:rbac:groups=codeport.dev,resources=catalogshards,verbs=get;list;watch
// +kubebuilder:rbac:groups=codeport.dev,resources=catalogshards/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch

// Reconcile is the whole flow of a Catalog: fetch → deletion → products → status.
func (r *CatalogReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var c v1alpha1.Catalog
	if err := r.Get(ctx, req.NamespacedName, &c); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := outcomeOf(&c)
	result, err := withFinalizer(ctx, r.Client, &c,
		func(ctx context.Context) error {
			if err := r.Provisioner.DeleteCatalog(ctx, c.Namespace, c.Name); err != nil {
				return fmt.Errorf("delete catalog: %w", err)
			}
			return nil
		},
		func(ctx context.Context) (ctrl.Result, error) { return r.apply(ctx, &c) },
		func() { c.Status.ObservedGeneration = c.Generation })
	recordOutcome(r.Recorder, before, &c)
	return result, err
}

func (r *CatalogReconciler) apply(ctx context.Context, c *v1alpha1.Catalog) (ctrl.Result, error) {
	sources := []provisioning.ProductSource{{Name: "Catalog " + c.Name, Products: c.Spec.Products}}
	for _, src := range c.Spec.ProductsFrom {
		var cm corev1.ConfigMap
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: src.ConfigMapRef.Name}, &cm)
		if apierrors.IsNotFound(err) {
			setCondition(&c.Status.Conditions, c.Generation, v1alpha1.ConditionReady, false, v1alpha1.ReasonConfigMapNotFound,
				fmt.Sprintf("ConfigMap %s not found; the last good catalog stays in service", src.ConfigMapRef.Name))
			return ctrl.Result{}, nil
		}
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("read ConfigMap %s: %w", src.ConfigMapRef.Name, err)
		}
		data, ok := cm.Data[src.ConfigMapRef.Key]
		if !ok {
			setCondition(&c.Status.Conditions, c.Generation, v1alpha1.ConditionReady, false, v1alpha1.ReasonConfigMapNotFound,
				fmt.Sprintf("ConfigMap %s has no key %q; the last good catalog stays in service",
					src.ConfigMapRef.Name, src.ConfigMapRef.Key))
			return ctrl.Result{}, nil
		}
		feed, err := provisioning.ParseProductFeed([]byte(data))
		if err != nil {
			setCondition(&c.Status.Conditions, c.Generation, v1alpha1.ConditionReady, false, v1alpha1.ReasonInvalidProducts,
				fmt.Sprintf("ConfigMap %s key %s: %v", src.ConfigMapRef.Name, src.ConfigMapRef.Key, err))
			return ctrl.Result{}, nil
		}
		sources = append(sources, provisioning.ProductSource{
			Name: "ConfigMap " + src.ConfigMapRef.Name + " key " + src.ConfigMapRef.Key, Products: feed})
	}
	shards, err := r.shardsOf(ctx, c)
	if err != nil {
		return ctrl.Result{}, err
	}
	sources = append(sources, shards...)
	c.Status.ShardCount = int32(min(len(shards), 1<<30))
	products, dups := provisioning.MergeProducts(sources)
	if len(dups) > 0 {
		setCondition(&c.Status.Conditions, c.Generation, v1alpha1.ConditionReady, false, v1alpha1.ReasonDuplicateProducts,
			provisioning.DuplicatesMessage(dups))
		return ctrl.Result{}, nil
	}
	res, err := r.Provisioner.ApplyCatalog(ctx, c, products)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("apply catalog: %w", err)
	}
	c.Status.InvalidProducts = res.Invalid
	if len(res.Invalid) > 0 {
		codes := make([]string, len(res.Invalid))
		for i, p := range res.Invalid {
			codes[i] = fmt.Sprintf("%s (%s)", p.ProductCode, p.Reason)
		}
		setCondition(&c.Status.Conditions, c.Generation, v1alpha1.ConditionReady, false, v1alpha1.ReasonInvalidProducts,
			"Invalid products, the last good catalog stays in service: "+listed(codes, 5))
		return ctrl.Result{}, nil
	}
	if ch := res.Change; r.Recorder != nil && len(ch.Added)+len(ch.Updated)+len(ch.Removed) > 0 {
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, eventProductsChanged, "Reconcile",
			"%d products added, %d changed, %d removed; %d in service",
			len(ch.Added), len(ch.Updated), len(ch.Removed), res.Products)
	}
	result := ctrl.Result{RequeueAfter: r.Options.Resync}
	w := windowOf(c, time.Now())
	if w.nextEdge > 0 {
		result.RequeueAfter = min(result.RequeueAfter, w.nextEdge)
	}
	if w.outside != "" {
		c.Status.ProductCount = 0
		setCondition(&c.Status.Conditions, c.Generation, v1alpha1.ConditionReady, false,
			v1alpha1.ReasonOutsideValidityWindow,
			fmt.Sprintf("%d products provisioned, none in service: %s", res.Products, w.outside))
		return result, nil
	}
	c.Status.ProductCount = int32(min(res.Products, 1<<30)) //nolint:gosec // bounded just above
	setCondition(&c.Status.Conditions, c.Generation, v1alpha1.ConditionReady, true, v1alpha1.ReasonReconciled,
		fmt.Sprintf("%d products in service", res.Products))
	return result, nil
}

// validity is where now stands in a Catalog's validity window.
type validity struct {
	// outside says why the catalog is not in service now ("" when it is).
	outside string
	// nextEdge is the time until the window next opens or closes (0: it never does again).
	nextEdge time.Duration
}

// windowOf places now in c's window [validFrom, validTo): the API serves a catalog's products
// only inside it (internal/catalog's snapshots), so its status must say so too.
func windowOf(c *v1alpha1.Catalog, now time.Time) validity {
	from := c.Spec.ValidFrom.Time
	switch {
	case now.Before(from):
		return validity{outside: "the catalog is valid from " + from.UTC().Format(time.RFC3339),
			nextEdge: from.Sub(now)}
	case c.Spec.ValidTo != nil && !now.Before(c.Spec.ValidTo.Time):
		return validity{outside: "the catalog was valid until " + c.Spec.ValidTo.UTC().Format(time.RFC3339)}
	case c.Spec.ValidTo != nil:
		return validity{nextEdge: c.Spec.ValidTo.Sub(now)}
	}
	return validity{}
}

// shardsOf returns the products of the CatalogShards naming c, in shard name order (the
// catalog's list order), from the cache, and brings each shard's status.productCount up to date.
// The shards are read without the cache's deep copy (a catalog's shards hold all its products,
// which a copy per reconcile would duplicate): nothing here or in provisioning writes to them,
// and their status is patched from a fresh object.
func (r *CatalogReconciler) shardsOf(ctx context.Context, c *v1alpha1.Catalog) ([]provisioning.ProductSource, error) {
	var list v1alpha1.CatalogShardList
	err := r.List(ctx, &list, client.InNamespace(c.Namespace), client.MatchingFields{indexCatalogRef: c.Name},
		client.UnsafeDisableDeepCopy)
	if err != nil {
		return nil, fmt.Errorf("list shards: %w", err)
	}
	slices.SortFunc(list.Items, func(a, b v1alpha1.CatalogShard) int { return strings.Compare(a.Name, b.Name) })
	out := make([]provisioning.ProductSource, 0, len(list.Items))
	for i := range list.Items {
		s := &list.Items[i]
		out = append(out, provisioning.ProductSource{Name: "CatalogShard " + s.Name, Products: s.Spec.Products})
		n := int32(len(s.Spec.Products)) //nolint:gosec // at most MaxShardProducts, enforced by the API server
		if s.Status.ProductCount == n && s.Status.ObservedGeneration == s.Generation {
			continue
		}
		status, err := json.Marshal(map[string]v1alpha1.CatalogShardStatus{
			"status": {ProductCount: n, ObservedGeneration: s.Generation}})
		if err != nil {
			return nil, fmt.Errorf("status of shard %s: %w", s.Name, err)
		}
		shard := &v1alpha1.CatalogShard{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name}}
		err = r.Status().Patch(ctx, shard, client.RawPatch(types.MergePatchType, status))
		if client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("status of shard %s: %w", s.Name, err)
		}
	}
	return out, nil
}

// SetupWithManager watches Catalogs, their CatalogShards and the ConfigMaps they read products
// from. Shards are the operator's own kind and live in its cache; a shard's change (of spec:
// status writes do not count) reconciles the catalog it names, and both catalogs when it moves.
func (r *CatalogReconciler) SetupWithManager(mgr ctrl.Manager, refs referenceCache) error {
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.Catalog{}, indexProductsFromCM,
		func(o client.Object) []string {
			var names []string
			for _, src := range o.(*v1alpha1.Catalog).Spec.ProductsFrom {
				if !slices.Contains(names, src.ConfigMapRef.Name) {
					names = append(names, src.ConfigMapRef.Name)
				}
			}
			return names
		})
	if err != nil {
		return fmt.Errorf("index Catalogs by productsFrom ConfigMap: %w", err)
	}
	err = mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.CatalogShard{}, indexCatalogRef,
		func(o client.Object) []string { return []string{o.(*v1alpha1.CatalogShard).Spec.CatalogRef.Name} })
	if err != nil {
		return fmt.Errorf("index CatalogShards by catalogRef: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Catalog{}, builder.WithPredicates(stockOnly)).
		Watches(&v1alpha1.CatalogShard{}, handler.EnqueueRequestsFromMapFunc(
			func(_ context.Context, o client.Object) []reconcile.Request {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{
					Namespace: o.GetNamespace(), Name: o.(*v1alpha1.CatalogShard).Spec.CatalogRef.Name}}}
			}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Kind(refs, metadataOf("ConfigMap"), handler.TypedEnqueueRequestsFromMapFunc(
			func(ctx context.Context, cm *metav1.PartialObjectMetadata) []reconcile.Request {
				return referrers(ctx, r.Client, &v1alpha1.CatalogList{}, indexProductsFromCM, cm)
			}))).
		Named("catalog").
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Options.Concurrency}).
		Complete(r)
}
