package charts_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// aggregateClusterRoles does what kube-controller-manager's clusterrole-aggregation controller
// does (envtest runs no controller manager): every ClusterRole with an aggregationRule gets the
// rules of the ClusterRoles its selectors match. Run twice, so that view's rules also reach
// edit and admin through view's own aggregate-to-edit label, as they do in a cluster.
func aggregateClusterRoles(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	for range 2 {
		var roles rbacv1.ClusterRoleList
		if err := c.List(ctx, &roles); err != nil {
			t.Fatal(err)
		}
		for i := range roles.Items {
			role := &roles.Items[i]
			if role.AggregationRule == nil {
				continue
			}
			var rules []rbacv1.PolicyRule
			for _, sel := range role.AggregationRule.ClusterRoleSelectors {
				s, err := metav1.LabelSelectorAsSelector(&sel)
				if err != nil {
					t.Fatal(err)
				}
				for _, other := range roles.Items {
					if other.Name != role.Name && s.Matches(labels.Set(other.Labels)) {
						rules = append(rules, other.Rules...)
					}
				}
			}
			role.Rules = rules
			if err := c.Update(ctx, role); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func partner(namespace, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "codeport.dev/v1alpha1", "kind": "Partner",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec":     map[string]any{"displayName": "Acme Games Ltd", "contactEmail": "ops@acme.example"},
	}}
}

// TestTeamsOnboardPartnersInTheirNamespace: with the chart installed, a RoleBinding to
// Kubernetes' edit role in a team's namespace lets the team create Partners there and nowhere
// else, without touching their status; one to view lets a team read them only.
func TestTeamsOnboardPartnersInTheirNamespace(t *testing.T) {
	c, kubeconfig, cfg := startAPIServerConfig(t)
	ctx := context.Background()
	if out, err := helm(t, helmEnv(t, kubeconfig), "install", "codeport", chart,
		"-n", "codeport-system", "--create-namespace", "--no-hooks"); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	aggregateClusterRoles(t, c)

	for _, ns := range []string{"team-a", "team-b"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	// As in the docs: kubectl create rolebinding … --clusterrole=edit --group=team-a -n team-a
	for role, group := range map[string]string{"edit": "team-a", "view": "auditors"} {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: group + "-" + role, Namespace: "team-a"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: group}},
		}
		if err := c.Create(ctx, rb); err != nil {
			t.Fatal(err)
		}
	}
	as := func(user, group string) client.Client {
		impersonated := rest.CopyConfig(cfg)
		impersonated.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{group}}
		ic, err := client.New(impersonated, client.Options{Scheme: c.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		return ic
	}
	alice, audrey := as("alice", "team-a"), as("audrey", "auditors")

	if err := alice.Create(ctx, partner("team-a", "acme")); err != nil {
		t.Fatalf("an editor of team-a creating a Partner there: %v", err)
	}
	if err := alice.Create(ctx, partner("team-b", "acme")); !apierrors.IsForbidden(err) {
		t.Errorf("an editor of team-a creating a Partner in team-b: %v, want Forbidden", err)
	}
	p := partner("team-a", "acme")
	if err := alice.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(p.Object, "Acme Games", "spec", "displayName"); err != nil {
		t.Fatal(err)
	}
	if err := alice.Update(ctx, p); err != nil {
		t.Errorf("an editor updating a Partner: %v", err)
	}
	if err := unstructured.SetNestedField(p.Object, int64(7), "status", "observedGeneration"); err != nil {
		t.Fatal(err)
	}
	if err := alice.Status().Update(ctx, p); !apierrors.IsForbidden(err) {
		t.Errorf("an editor writing a Partner's status: %v, want Forbidden", err)
	}

	var list unstructured.UnstructuredList
	for _, kind := range []string{"PartnerList", "CatalogList", "ApiKeyList", "WalletList"} {
		list.SetAPIVersion("codeport.dev/v1alpha1")
		list.SetKind(kind)
		if err := audrey.List(ctx, &list, client.InNamespace("team-a")); err != nil {
			t.Errorf("a viewer of team-a listing %s: %v", kind, err)
		}
		if err := audrey.List(ctx, &list, client.InNamespace("team-b")); !apierrors.IsForbidden(err) {
			t.Errorf("a viewer of team-a listing %s in team-b: %v, want Forbidden", kind, err)
		}
	}
	if err := audrey.Create(ctx, partner("team-a", "globex")); !apierrors.IsForbidden(err) {
		t.Errorf("a viewer creating a Partner: %v, want Forbidden", err)
	}
	if err := audrey.Delete(ctx, partner("team-a", "acme")); !apierrors.IsForbidden(err) {
		t.Errorf("a viewer deleting a Partner: %v, want Forbidden", err)
	}
}

// TestKustomizeShipsTheChartsTeamRoles: a kustomize install gets the same aggregated roles as the
// chart's release named codeport.
func TestKustomizeShipsTheChartsTeamRoles(t *testing.T) {
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).
		Run(filesys.MakeFsOnDisk(), filepath.Join("..", "config", "default"))
	if err != nil {
		t.Fatalf("kustomize: %v", err)
	}
	out, err := resMap.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	kustomized := rendered{}
	for _, o := range objects(t, string(out)) {
		kustomized[o.GetKind()+"/"+o.GetName()] = o
	}
	chartObjs := render(t)
	for _, name := range []string{"ClusterRole/codeport-edit", "ClusterRole/codeport-view"} {
		k, c := kustomized[name], chartObjs[name]
		if k == nil || c == nil {
			t.Fatalf("%s: kustomize %v, chart %v", name, k != nil, c != nil)
		}
		if fmt.Sprint(k.Object["rules"]) != fmt.Sprint(c.Object["rules"]) {
			t.Errorf("%s rules differ:\nkustomize %v\nchart     %v", name, k.Object["rules"], c.Object["rules"])
		}
		for key, v := range c.GetLabels() {
			if strings.HasPrefix(key, "rbac.authorization.k8s.io/") && k.GetLabels()[key] != v {
				t.Errorf("%s: kustomize lacks label %s=%s", name, key, v)
			}
		}
	}
}
