package charts_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

var codeportCRDs = []string{
	"partners.codeport.dev", "catalogs.codeport.dev", "apikeys.codeport.dev", "wallets.codeport.dev",
}

// helmEnv points helm at kubeconfig, with its caches and configuration in the test's directories.
func helmEnv(t *testing.T, kubeconfig string) []string {
	t.Helper()
	return []string{
		"KUBECONFIG=" + kubeconfig,
		"HELM_CACHE_HOME=" + t.TempDir(), "HELM_CONFIG_HOME=" + t.TempDir(), "HELM_DATA_HOME=" + t.TempDir(),
	}
}

// copyChart copies the chart into a temporary directory, where a test may change it.
func copyChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), chart)
	if err := os.CopyFS(dir, os.DirFS(chart)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// crdTemplate is a CRD template as `make helm` writes it: a Helm header, the CRD's spec as
// controller-gen wrote it, and the closing `end` of the crds.enabled condition.
type crdTemplate struct {
	header, footer string
	Spec           apiextensionsv1.CustomResourceDefinitionSpec `json:"spec"`
}

func readCRDTemplate(t *testing.T, path string) *crdTemplate {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	start, end := strings.Index(text, "\nspec:\n"), strings.LastIndex(text, "\n{{- end }}")
	if start < 0 || end < start {
		t.Fatalf("%s is not a generated CRD template", path)
	}
	ct := &crdTemplate{header: text[:start+1], footer: text[end:]}
	if err := yaml.UnmarshalStrict([]byte(text[start+1:end]), ct); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return ct
}

func (ct *crdTemplate) write(t *testing.T, path string) {
	t.Helper()
	body, err := yaml.Marshal(ct)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(ct.header+string(body)+ct.footer), 0o600); err != nil {
		t.Fatal(err)
	}
}

// specProperties is the schema of spec of every version of a CRD.
func specProperties(spec *apiextensionsv1.CustomResourceDefinitionSpec) []map[string]apiextensionsv1.JSONSchemaProps {
	var out []map[string]apiextensionsv1.JSONSchemaProps
	for _, v := range spec.Versions {
		out = append(out, v.Schema.OpenAPIV3Schema.Properties["spec"].Properties)
	}
	return out
}

// withoutPartnerField writes the chart copy's Partner CRD without spec.<field>: the CRD an older
// release installed before that field existed.
func withoutPartnerField(t *testing.T, chartDir, field string) {
	t.Helper()
	path := filepath.Join(chartDir, "templates", "crds", "codeport.dev_partners.yaml")
	ct := readCRDTemplate(t, path)
	for i, v := range ct.Spec.Versions {
		spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
		if _, ok := spec.Properties[field]; !ok {
			t.Fatalf("the Partner CRD has no spec.%s", field)
		}
		delete(spec.Properties, field)
		ct.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	}
	ct.write(t, path)
}

// partnerAccepts says whether the served Partner schema knows spec.<field>: a strict server-side
// dry run refuses unknown fields instead of pruning them.
func partnerAccepts(t *testing.T, c client.Client, field string, value any) error {
	t.Helper()
	p := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "codeport.dev/v1alpha1", "kind": "Partner",
		"metadata": map[string]any{"name": "acme", "namespace": "default"},
		"spec":     map[string]any{"displayName": "Acme", "contactEmail": "ops@acme.example", field: value},
	}}
	return c.Create(context.Background(), p, client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict))
}

func servedPartnerHasField(t *testing.T, c client.Client, field string) bool {
	t.Helper()
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(context.Background(), client.ObjectKey{Name: "partners.codeport.dev"}, &crd); err != nil {
		t.Fatal(err)
	}
	for _, props := range specProperties(&crd.Spec) {
		if _, ok := props[field]; !ok {
			return false
		}
	}
	return true
}

// TestCRDsUpgradeWithTheChart installs a release whose Partner CRD predates a field, upgrades it
// with the current chart and expects the API server to serve the new field: the CRDs are
// templates, which helm upgrade applies (files in crds/ it never touches). The server is the
// test's own: the test installs an older Partner CRD, where the shared server's is current.
func TestCRDsUpgradeWithTheChart(t *testing.T) {
	t.Parallel()
	s := freshAPIServer(t)
	c, env := s.client, helmEnv(t, s.kubeconfig)
	ctx := context.Background()
	const field = "suspended"

	old := copyChart(t)
	withoutPartnerField(t, old, field)
	if out, err := helm(t, env, "install", "codeport", old,
		"-n", "codeport-system", "--create-namespace", "--no-hooks"); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	if servedPartnerHasField(t, c, field) {
		t.Fatalf("the older release's Partner CRD already has spec.%s", field)
	}
	if err := partnerAccepts(t, c, field, true); err == nil || !strings.Contains(err.Error(), field) {
		t.Fatalf("the older CRD took spec.%s: %v", field, err)
	}

	if out, err := helm(t, env, "upgrade", "codeport", chart, "-n", "codeport-system", "--no-hooks"); err != nil {
		t.Fatalf("upgrade: %v\n%s", err, out)
	}
	if !servedPartnerHasField(t, c, field) {
		t.Fatalf("helm upgrade did not update the Partner CRD: spec.%s is not served", field)
	}
	if err := partnerAccepts(t, c, field, true); err != nil {
		t.Fatalf("a Partner with spec.%s after the upgrade: %v", field, err)
	}

	// The README's `kubectl delete crd -l app.kubernetes.io/part-of=codeport` selects exactly
	// these, and each is kept when the release goes.
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := c.List(ctx, &crds, client.MatchingLabels{"app.kubernetes.io/part-of": "codeport"}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, crd := range crds.Items {
		names = append(names, crd.Name)
		if crd.Annotations["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CRD %s is not kept on uninstall: %v", crd.Name, crd.Annotations)
		}
		if crd.Labels["app.kubernetes.io/managed-by"] != "Helm" || crd.Labels["app.kubernetes.io/instance"] != "codeport" {
			t.Errorf("CRD %s lacks the chart's labels: %v", crd.Name, crd.Labels)
		}
	}
	for _, want := range codeportCRDs {
		if !slices.Contains(names, want) {
			t.Errorf("CRD %s does not match app.kubernetes.io/part-of=codeport (matched: %v)", want, names)
		}
	}
}

