package charts_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	crdcel "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"
)

// chartMinimumMinor reads the lowest Kubernetes 1.x minor that Chart.yaml's kubeVersion admits.
func chartMinimumMinor(t *testing.T) uint {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(chart, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		KubeVersion string `json:"kubeVersion"`
	}
	if err := yaml.Unmarshal(src, &meta); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^>=\s*1\.(\d+)\.0-0$`).FindStringSubmatch(meta.KubeVersion)
	if m == nil {
		t.Fatalf(`Chart.yaml kubeVersion %q is not ">= 1.N.0-0" (the -0 admits vendors' pre-release `+
			`versions such as v1.31.2-eks-…)`, meta.KubeVersion)
	}
	minor, _ := strconv.Atoi(m[1])
	return uint(minor)
}

// celErrors compiles every CEL rule of the CRDs in config/crd/bases as a kube-apiserver of
// 1.<minor> compiles a new CRD's rules: with the CEL libraries of its compatibility version, one
// minor below its own (a library arrives in one release and may be used from the next, so that a
// rollback never meets a rule it cannot compile).
func celErrors(t *testing.T, minor uint) []string {
	t.Helper()
	envSet := environment.MustBaseEnvSet(version.MajorMinor(1, minor-1))
	files, err := filepath.Glob(filepath.Join("..", "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("CRDs: %v %v", files, err)
	}
	var errs []string
	rules := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(src, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range crd.Spec.Versions {
			var internal apiextensions.JSONSchemaProps
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(
				v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
				t.Fatal(err)
			}
			s, err := structuralschema.NewStructural(&internal)
			if err != nil {
				t.Fatalf("%s: %v", crd.Name, err)
			}
			walkSchema(s, crd.Name, true, func(node *structuralschema.Structural, path string, root bool) {
				rules += len(node.XValidations)
				errs = append(errs, compileRules(envSet, node, path, root)...)
			})
		}
	}
	if rules == 0 {
		t.Fatal("no CEL rules found in the CRDs")
	}
	return errs
}

// compileRules compiles the rules on one node of a schema.
func compileRules(envSet *environment.EnvSet, node *structuralschema.Structural, path string, root bool) []string {
	if len(node.XValidations) == 0 {
		return nil
	}
	results, err := crdcel.Compile(node, model.SchemaDeclType(node, root), celconfig.PerCallLimit,
		envSet, crdcel.NewExpressionsEnvLoader())
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", path, err)}
	}
	var errs []string
	for i, r := range results {
		if r.Error != nil {
			errs = append(errs, fmt.Sprintf("%s: rule %q: %v", path, node.XValidations[i].Rule, r.Error))
		}
	}
	return errs
}

func walkSchema(s *structuralschema.Structural, path string, root bool,
	visit func(*structuralschema.Structural, string, bool)) {
	if s == nil {
		return
	}
	visit(s, path, root)
	for name, p := range s.Properties {
		walkSchema(&p, path+"."+name, false, visit)
	}
	walkSchema(s.Items, path+"[]", false, visit)
	if s.AdditionalProperties != nil {
		walkSchema(s.AdditionalProperties.Structural, path+"{}", false, visit)
	}
}

// TestKubeVersionMatchesCELRules: the CRDs' rules (isIP, isCIDR) compile on the oldest
// Kubernetes the chart admits and not on the one before it, and helm refuses that one.
func TestKubeVersionMatchesCELRules(t *testing.T) {
	t.Parallel()
	minor := chartMinimumMinor(t)
	if errs := celErrors(t, minor); len(errs) > 0 {
		t.Errorf("on Kubernetes 1.%d, the chart's minimum, CRD rules do not compile; raise kubeVersion:\n%s",
			minor, strings.Join(errs, "\n"))
	}
	if errs := celErrors(t, minor-1); len(errs) == 0 {
		t.Errorf("every CRD rule compiles on Kubernetes 1.%d too: kubeVersion can be lowered, or say in "+
			"Chart.yaml what else needs 1.%d", minor-1, minor)
	}

	below := fmt.Sprintf("1.%d.9", minor-1)
	out, err := helm(t, nil, "template", "codeport", chart, "--kube-version", below)
	if err == nil || !strings.Contains(out, "kubeVersion") {
		t.Errorf("helm template --kube-version %s: %v\n%s", below, err, out)
	}
	for _, ok := range []string{fmt.Sprintf("1.%d.0", minor), fmt.Sprintf("v1.%d.4-eks-1a2b3c4", minor), "1.36.0"} {
		if out, err := helm(t, nil, "template", "codeport", chart, "--kube-version", ok); err != nil {
			t.Errorf("helm template --kube-version %s: %v\n%s", ok, err, out)
		}
	}
}
