package charts_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/codeport/codeport/internal/test/poll"
)

// operatorRules reads the generated rules the chart grants the operator.
func operatorRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(chart, "files", "operator-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules []rbacv1.PolicyRule
	if err := yaml.Unmarshal(src, &rules); err != nil {
		t.Fatal(err)
	}
	if len(rules) == 0 {
		t.Fatal("files/operator-rules.yaml holds no rules")
	}
	return rules
}

// grantsCodeport tells whether a rule reaches codeport's kinds or Secrets.
func grantsCodeport(r rbacv1.PolicyRule) bool {
	for _, g := range r.APIGroups {
		for _, res := range r.Resources {
			if g == "*" || res == "*" || g == "codeport.dev" || (g == "" && res == "secrets") {
				return true
			}
		}
	}
	return false
}

// renderedRBAC is what helm template renders of RBAC, and the operator's arguments.
type renderedRBAC struct {
	roles           map[string]rbacv1.Role        // by namespace/name
	bindings        map[string]rbacv1.RoleBinding // by namespace/name
	clusterRoles    map[string]rbacv1.ClusterRole
	clusterBindings []rbacv1.ClusterRoleBinding
	operatorArgs    []string
}

// renderRBAC renders the chart with the given --set values (see render) into typed RBAC objects.
func renderRBAC(t *testing.T, flags ...string) renderedRBAC {
	t.Helper()
	out, err := renderErr(t, flags...)
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", flags, err, out)
	}
	r := renderedRBAC{roles: map[string]rbacv1.Role{}, bindings: map[string]rbacv1.RoleBinding{},
		clusterRoles: map[string]rbacv1.ClusterRole{}}
	convert := func(raw map[string]any, into any) {
		if err := runtimeConvert(raw, into); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range objects(t, out) {
		switch o.GetKind() {
		case "Role":
			var v rbacv1.Role
			convert(o.Object, &v)
			r.roles[v.Namespace+"/"+v.Name] = v
		case "RoleBinding":
			var v rbacv1.RoleBinding
			convert(o.Object, &v)
			r.bindings[v.Namespace+"/"+v.Name] = v
		case "ClusterRole":
			var v rbacv1.ClusterRole
			convert(o.Object, &v)
			r.clusterRoles[v.Name] = v
		case "ClusterRoleBinding":
			var v rbacv1.ClusterRoleBinding
			convert(o.Object, &v)
			r.clusterBindings = append(r.clusterBindings, v)
		case "Deployment":
			if o.GetName() == "codeport-operator" {
				var d struct {
					Spec struct {
						Template corev1.PodTemplateSpec `json:"template"`
					} `json:"spec"`
				}
				convert(o.Object, &d)
				r.operatorArgs = d.Spec.Template.Spec.Containers[0].Args
			}
		}
	}
	return r
}

