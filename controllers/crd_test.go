package controllers_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestPrinterColumnsAndShortNames reads the CRDs as the API server serves them: `kubectl get`
// shows every kind's Ready and Age, an ApiKey's Secret, a Catalog's low and out-of-stock
// products, and every kind answers to a short name starting with cp (so `kubectl get
// cpptn,cpcat,cpkey,cpwallet,cptopup` lists a namespace's codeport resources) and to the
// codeport category.
func TestPrinterColumnsAndShortNames(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		shortName string
		columns   map[string]string // name: JSONPath
	}{
		"partners": {"cpptn", map[string]string{"Ready": readyPath}},
		"catalogs": {"cpcat", map[string]string{"Ready": readyPath, "Low": ".status.stock.low",
			"Out": ".status.stock.outOfStock"}},
		"apikeys": {"cpkey", map[string]string{"Ready": readyPath, "Secret": ".spec.secretName"}},
		"wallets": {"cpwallet", map[string]string{"Ready": readyPath}},
		"wallettopups": {"cptopup", map[string]string{"Ready": readyPath, "Wallet": ".spec.walletRef.name",
			"Amount": ".spec.amount", "Currency": ".spec.currency", "Applied": ".status.appliedAt"}},
	}
	for plural, w := range want {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(context.Background(), client.ObjectKey{Name: plural + ".codeport.dev"}, &crd); err != nil {
			t.Fatal(err)
		}
		names := crd.Spec.Names
		if !slices.Contains(names.ShortNames, w.shortName) || !slices.Contains(names.Categories, "codeport") {
			t.Errorf("%s: short names %v, categories %v", plural, names.ShortNames, names.Categories)
		}
		for _, s := range names.ShortNames {
			if !strings.HasPrefix(s, "cp") && s != "ptn" { // ptn: kept from before cpptn
				t.Errorf("%s: short name %q does not start with cp", plural, s)
			}
		}
		columns := crd.Spec.Versions[0].AdditionalPrinterColumns
		got := map[string]string{}
		for _, col := range columns {
			got[col.Name] = col.JSONPath
		}
		for name, path := range w.columns {
			if got[name] != path {
				t.Errorf("%s: column %s is %q, want %q", plural, name, got[name], path)
			}
		}
		if last := columns[len(columns)-1]; last.Name != "Age" || last.Type != "date" ||
			last.JSONPath != ".metadata.creationTimestamp" {
			t.Errorf("%s: last column %+v, want Age", plural, last)
		}
	}
}

const readyPath = `.status.conditions[?(@.type=="Ready")].status`
