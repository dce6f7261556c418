package charts_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// kustomize builds the kustomization in config/<dir> into its objects.
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).
		Run(filesys.MakeFsOnDisk(), filepath.Join("..", "config", dir))
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	out, err := resMap.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return objects(t, string(out))
}

// rendered is the output of helm template, by "Kind/name".
type rendered map[string]*unstructured.Unstructured

// render runs helm template on the chart with --set flags (and any other helm template flags
// given as "--flag=value") and fails the test when helm does.
func render(t *testing.T, flags ...string) rendered {
	t.Helper()
	out, err := renderErr(t, flags...)
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", flags, err, out)
	}
	objs := rendered{}
	for _, o := range objects(t, out) {
		objs[o.GetKind()+"/"+o.GetName()] = o
	}
	return objs
}

// renderErr runs helm template and returns its output and error.
func renderErr(t *testing.T, flags ...string) (string, error) {
	t.Helper()
	args := []string{"template", "codeport", chart, "--namespace", "codeport-system"}
	for _, f := range flags {
		if len(f) > 2 && f[:2] == "--" {
			args = append(args, f)
		} else {
			args = append(args, "--set", f)
		}
	}
	return helm(t, nil, args...)
}

// installTestCRDs creates third-party CRDs from testdata/crds (the Prometheus Operator's, Gateway
// API's, CloudNativePG's; see testdata/crds/README.md), unless an earlier test on the shared
// server did, and waits until they are served.
func installTestCRDs(t *testing.T, c client.Client, files ...string) {
	t.Helper()
	ctx := context.Background()
	for _, f := range files {
		src, err := os.ReadFile(filepath.Join("testdata", "crds", f))
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(src, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := c.Create(ctx, &crd); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s: %v", f, err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			if err := c.Get(ctx, client.ObjectKeyFromObject(&crd), &crd); err != nil {
				t.Fatal(err)
			}
			if established(&crd) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("CRD %s not established: %v", crd.Name, crd.Status.Conditions)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// createStrictly creates rendered objects with a server-side dry run that refuses unknown and
// duplicate fields, which a plain create (and helm) would silently drop.
func createStrictly(t *testing.T, c client.Client, objs ...*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o.DeepCopy(), client.DryRunAll,
			client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
			t.Errorf("%s/%s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// ofKind lists the rendered objects of one kind.
func ofKind(objs rendered, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// runtimeConvert converts a part of an unstructured object into a typed one.
func runtimeConvert(raw map[string]any, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(raw, into)
}

// str reads a string field of an object ("" when absent or not a string).
func str(o *unstructured.Unstructured, path ...string) string {
	s, _, _ := unstructured.NestedString(o.Object, path...)
	return s
}