// TestOperatorWatchNamespacesRendersRoles: with operator.watchNamespaces the operator is told to
// watch those namespaces and is granted the generated rules by a Role in each of them, and
// nothing cluster-wide on codeport's kinds or Secrets; without it, the ClusterRole as before.
func TestOperatorWatchNamespacesRendersRoles(t *testing.T) {
	t.Parallel()
	operatorDefinesFlag(t, "watch-namespaces")
	want := operatorRules(t)

	rbac := renderRBAC(t, "operator.watchNamespaces={team-a,team-b}")
	roles, bindings, clusterRoles := rbac.roles, rbac.bindings, rbac.clusterRoles
	args := rbac.operatorArgs
	if !strings.Contains(strings.Join(args, " "), "--watch-namespaces=team-a,team-b") {
		t.Errorf("operator args %v lack --watch-namespaces=team-a,team-b", args)
	}
	for _, ns := range []string{"team-a", "team-b"} {
		r, ok := roles[ns+"/codeport-operator"]
		if !ok {
			t.Errorf("no Role codeport-operator in %s", ns)
			continue
		}
		if fmt.Sprint(r.Rules) != fmt.Sprint(want) {
			t.Errorf("Role in %s differs from files/operator-rules.yaml:\n%v\nwant %v", ns, r.Rules, want)
		}
		b, ok := bindings[ns+"/codeport-operator"]
		if !ok {
			t.Errorf("no RoleBinding codeport-operator in %s", ns)
			continue
		}
		if b.RoleRef.Kind != "Role" || b.RoleRef.Name != "codeport-operator" || len(b.Subjects) != 1 ||
			b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != "codeport" ||
			b.Subjects[0].Namespace != "codeport-system" {
			t.Errorf("RoleBinding in %s: %+v %+v", ns, b.RoleRef, b.Subjects)
		}
	}
	if _, ok := roles["codeport-system/codeport-leader-election"]; !ok {
		t.Error("the leader-election Role left the release namespace")
	}
	for _, b := range rbac.clusterBindings {
		for _, r := range clusterRoles[b.RoleRef.Name].Rules {
			if grantsCodeport(r) {
				t.Errorf("ClusterRoleBinding %s grants %v cluster-wide", b.Name, r)
			}
		}
	}
	if _, ok := clusterRoles["codeport-operator"]; ok {
		t.Error("ClusterRole codeport-operator rendered with watchNamespaces")
	}

	// Default: every namespace, with the ClusterRole and no flag.
	def := render(t)
	if def["ClusterRole/codeport-operator"] == nil || def["ClusterRoleBinding/codeport-operator"] == nil ||
		def["Role/codeport-operator"] != nil {
		t.Error("default install does not grant the operator its ClusterRole alone")
	}
	if a := fmt.Sprint(def["Deployment/codeport-operator"].Object["spec"]); strings.Contains(a, "--watch-namespaces") {
		t.Error("default install passes --watch-namespaces")
	}

	for _, bad := range []string{"operator.watchNamespaces={Team_A}", "operator.watchNamespaces={a,a}",
		"operator.watchNamespaces=team-a"} {
		if out, err := renderErr(t, bad); err == nil || !strings.Contains(out, "watchNamespaces") {
			t.Errorf("%s: accepted or not named: %v\n%s", bad, err, out)
		}
	}
}

// TestOperatorWatchNamespacesGrantsOnlyThere installs the chart with two watched namespaces
// and asks the API server what the operator's ServiceAccount may do: its kinds and Secrets in
// those namespaces, nothing in a third or cluster-wide, and its Lease in the release namespace.
// Every resource the generated rules name must be namespaced, or a Role could not grant it.
func TestOperatorWatchNamespacesGrantsOnlyThere(t *testing.T) {
	s, ns := sharedAPIServer(t)
	c := s.client
	ctx := context.Background()
	var teams []string
	for _, team := range []string{"a", "b", "c"} {
		teams = append(teams, createNamespace(t, c, ns+"-team-"+team))
	}
	installChart(t, s, ns, "--set", "operator.watchNamespaces={"+teams[0]+","+teams[1]+"}")

	dc, err := discovery.NewDiscoveryClientForConfig(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	namespaced := map[string]bool{}
	poll.Until(t, 30*time.Second, "codeport's kinds to be discovered", func() (bool, string) {
		lists, err := dc.ServerPreferredResources()
		for _, l := range lists {
			gv, _ := schema.ParseGroupVersion(l.GroupVersion)
			for _, r := range l.APIResources {
				namespaced[gv.Group+"/"+r.Name] = r.Namespaced
			}
		}
		_, ok := namespaced["codeport.dev/wallettopups"]
		return ok, fmt.Sprint(err)
	})
	for _, r := range operatorRules(t) {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				base, _, _ := strings.Cut(res, "/")
				if ns, known := namespaced[g+"/"+base]; !known || !ns {
					t.Errorf("operator rule on %s/%s: not a namespaced resource (known %t); a Role cannot grant it",
						g, res, known)
				}
			}
		}
	}

	checkOperatorAccess(t, c, "system:serviceaccount:"+ns+":codeport", ns, teams[:2], teams[2])

	var crbs rbacv1.ClusterRoleBindingList
	if err := c.List(ctx, &crbs); err != nil {
		t.Fatal(err)
	}
	for _, b := range crbs.Items {
		if b.Name == "codeport-operator" {
			t.Errorf("ClusterRoleBinding %s installed with watchNamespaces", b.Name)
		}
	}
}

