package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/apiserver/provisioning"
)

// CatalogReconciler provisions a Catalog's products (inline and from ConfigMaps). A catalog with
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
	products := append([]v1alpha1.CatalogProduct{}, c.Spec.Products...)
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
		products = append(products, feed...)
	}
	res, err := r.Provisioner.ApplyCatalog(ctx, c, products)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("apply catalog: %w", err)
	}
	c.Status.InvalidProducts = res.Invalid
	if len(res.Invalid) > 0 {
		codes := make([]string, 0, 5)
		for i, p := range res.Invalid {
			if i == 5 {
				codes = append(codes, fmt.Sprintf("and %d more", len(res.Invalid)-5))
				break
			}
			codes = append(codes, fmt.Sprintf("%s (%s)", p.ProductCode, p.Reason))
		}
		setCondition(&c.Status.Conditions, c.Generation, v1alpha1.ConditionReady, false, v1alpha1.ReasonInvalidProducts,
			"Invalid products, the last good catalog stays in service: "+strings.Join(codes, "; "))
		return ctrl.Result{}, nil
	}
	c.Status.ProductCount = int32(min(res.Products, 1<<30)) //nolint:gosec // bounded just above
	setCondition(&c.Status.Conditions, c.Generation, v1alpha1.ConditionReady, true, v1alpha1.ReasonReconciled,
		fmt.Sprintf("%d products in service", res.Products))
	return ctrl.Result{RequeueAfter: r.Options.Resync}, nil
}

// SetupWithManager watches Catalogs and the ConfigMaps they read products from.
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
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Catalog{}).
		WatchesRawSource(source.Kind(refs, metadataOf("ConfigMap"), handler.TypedEnqueueRequestsFromMapFunc(
			func(ctx context.Context, cm *metav1.PartialObjectMetadata) []reconcile.Request {
				return referrers(ctx, r.Client, &v1alpha1.CatalogList{}, indexProductsFromCM, cm)
			}))).
		Named("catalog").
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Options.Concurrency}).
		Complete(r)
}
