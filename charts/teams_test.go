package charts_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// impersonate returns a client acting as user, a member of group.
func impersonate(t *testing.T, c client.Client, cfg *rest.Config, user, group string) client.Client {
	t.Helper()
	impersonated := rest.CopyConfig(cfg)
	impersonated.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{group}}
	ic, err := client.New(impersonated, client.Options{Scheme: c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return ic
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
	c, cfg, ns := installWithTeamRoles(t)
	ctx := context.Background()

	teamA, teamB := createNamespace(t, c, ns+"-team-a"), createNamespace(t, c, ns+"-team-b")
	// As in the docs: kubectl create rolebinding … --clusterrole=edit --group=team-a -n team-a
	for role, group := range map[string]string{"edit": "team-a", "view": "auditors"} {
		bindGroup(t, c, teamA, group, role)
	}
	alice, audrey := impersonate(t, c, cfg, "alice", "team-a"), impersonate(t, c, cfg, "audrey", "auditors")

	if err := alice.Create(ctx, partner(teamA, "acme")); err != nil {
		t.Fatalf("an editor of team-a creating a Partner there: %v", err)
	}
	if err := alice.Create(ctx, partner(teamB, "acme")); !apierrors.IsForbidden(err) {
		t.Errorf("an editor of team-a creating a Partner in team-b: %v, want Forbidden", err)
	}
	p := partner(teamA, "acme")
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
	for _, kind := range []string{"PartnerList", "CatalogList", "ApiKeyList", "WalletList", "WalletTopUpList"} {
		list.SetAPIVersion("codeport.dev/v1alpha1")
		list.SetKind(kind)
		if err := audrey.List(ctx, &list, client.InNamespace(teamA)); err != nil {
			t.Errorf("a viewer of team-a listing %s: %v", kind, err)
		}
		if err := audrey.List(ctx, &list, client.InNamespace(teamB)); !apierrors.IsForbidden(err) {
			t.Errorf("a viewer of team-a listing %s in team-b: %v, want Forbidden", kind, err)
		}
	}
	if err := audrey.Create(ctx, partner(teamA, "globex")); !apierrors.IsForbidden(err) {
		t.Errorf("a viewer creating a Partner: %v, want Forbidden", err)
	}
	if err := audrey.Delete(ctx, partner(teamA, "acme")); !apierrors.IsForbidden(err) {
		t.Errorf("a viewer deleting a Partner: %v, want Forbidden", err)
	}
}

func wallet(namespace, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "codeport.dev/v1alpha1", "kind": "Wallet",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{"partnerRef": map[string]any{"name": "acme"}, "environment": "sandbox",
			"lowBalanceThreshold": "50.00"},
	}}
}

func walletTopUp(namespace, name, id string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "codeport.dev/v1alpha1", "kind": "WalletTopUp",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{"walletRef": map[string]any{"name": "acme-sandbox"}, "id": id,
			"currency": "EUR", "amount": "100.00"},
	}}
}