// checkOperatorAccess asks the API server what the operator's ServiceAccount user may do: its
// kinds and Secrets in each watched namespace, nothing in unwatched or cluster-wide, and its
// Lease in its own namespace.
func checkOperatorAccess(t *testing.T, c client.Client, user, home string, watched []string, unwatched string) {
	t.Helper()
	type access struct {
		ns, verb, group, resource string
		want                      bool
	}
	var cases []access
	for _, ns := range watched {
		cases = append(cases,
			access{ns, "update", "codeport.dev", "partners", true},
			access{ns, "update", "", "secrets", true},
			access{ns, "create", "", "secrets", true},
			access{ns, "update", "codeport.dev", "wallettopups/status", true})
	}
	cases = append(cases,
		access{unwatched, "update", "codeport.dev", "partners", false},
		access{unwatched, "get", "codeport.dev", "partners", false},
		access{unwatched, "update", "", "secrets", false},
		access{unwatched, "get", "", "secrets", false},
		access{"", "list", "codeport.dev", "partners", false},
		access{"", "list", "", "secrets", false},
		access{home, "update", "coordination.k8s.io", "leases", true})
	ctx := context.Background()
	review := func(tc access) (allowed bool, reason string) {
		res, sub, _ := strings.Cut(tc.resource, "/")
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + home, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: tc.ns, Verb: tc.verb, Group: tc.group, Resource: res, Subresource: sub,
			},
		}}
		if err := c.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed, sar.Status.Reason
	}
	// The authorizer sees new bindings through its informers, a moment after they are created:
	// wait until every grant shows, then check every case, denials included (bindings only add).
	poll.Until(t, time.Minute, "the operator's bindings to reach the authorizer", func() (bool, string) {
		for _, tc := range cases {
			if allowed, reason := review(tc); tc.want && !allowed {
				return false, fmt.Sprintf("%s %s in %q not allowed yet (%s)", tc.verb, tc.resource, tc.ns, reason)
			}
		}
		return true, ""
	})
	for _, tc := range cases {
		if allowed, reason := review(tc); allowed != tc.want {
			t.Errorf("operator may %s %s in %q: %t, want %t (%s)", tc.verb, tc.resource, tc.ns, allowed, tc.want, reason)
		}
	}
}

// TestKustomizeNamespacedOverlay: config/namespaced tells the operator which namespace to watch,
// binds its generated rules there only, and, applied to a real kube-apiserver, leaves it no access
// to codeport's kinds or Secrets anywhere else.
func TestKustomizeNamespacedOverlay(t *testing.T) {
	objs := kustomize(t, "namespaced")
	var args []string
	var applied []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRoleBinding":
			if o.GetName() == "codeport-operator" {
				t.Error("the operator's ClusterRoleBinding survives the namespaced overlay")
			}
		case "Deployment":
			if o.GetName() == "codeport-operator" {
				var d appsv1.Deployment
				if err := runtimeConvert(o.Object, &d); err != nil {
					t.Fatal(err)
				}
				args = d.Spec.Template.Spec.Containers[0].Args
			}
		}
		switch o.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			applied = append(applied, o)
		}
	}
	if !slices.Contains(args, "--watch-namespaces=partners") {
		t.Fatalf("operator args %v lack --watch-namespaces=partners", args)
	}

	s, _ := sharedAPIServer(t)
	c := s.client
	for _, ns := range []string{"codeport-system", "elsewhere"} {
		createNamespace(t, c, ns)
	}
	createAll(t, c, applied)
	checkOperatorAccess(t, c, "system:serviceaccount:codeport-system:codeport-operator", "codeport-system",
		[]string{"partners"}, "elsewhere")
}

// createAll creates objects, namespaces first (the namespaced objects need them), and deletes the
// cluster-scoped ones other than namespaces when the test ends (see deleteWhenDone).
func createAll(t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, first := range []bool{true, false} {
		for _, o := range objs {
			if (o.GetKind() == "Namespace") != first {
				continue
			}
			if err := c.Create(context.Background(), o); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("%s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
			}
			if o.GetNamespace() == "" && o.GetKind() != "Namespace" {
				deleteWhenDone(t, c, o)
			}
		}
	}
}