// TestCRDsAdoptedFromCRDsDirectory upgrades a release of the chart that still shipped its CRDs in
// crds/ (Helm creates those once and never owns them). Helm refuses to take over objects it did
// not create; after the README's label and annotate commands the upgrade goes through and the
// CRDs are the release's from then on. The server is the test's own: Helm creates CRDs from crds/
// only where there are none, and the shared server serves codeport's.
func TestCRDsAdoptedFromCRDsDirectory(t *testing.T) {
	t.Parallel()
	s := freshAPIServer(t)
	c, env := s.client, helmEnv(t, s.kubeconfig)
	ctx := context.Background()
	const field = "suspended"

	// The old layout: plain CRDs (as controller-gen wrote them) in crds/, none in templates/.
	old := copyChart(t)
	withoutPartnerField(t, old, field)
	rendered, err := helm(t, nil, "template", "codeport", old, "--show-only", "templates/crds/codeport.dev_partners.yaml",
		"--show-only", "templates/crds/codeport.dev_catalogs.yaml", "--show-only", "templates/crds/codeport.dev_apikeys.yaml",
		"--show-only", "templates/crds/codeport.dev_wallets.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, rendered)
	}
	if err := os.MkdirAll(filepath.Join(old, "crds"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i, o := range objects(t, rendered) {
		o.SetLabels(nil)
		o.SetAnnotations(nil)
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(old, "crds", string(rune('a'+i))+".yaml"), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(filepath.Join(old, "templates", "crds")); err != nil {
		t.Fatal(err)
	}
	if out, err := helm(t, env, "install", "codeport", old,
		"-n", "codeport-system", "--create-namespace", "--no-hooks"); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}

	out, err := helm(t, env, "upgrade", "codeport", chart, "-n", "codeport-system", "--no-hooks")
	if err == nil || !strings.Contains(out, "invalid ownership metadata") {
		t.Fatalf("upgrade over CRDs that Helm does not own: %v\n%s", err, out)
	}

	// kubectl label crd … app.kubernetes.io/managed-by=Helm
	// kubectl annotate crd … meta.helm.sh/release-name=codeport meta.helm.sh/release-namespace=codeport-system
	for _, name := range codeportCRDs {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(crd.DeepCopy())
		metav1.SetMetaDataLabel(&crd.ObjectMeta, "app.kubernetes.io/managed-by", "Helm")
		metav1.SetMetaDataAnnotation(&crd.ObjectMeta, "meta.helm.sh/release-name", "codeport")
		metav1.SetMetaDataAnnotation(&crd.ObjectMeta, "meta.helm.sh/release-namespace", "codeport-system")
		if err := c.Patch(ctx, &crd, patch); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := helm(t, env, "upgrade", "codeport", chart, "-n", "codeport-system", "--no-hooks"); err != nil {
		t.Fatalf("upgrade after adopting the CRDs: %v\n%s", err, out)
	}
	if !servedPartnerHasField(t, c, field) {
		t.Fatalf("spec.%s is not served after the upgrade", field)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: "partners.codeport.dev"}, &crd); err != nil {
		t.Fatal(err)
	}
	if crd.Labels["app.kubernetes.io/part-of"] != "codeport" || crd.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Fatalf("adopted CRD: labels %v, annotations %v", crd.Labels, crd.Annotations)
	}
}

// TestCRDValues: crds.enabled leaves the CRDs out, crds.keep=false lets an uninstall delete them.
func TestCRDValues(t *testing.T) {
	t.Parallel()
	count := func(set ...string) (crds, kept int) {
		args := []string{"template", "codeport", chart}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		out, err := helm(t, nil, args...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		for _, o := range objects(t, out) {
			if o.GetKind() == "CustomResourceDefinition" {
				crds++
				if o.GetAnnotations()["helm.sh/resource-policy"] == "keep" {
					kept++
				}
			}
		}
		return crds, kept
	}
	if crds, kept := count(); crds < len(codeportCRDs) || kept != crds {
		t.Errorf("defaults: %d CRDs, %d kept; want at least %d, all kept", crds, kept, len(codeportCRDs))
	}
	if crds, kept := count("crds.keep=false"); crds < len(codeportCRDs) || kept != 0 {
		t.Errorf("crds.keep=false: %d CRDs, %d kept", crds, kept)
	}
	if crds, _ := count("crds.enabled=false"); crds != 0 {
		t.Errorf("crds.enabled=false: %d CRDs rendered", crds)
	}
}
