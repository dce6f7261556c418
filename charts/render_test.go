package charts_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

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