// TestWalletTopUpsAreGrantedApartFromEdit: editing a namespace (Kubernetes' edit or admin) lets
// a team manage Wallets and read WalletTopUps, but not create, change or delete them; a
// RoleBinding to the wallet-topup role lets finance credit wallets there, and nothing else.
func TestWalletTopUpsAreGrantedApartFromEdit(t *testing.T) {
	c, cfg, ns := installWithTeamRoles(t)
	ctx := context.Background()
	teamA := createNamespace(t, c, ns+"-team-a")
	for group, role := range map[string]string{"team-a": "edit", "team-a-admins": "admin",
		"finance": "codeport-wallet-topup", "auditors": "view"} {
		bindGroup(t, c, teamA, group, role)
	}
	alice, adam := impersonate(t, c, cfg, "alice", "team-a"), impersonate(t, c, cfg, "adam", "team-a-admins")
	fiona, audrey := impersonate(t, c, cfg, "fiona", "finance"), impersonate(t, c, cfg, "audrey", "auditors")

	if err := alice.Create(ctx, wallet(teamA, "acme-sandbox")); err != nil {
		t.Fatalf("an editor creating a Wallet: %v", err)
	}
	for who, cl := range map[string]client.Client{"an editor": alice, "an admin": adam, "a viewer": audrey} {
		if err := cl.Create(ctx, walletTopUp(teamA, "wire-0", "wire-0")); !apierrors.IsForbidden(err) {
			t.Errorf("%s creating a WalletTopUp: %v, want Forbidden", who, err)
		}
	}
	top := walletTopUp(teamA, "wire-1", "wire-1")
	if err := fiona.Create(ctx, top); err != nil {
		t.Fatalf("finance creating a WalletTopUp: %v", err)
	}
	if err := fiona.Create(ctx, walletTopUp("default", "wire-2", "wire-2")); !apierrors.IsForbidden(err) {
		t.Errorf("finance of team-a creating a WalletTopUp in default: %v, want Forbidden", err)
	}
	var list unstructured.UnstructuredList
	list.SetAPIVersion("codeport.dev/v1alpha1")
	list.SetKind("WalletTopUpList")
	for who, cl := range map[string]client.Client{"finance": fiona, "an editor": alice, "a viewer": audrey} {
		if err := cl.List(ctx, &list, client.InNamespace(teamA)); err != nil || len(list.Items) != 1 {
			t.Errorf("%s listing WalletTopUps: %v (%d)", who, err, len(list.Items))
		}
	}
	if err := fiona.Get(ctx, client.ObjectKeyFromObject(wallet(teamA, "acme-sandbox")),
		wallet(teamA, "acme-sandbox")); err != nil {
		t.Errorf("finance reading the Wallet it credits: %v", err)
	}
	if err := fiona.Create(ctx, wallet(teamA, "acme-production")); !apierrors.IsForbidden(err) {
		t.Errorf("finance creating a Wallet: %v, want Forbidden", err)
	}
	for who, cl := range map[string]client.Client{"finance": fiona, "an editor": alice, "an admin": adam} {
		if err := cl.Delete(ctx, walletTopUp(teamA, "wire-1", "wire-1")); !apierrors.IsForbidden(err) {
			t.Errorf("%s deleting a WalletTopUp: %v, want Forbidden", who, err)
		}
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`))
		if err := cl.Patch(ctx, walletTopUp(teamA, "wire-1", "wire-1"), patch); !apierrors.IsForbidden(err) {
			t.Errorf("%s patching a WalletTopUp: %v, want Forbidden", who, err)
		}
	}
}

// TestKustomizeShipsTheChartsTeamRoles: a kustomize install gets the same aggregated roles as the
// chart's release named codeport.
func TestKustomizeShipsTheChartsTeamRoles(t *testing.T) {
	t.Parallel()
	kustomized := rendered{}
	for _, o := range kustomize(t, "default") {
		kustomized[o.GetKind()+"/"+o.GetName()] = o
	}
	chartObjs := render(t)
	for _, name := range []string{
		"ClusterRole/codeport-edit", "ClusterRole/codeport-view", "ClusterRole/codeport-wallet-topup",
	} {
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

// TestWalletTopUpRoleIsNotAggregated: the wallet-topup role reaches nobody through Kubernetes'
// admin, edit or view roles, and rbac.walletTopUpRole turns it off apart from the team roles.
func TestWalletTopUpRoleIsNotAggregated(t *testing.T) {
	t.Parallel()
	role := render(t)["ClusterRole/codeport-wallet-topup"]
	if role == nil {
		t.Fatal("ClusterRole codeport-wallet-topup not rendered by default")
	}
	for key := range role.GetLabels() {
		if strings.HasPrefix(key, "rbac.authorization.k8s.io/aggregate-to-") {
			t.Errorf("codeport-wallet-topup is aggregated: %s", key)
		}
	}
	if objs := render(t, "rbac.walletTopUpRole=false"); objs["ClusterRole/codeport-wallet-topup"] != nil ||
		objs["ClusterRole/codeport-edit"] == nil {
		t.Error("rbac.walletTopUpRole=false: the wallet-topup role rendered, or the team roles not")
	}
	if objs := render(t, "rbac.aggregatedRoles=false"); objs["ClusterRole/codeport-wallet-topup"] == nil ||
		objs["ClusterRole/codeport-edit"] != nil {
		t.Error("rbac.aggregatedRoles=false: the team roles rendered, or the wallet-topup role not")
	}
}

// bindGroup binds a ClusterRole to a group in one namespace, as
// `kubectl create rolebinding --clusterrole=ROLE --group=GROUP -n NAMESPACE` does.
func bindGroup(t *testing.T, c client.Client, namespace, group, role string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: group + "-" + role, Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: group}},
	}
	if err := c.Create(context.Background(), rb); err != nil {
		t.Fatal(err)
	}
}

// installWithTeamRoles installs the chart on the shared API server and aggregates its team roles
// into Kubernetes' edit, admin and view, as the controller manager would; it returns an admin
// client, the server's config (for impersonation) and the release's namespace, which the test's
// team namespaces are named after.
func installWithTeamRoles(t *testing.T) (client.Client, *rest.Config, string) {
	t.Helper()
	s, ns := sharedAPIServer(t)
	installChart(t, s, ns)
	aggregateClusterRoles(t, s.client)
	return s.client, s.cfg, ns
}
