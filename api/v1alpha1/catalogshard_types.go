package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxShardProducts is the most products one CatalogShard holds. A shard of that many realistic
// products (two localisations with a description and redemption instructions, about 930 bytes
// of JSON each) takes about half of etcd's 1.5 MiB request limit once server-side apply has
// added its managedFields, which roughly double it; twice as many would not fit. See
// docs/catalogs.md for the measured sizes and the smaller shards client-side `kubectl apply`
// needs.
const MaxShardProducts = 500

// CatalogShardSpec is one slice of a large Catalog's products.
//
// A shard names its Catalog (catalogRef) rather than a Catalog selecting its shards: each shard
// is a plain file that says where it belongs, so GitOps tools (Argo CD, Flux, kubectl apply -f
// dir/) add, change or prune a slice of the catalog by adding, editing or deleting one file,
// without touching the Catalog; a shard can never be claimed by two catalogs, and a typo in
// one shard cannot pull or drop the products of the others. This is the same pattern as a
// Partner's catalogRef.
type CatalogShardSpec struct {
	// CatalogRef names the Catalog (same namespace) whose products this shard adds to. Shards
	// in other namespaces are never read.
	CatalogRef LocalObjectReference `json:"catalogRef"`

	// Products of this shard, with the same fields and rules as a Catalog's spec.products. A
	// productCode appears once per shard (refused by the API server otherwise); a productCode
	// in two shards of one catalog, or in a shard and the catalog itself, makes the Catalog
	// Ready=False (DuplicateProducts) until one is removed.
	// +optional
	// +listType=map
	// +listMapKey=productCode
	// +kubebuilder:validation:MaxItems=500
	Products []CatalogProduct `json:"products,omitempty"`
}

// CatalogShard holds part of a Catalog's products, so that catalogs of tens of thousands of
// products stay within the API server's object size limit: split them into shards of at most
// 500 products, each naming the Catalog, and apply them with `kubectl apply --server-side`
// (client-side apply's last-applied-configuration annotation holds only about 250 realistic
// products). The Catalog serves the union of its inline products,
// its productsFrom ConfigMaps and all its shards.
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=cpshard,categories=codeport
// +kubebuilder:printcolumn:name="Catalog",type=string,JSONPath=`.spec.catalogRef.name`
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Products",type=integer,JSONPath=`.status.productCount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CatalogShard struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CatalogShardSpec   `json:"spec"`
	Status CatalogShardStatus `json:"status,omitempty"`
}

// CatalogShardStatus is what the operator last read from the shard.
type CatalogShardStatus struct {
	// ProductCount is the number of products in spec.products, as last read by the Catalog's
	// reconcile.
	// +optional
	ProductCount int32 `json:"productCount,omitempty"`
	// ObservedGeneration is the generation that productCount describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// CatalogShardList is a list of CatalogShards.
// +kubebuilder:object:root=true
type CatalogShardList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CatalogShard `json:"items"`
}
