package charts_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// rulesTestdata holds promtool's unit tests of the rules, one file per group.
const rulesTestdata = "testdata/prometheus-rules"

// everyRule are the values that render every alert the chart has: those on the CloudNativePG
// Cluster (files/cnpg-rules.yaml) too, WAL archiving's among them.
var everyRule = []string{cnpgAPI, "database.cnpg.enabled=true", "database.cnpg.backup.enabled=true",
	"database.cnpg.backup.plugin.objectStore=codeport-backups"}

// promtoolBinary is $PROMTOOL, else bin/promtool, which `make promtool` installs pinned.
func promtoolBinary(t *testing.T) string {
	t.Helper()
	p := os.Getenv("PROMTOOL")
	if p == "" {
		p = filepath.Join("..", "bin", "promtool")
	}
	p, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("promtool: %v: run `make promtool` (make test does), or set PROMTOOL", err)
	}
	return p
}

// ruleGroup is a rule group as Prometheus loads it.
type ruleGroup struct {
	Name  string `json:"name"`
	Rules []struct {
		Alert       string            `json:"alert"`
		Expr        string            `json:"expr"`
		For         string            `json:"for,omitempty"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"rules"`
}

// renderRules renders the chart's PrometheusRule with the rules enabled and flags, and returns
// it with its groups.
func renderRules(t *testing.T, flags ...string) (*unstructured.Unstructured, []ruleGroup) {
	t.Helper()
	rules := ofKind(render(t, append([]string{monitoringAPI, "prometheusRules.enabled=true"}, flags...)...),
		"PrometheusRule")
	if len(rules) != 1 {
		t.Fatalf("%d PrometheusRules rendered, want 1", len(rules))
	}
	raw, _, _ := unstructured.NestedSlice(rules[0].Object, "spec", "groups")
	data, err := yaml.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	var groups []ruleGroup
	if err := yaml.Unmarshal(data, &groups); err != nil {
		t.Fatal(err)
	}
	return rules[0], groups
}

// TestPrometheusRulesAreOptIn: no PrometheusRule unless asked for; then one, with the labels a
// Prometheus's ruleSelector needs.
func TestPrometheusRulesAreOptIn(t *testing.T) {
	if n := len(ofKind(render(t, monitoringAPI), "PrometheusRule")); n != 0 {
		t.Errorf("%d PrometheusRules rendered by default", n)
	}
	rule, _ := renderRules(t, "prometheusRules.labels.release=kube-prometheus-stack",
		"prometheusRules.namespace=monitoring")
	if rule.GetLabels()["release"] != "kube-prometheus-stack" || rule.GetNamespace() != "monitoring" {
		t.Errorf("PrometheusRule labels %v in namespace %q", rule.GetLabels(), rule.GetNamespace())
	}
}

// TestPrometheusRulesPassPromtool: the rules exactly as the chart renders them (default values,
// with the CloudNativePG Cluster and its backups so that every alert is there) pass `promtool
// check rules`, and promtool's unit tests (testdata/prometheus-rules/, one file per group) pass
// against them; every alert has a test where it fires and one where it does not.
func TestPrometheusRulesPassPromtool(t *testing.T) {
	promtool := promtoolBinary(t)
	rule, groups := renderRules(t, everyRule...)
	dir := t.TempDir()
	spec, _, _ := unstructured.NestedMap(rule.Object, "spec")
	data, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	check := exec.Command(promtool, "check", "rules", filepath.Join(dir, "rules.yaml"))
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}

	tests, copies, fires, quiet := unitTests(t, dir)
	for _, g := range groups {
		file := strings.TrimPrefix(g.Name, "codeport.") + "_test.yaml"
		if !slices.Contains(tests, filepath.Join(rulesTestdata, file)) {
			t.Errorf("group %s has no unit test file %s/%s", g.Name, rulesTestdata, file)
		}
		for _, r := range g.Rules {
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("%s: a unit test where it fires: %v, where it does not: %v", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
		}
	}
	cmd := exec.Command(promtool, append([]string{"test", "rules"}, copies...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// unitTests copies promtool's unit test files into dir, beside the rules.yaml they load, and
// returns their paths in testdata and in dir, and the alerts each has a case firing and a case
// quiet for.
func unitTests(t *testing.T, dir string) (tests, copies []string, fires, quiet map[string]bool) {
	t.Helper()
	tests, err := filepath.Glob(filepath.Join(rulesTestdata, "*_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	fires, quiet = map[string]bool{}, map[string]bool{}
	for _, f := range tests {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var unit struct {
			Tests []struct {
				AlertRuleTest []struct {
					Alertname string           `json:"alertname"`
					ExpAlerts []map[string]any `json:"exp_alerts"`
				} `json:"alert_rule_test"`
			} `json:"tests"`
		}
		if err := yaml.Unmarshal(src, &unit); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, tc := range unit.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				} else {
					quiet[a.Alertname] = true
				}
			}
		}
		dst := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(dst, src, 0o600); err != nil {
			t.Fatal(err)
		}
		copies = append(copies, dst)
	}
	return tests, copies, fires, quiet
}

// TestPrometheusRulesHaveRunbooks: every alert has a severity, a summary and a description, and
// links its runbook, docs/runbooks/<alert>.md, which exists with the four sections a runbook
// needs and is listed in the runbooks' index.
func TestPrometheusRulesHaveRunbooks(t *testing.T) {
	_, groups := renderRules(t, everyRule...)
	index, err := os.ReadFile(filepath.Join("..", "docs", "runbooks", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const base = "https://github.com/codeport/codeport/blob/main/docs/runbooks/"
	alerts := 0
	for _, g := range groups {
		for _, r := range g.Rules {
			alerts++
			if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
				t.Errorf("%s: severity %q", r.Alert, r.Labels["severity"])
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: annotations %v lack a summary or a description", r.Alert, r.Annotations)
			}
			if want := base + r.Alert + ".md"; r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
			book, err := os.ReadFile(filepath.Join("..", "docs", "runbooks", r.Alert+".md"))
			if err != nil {
				t.Errorf("%s: %v", r.Alert, err)
				continue
			}
			for _, section := range []string{"## Symptom", "## Impact", "## Diagnosis", "## Fix"} {
				if !strings.Contains(string(book), "\n"+section+"\n") {
					t.Errorf("docs/runbooks/%s.md lacks the section %q", r.Alert, section)
				}
			}
			if !strings.Contains(string(index), "("+r.Alert+".md)") {
				t.Errorf("docs/runbooks/README.md does not link %s.md", r.Alert)
			}
		}
	}
	if alerts == 0 {
		t.Fatal("the PrometheusRule holds no alerts")
	}
}

// TestPrometheusRulesTakeValues: thresholds, alert labels and the runbooks' address come from
// the values, for the CloudNativePG alerts as for the others; an alert's own severity wins over
// alertLabels; a threshold the rules use but the values lack stops the render instead of
// shipping a broken expression.
func TestPrometheusRulesTakeValues(t *testing.T) {
	_, groups := renderRules(t, append([]string{"prometheusRules.thresholds.placementP99Seconds=2",
		"prometheusRules.alertLabels.team=payments", "prometheusRules.alertLabels.severity=page",
		"prometheusRules.runbookBaseURL=https://wiki.example/runbooks/"}, everyRule...)...)
	found := false
	for _, g := range groups {
		for _, r := range g.Rules {
			if r.Labels["team"] != "payments" || r.Labels["severity"] == "page" {
				t.Errorf("%s: labels %v", r.Alert, r.Labels)
			}
			if r.Annotations["runbook_url"] != "https://wiki.example/runbooks/"+r.Alert+".md" {
				t.Errorf("%s: runbook_url %q", r.Alert, r.Annotations["runbook_url"])
			}
			if r.Alert == "CodeportPlacementLatencyHigh" {
				found = strings.HasSuffix(strings.TrimSpace(r.Expr), "> 2")
			}
		}
	}
	if !found {
		t.Error("CodeportPlacementLatencyHigh does not compare with the placementP99Seconds given")
	}
	out, err := renderErr(t, monitoringAPI, "prometheusRules.enabled=true",
		"prometheusRules.thresholds.errorRatio=null")
	if err == nil || !strings.Contains(out, "prometheusRules.thresholds lacks: ${errorRatio}") {
		t.Errorf("render without a threshold: %v\n%s", err, out)
	}
}

// TestPrometheusRulesCloudNativePG: the alerts on the CloudNativePG Cluster come with the
// Cluster, in a group of their own, WAL archiving's only with WAL archiving; they read the series
// of the release's Cluster only, in the release's namespace.
func TestPrometheusRulesCloudNativePG(t *testing.T) {
	const (
		synchronous = "CodeportSynchronousStandbysMissing"
		archiving   = "CodeportWALArchivingFailing"
	)
	for _, tc := range []struct {
		name      string
		flags     []string
		namespace string
		alerts    []string // of the group codeport.cnpg; none: no such group
	}{
		{name: "without database.cnpg", flags: []string{cnpgAPI}},
		{name: "without backups", flags: []string{cnpgAPI, "database.cnpg.enabled=true"},
			namespace: "codeport-system", alerts: []string{synchronous}},
		{name: "with backups", flags: everyRule, namespace: "codeport-system", alerts: []string{synchronous, archiving}},
		{name: "in another namespace", flags: append([]string{"--namespace=payments"}, everyRule...),
			namespace: "payments", alerts: []string{synchronous, archiving}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, groups := renderRules(t, tc.flags...)
			var names, alerts []string
			for _, g := range groups {
				names = append(names, g.Name)
				if g.Name != "codeport.cnpg" {
					continue
				}
				// The matchers that end each selector: the Cluster's instances.
				instances := fmt.Sprintf(`namespace=%q, pod=~"codeport-db-[0-9]+"}`, tc.namespace)
				for _, r := range g.Rules {
					alerts = append(alerts, r.Alert)
					selectors, restricted := strings.Count(r.Expr, "cnpg_"), strings.Count(r.Expr, instances)
					if selectors == 0 || restricted != selectors {
						t.Errorf("%s: %d of %d selectors restricted to %s:\n%s", r.Alert, restricted, selectors, instances, r.Expr)
					}
				}
			}
			if !slices.Contains(names, "codeport.api") {
				t.Errorf("groups %v lack codeport's own", names)
			}
			if !slices.Equal(alerts, tc.alerts) {
				t.Errorf("codeport.cnpg alerts %v, want %v (groups %v)", alerts, tc.alerts, names)
			}
		})
	}
}
