package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The operator's footprint follows its own objects, not the cluster's:
//
//   - Secrets and ConfigMaps enter the manager's cache only with the label ManagedByLabel =
//     ManagedByValue, which the operator sets on the key Secrets it creates (and adds to key
//     Secrets it owns that lack it, e.g. ones written by an older version). Every other Secret or
//     ConfigMap in the cluster stays out of it.
//   - Objects referenced but not owned (a Partner's webhook Secret, a Catalog's productsFrom
//     ConfigMaps, a Secret in the way of an ApiKey's secretName) are read uncached, from the API
//     server, when the referring object reconciles; their changes reach it through a
//     metadata-only watch (name, namespace, owners: no data, labels, annotations or
//     managedFields are kept).
//   - managedFields are stripped from everything cached.

// ManagedByLabel marks the Secrets the operator created and owns (ApiKey key Secrets). Platform
// engineers can select them with `kubectl get secrets -l app.kubernetes.io/managed-by=codeport-operator`;
// a key Secret without it is found (uncached) and labelled again, never treated as missing.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "codeport-operator"
)

// CacheOptions are the manager's cache options: Secrets and ConfigMaps only with the operator's
// label, managedFields stripped, and with namespaces given only those namespaces (see
// WatchNamespaces). operator.go and the controller tests build their manager with them.
// everything caches every Secret and ConfigMap of the cluster in full: it exists only as the
// memory benchmark's baseline.
func CacheOptions(everything bool, namespaces ...string) cache.Options {
	opts := cache.Options{
		DefaultTransform:  cache.TransformStripManagedFields(),
		DefaultNamespaces: namespaceScope(namespaces),
	}
	if everything {
		return opts
	}
	owned := labels.SelectorFromSet(labels.Set{ManagedByLabel: ManagedByValue})
	opts.ByObject = map[client.Object]cache.ByObject{
		&corev1.Secret{}:    {Label: owned},
		&corev1.ConfigMap{}: {Label: owned},
	}
	return opts
}

// referenceCache holds the metadata of every Secret and ConfigMap, reduced to what tells a
// change apart (name, namespace, uid, resourceVersion, owners, deletion), so that a change of a
// referenced object reaches the objects referring to it. It is a cache of its own because the
// manager's cache applies one label selector per kind, to full and metadata-only informers
// alike. It starts with the manager's caches, before any controller.
type referenceCache struct{ cache.Cache }

// GetCache makes the manager start it with its caches and wait for it to sync.
func (c referenceCache) GetCache() cache.Cache { return c.Cache }

func newReferenceCache(mgr ctrl.Manager, namespaces []string) (referenceCache, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultTransform: minimalMetadata, DefaultNamespaces: namespaceScope(namespaces)})
	if err != nil {
		return referenceCache{}, fmt.Errorf("reference cache: %w", err)
	}
	rc := referenceCache{c}
	if err := mgr.Add(rc); err != nil {
		return referenceCache{}, fmt.Errorf("reference cache: %w", err)
	}
	return rc, nil
}

// namespaceScope limits a cache to namespaces; none leaves it cluster-wide. Each cache of the
// operator is limited the same way, so that in namespaced mode it lists and watches only where
// its Roles allow it to: an informer outside them would fail to list, and its controller would
// never start.
func namespaceScope(namespaces []string) map[string]cache.Config {
	if len(namespaces) == 0 {
		return nil
	}
	scope := make(map[string]cache.Config, len(namespaces))
	for _, ns := range namespaces {
		scope[ns] = cache.Config{}
	}
	return scope
}

// minimalMetadata keeps of an object's metadata only what identifies it and its version.
func minimalMetadata(in any) (any, error) {
	m, ok := in.(*metav1.PartialObjectMetadata)
	if !ok {
		return in, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		OwnerReferences: m.OwnerReferences, DeletionTimestamp: m.DeletionTimestamp,
	}}, nil
}

// metadataOf is the metadata-only form of a kind, for watches through the reference cache.
func metadataOf(kind string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind}}
}

// Field indexes of the cache: which objects refer to a name.
const (
	indexSecretName     = "spec.secretName"
	indexPartnerRef     = "spec.partnerRef.name"
	indexCatalogRef     = "spec.catalogRef.name"
	indexWebhookSecret  = "spec.webhook.secretRef.name" //nolint:gosec // a field path, not a credential
	indexProductsFromCM = "spec.productsFrom.configMapRef.name"
	// indexKeyDigest indexes the cached key Secrets by the hex SHA-256 of their key.
	indexKeyDigest = "data.apiKey.sha256"
)

// referrers lists, in obj's namespace, the objects of list's kind whose index field holds obj's
// name, as reconcile requests.
func referrers(
	ctx context.Context, c client.Reader, list client.ObjectList, index string, obj client.Object,
) []ctrl.Request {
	err := c.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{index: obj.GetName()})
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list referring objects", "index", index, "name", obj.GetName())
		return nil
	}
	var out []ctrl.Request
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		if obj, ok := o.(client.Object); ok {
			out = append(out, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
		}
		return nil
	})
	return out
}
