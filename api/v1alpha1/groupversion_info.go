package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of these resources.
var GroupVersion = schema.GroupVersion{Group: "codeport.dev", Version: "v1alpha1"}

// AddToScheme adds the types of this package to a runtime.Scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&Partner{}, &PartnerList{},
		&Catalog{}, &CatalogList{},
		&CatalogShard{}, &CatalogShardList{},
		&ApiKey{}, &ApiKeyList{},
		&Wallet{}, &WalletList{},
		&WalletTopUp{}, &WalletTopUpList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
