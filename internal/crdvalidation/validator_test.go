package crdvalidation_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/codeport/codeport/config/crd"
	"github.com/codeport/codeport/internal/crdvalidation"
)

// The comparison with a real API server's answers is in internal/devenv, whose manifests this
// package admits; these tests pin what a create does to the object admitted.

func newValidator(t *testing.T) *crdvalidation.Validator {
	t.Helper()
	crds, err := crd.Definitions()
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) == 0 {
		t.Fatal("no CRDs embedded")
	}
	v, err := crdvalidation.New(crds)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func decode(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestCreateStoresWhatTheServerStores: defaults applied, status dropped (a subresource), generation
// 1, and the caller's object untouched.
func TestCreateStoresWhatTheServerStores(t *testing.T) {
	v := newValidator(t)
	in := decode(t, `
apiVersion: codeport.dev/v1alpha1
kind: ApiKey
metadata: {name: acme-sandbox, namespace: partners}
spec:
  partnerRef: {name: acme}
  environment: sandbox
  secretName: acme-sandbox-key
status: {keyPrefix: forged}
`)
	original := in.DeepCopy()
	stored, err := v.Create(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if typ, _, _ := unstructured.NestedString(stored.Object, "spec", "type"); typ != "apiKey" {
		t.Errorf("spec.type %q, want the schema's default apiKey", typ)
	}
	if _, ok := stored.Object["status"]; ok {
		t.Error("status kept; a create cannot set it")
	}
	if stored.GetGeneration() != 1 {
		t.Errorf("generation %d, want 1", stored.GetGeneration())
	}
	if !reflect.DeepEqual(in, original) {
		t.Error("Create modified its argument")
	}
}

func TestServesGroup(t *testing.T) {
	v := newValidator(t)
	if !v.ServesGroup("codeport.dev") || v.ServesGroup("apps") || v.ServesGroup("") {
		t.Fatal("ServesGroup does not tell the CRDs' group from others")
	}
}

// TestKubectlMessage pins the rendering of kubectl's checkErr; internal/devenv compares it with
// kubectl's own output where kubectl is installed.
func TestKubectlMessage(t *testing.T) {
	partner := schema.GroupKind{Group: "codeport.dev", Kind: "Partner"}
	required := field.Required(field.NewPath("spec", "contactEmail"), "")
	tooMany := field.Invalid(field.NewPath("spec", "rateLimit", "requestsPerMinute"), 2000000,
		"should be less than or equal to 1000000")
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"one cause", apierrors.NewInvalid(partner, "acme", field.ErrorList{required}),
			`The Partner "acme" is invalid: spec.contactEmail: Required value`},
		{"several causes, one a line, repeats once", apierrors.NewInvalid(partner, "acme",
			field.ErrorList{required, tooMany, required}),
			"The Partner \"acme\" is invalid: \n* spec.contactEmail: Required value\n" +
				"* spec.rateLimit.requestsPerMinute: Invalid value: 2000000: should be less than or equal to 1000000"},
		{"no causes", apierrors.NewInvalid(partner, "acme", nil), `The Partner "acme" is invalid`},
		{"other statuses by their message", apierrors.NewBadRequest(`strict decoding error: unknown field "spec.x"`),
			`strict decoding error: unknown field "spec.x"`},
		{"other errors by their text", errors.New("boom"), "boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := crdvalidation.KubectlMessage(tc.err); got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}