// reachesSecrets tells whether a rule grants anything on Secrets.
func reachesSecrets(r rbacv1.PolicyRule) bool {
	return (slices.Contains(r.APIGroups, "") || slices.Contains(r.APIGroups, "*")) &&
		(slices.Contains(r.Resources, "secrets") || slices.Contains(r.Resources, "*"))
}

// writesSecrets tells whether a rule lets its subject create, update or patch Secrets.
func writesSecrets(r rbacv1.PolicyRule) bool {
	return reachesSecrets(r) && slices.ContainsFunc(r.Verbs, func(v string) bool {
		return v == "create" || v == "update" || v == "patch" || v == "*"
	})
}

// TestSecretRightsFollowWatchNamespaces: by default the operator's ClusterRole lets it write
// Secrets in every namespace (the chart's README says why); with operator.watchNamespaces no
// ClusterRole the chart renders, bound or not, reaches Secrets at all, whatever else is on.
func TestSecretRightsFollowWatchNamespaces(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		set  []string
		// writers are the ClusterRoles that write Secrets; readers those that reach them at all.
		writers, readers []string
	}{
		{"every namespace", nil, []string{"codeport-operator"}, []string{"codeport-operator"}},
		{"watched namespaces", []string{"operator.watchNamespaces={team-a}"}, nil, nil},
		{"watched namespaces, every cluster-wide role on", []string{"operator.watchNamespaces={team-a,team-b}",
			"rbac.aggregatedRoles=true", "rbac.walletTopUpRole=true",
			"serviceMonitor.prometheusServiceAccount.name=prometheus"}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var writers, readers []string
			for name, role := range renderRBAC(t, tc.set...).clusterRoles {
				for _, r := range role.Rules {
					if writesSecrets(r) && !slices.Contains(writers, name) {
						writers = append(writers, name)
					}
					if reachesSecrets(r) && !slices.Contains(readers, name) {
						readers = append(readers, name)
					}
				}
			}
			slices.Sort(writers)
			slices.Sort(readers)
			if !slices.Equal(writers, tc.writers) || !slices.Equal(readers, tc.readers) {
				t.Errorf("ClusterRoles writing Secrets %v, reaching them %v; want %v, %v",
					writers, readers, tc.writers, tc.readers)
			}
		})
	}
}

// TestReadmeShowsTheNamespacedRoles: the Role and RoleBinding the chart's README shows for
// operator.watchNamespaces are, rule for rule, what the chart renders in a watched namespace, and
// all it renders there.
func TestReadmeShowsTheNamespacedRoles(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join(chart, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(src), "### Namespaced mode: what it grants instead\n")
	_, block, ok2 := strings.Cut(section, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("the README has no yaml block under \"Namespaced mode: what it grants instead\"")
	}
	shown := map[string]any{}
	for _, o := range objects(t, block) {
		var v any = &rbacv1.Role{}
		if o.GetKind() == "RoleBinding" {
			v = &rbacv1.RoleBinding{}
		}
		if err := runtimeConvert(o.Object, v); err != nil {
			t.Fatal(err)
		}
		shown[o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName()] = v
	}

	rbac := renderRBAC(t, "operator.watchNamespaces={team-a}")
	rendered := map[string]any{}
	for key, r := range rbac.roles {
		if r.Namespace == "team-a" {
			r.Labels = nil
			rendered["Role "+key] = &r
		}
	}
	for key, b := range rbac.bindings {
		if b.Namespace == "team-a" {
			b.Labels = nil
			rendered["RoleBinding "+key] = &b
		}
	}
	if !slices.Equal(slices.Sorted(maps.Keys(shown)), slices.Sorted(maps.Keys(rendered))) {
		t.Fatalf("the README shows %v, the chart renders %v in team-a",
			slices.Sorted(maps.Keys(shown)), slices.Sorted(maps.Keys(rendered)))
	}
	for key, want := range rendered {
		if !equality.Semantic.DeepEqual(shown[key], want) {
			t.Errorf("the README's %s:\n%+v\nthe chart renders:\n%+v", key, shown[key], want)
		}
	}
}
