package charts_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// networkPolicyOn is networkPolicy.enabled with the values it requires: the API server's address
// and who reaches the APIs.
var networkPolicyOn = []string{"networkPolicy.enabled=true", "networkPolicy.kubeAPIServer.cidrs={10.0.0.1/32}",
	`networkPolicy.api.ingressFrom[0].namespaceSelector.matchLabels.kubernetes\.io/metadata\.name=ingress-nginx`}

// Rules as policyRules describes them.
const (
	fromTests       = "8080/TCP from pod:app.kubernetes.io/component=test,app.kubernetes.io/instance=codeport"
	fromIngress     = "8080/TCP from ns:kubernetes.io/metadata.name=ingress-nginx"
	toAPIServer     = "443/TCP,6443/TCP to ip:10.0.0.1/32"
	toDNS           = "53/UDP,53/TCP to ns:kubernetes.io/metadata.name=kube-system pod:k8s-app=kube-dns"
	toAnyPostgreSQL = "5432/TCP to anywhere"
	toPublic        = "any port to ip:0.0.0.0/0 except 0.0.0.0/8,10.0.0.0/8,100.64.0.0/10,127.0.0.0/8," +
		"169.254.0.0/16,172.16.0.0/12,192.0.0.0/24,192.168.0.0/16,198.18.0.0/15,224.0.0.0/3 | " +
		"ip:::/0 except ::1/128,64:ff9b::/96,64:ff9b:1::/48,fc00::/7,fe80::/10,ff00::/8"
	operatorProbesFromTests = "8081/TCP from pod:app.kubernetes.io/component=test,app.kubernetes.io/instance=codeport"
)

// policyRules describes a NetworkPolicy's ingress and egress rules, a line each: ports, then
// peers.
func policyRules(p networkingv1.NetworkPolicy) (ingress, egress []string) {
	for _, r := range p.Spec.Ingress {
		ingress = append(ingress, describeRule(r.Ports, "from", r.From))
	}
	for _, r := range p.Spec.Egress {
		egress = append(egress, describeRule(r.Ports, "to", r.To))
	}
	return ingress, egress
}

func describeRule(
	ports []networkingv1.NetworkPolicyPort, direction string, peers []networkingv1.NetworkPolicyPeer,
) string {
	var ps []string
	for _, p := range ports {
		ps = append(ps, fmt.Sprintf("%s/%s", p.Port.String(), *p.Protocol))
	}
	port := strings.Join(ps, ",")
	if port == "" {
		port = "any port"
	}
	var peer []string
	for _, p := range peers {
		var parts []string
		if p.NamespaceSelector != nil {
			parts = append(parts, "ns:"+labels.Set(p.NamespaceSelector.MatchLabels).String())
		}
		if p.PodSelector != nil {
			parts = append(parts, "pod:"+labels.Set(p.PodSelector.MatchLabels).String())
		}
		if b := p.IPBlock; b != nil {
			ip := "ip:" + b.CIDR
			if len(b.Except) > 0 {
				ip += " except " + strings.Join(b.Except, ",")
			}
			parts = append(parts, ip)
		}
		peer = append(peer, strings.Join(parts, " "))
	}
	where := strings.Join(peer, " | ")
	if where == "" {
		where = "anywhere"
	}
	return port + " " + direction + " " + where
}

// renderedPolicies renders the chart's NetworkPolicies by name, and checks that each selects
// the Pods of its component's Deployment and no other.
func renderedPolicies(t *testing.T, set ...string) map[string]networkingv1.NetworkPolicy {
	t.Helper()
	objs := render(t, set...)
	out := map[string]networkingv1.NetworkPolicy{}
	for _, o := range ofKind(objs, "NetworkPolicy") {
		var p networkingv1.NetworkPolicy
		if err := runtimeConvert(o.Object, &p); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(p.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress,
			networkingv1.PolicyTypeEgress}) {
			t.Errorf("%s restricts %v only", p.Name, p.Spec.PolicyTypes)
		}
		selector := labels.SelectorFromSet(p.Spec.PodSelector.MatchLabels)
		for _, d := range ofKind(objs, "Deployment") {
			podLabels, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
			if got := selector.Matches(labels.Set(podLabels)); got != (d.GetName() == p.Name) {
				t.Errorf("NetworkPolicy %s selects the Pods of %s: %t", p.Name, d.GetName(), got)
			}
		}
		out[p.Name] = p
	}
	return out
}

// TestNetworkPolicies: networkPolicy.enabled renders a NetworkPolicy per component that lets in
// only the ingress controller, helm test and Prometheus, and lets out only what the component
// talks to: the operator the API server, DNS and PostgreSQL; the APIs DNS, PostgreSQL, Redis and
// SMTP when configured, and the partners' webhook receivers on the internet unless denied.
// Values without which a component could not work are refused, saying what to set.
//
//nolint:gocognit // one table of policies, each case checked rule by rule
func TestNetworkPolicies(t *testing.T) {
	t.Parallel()
	if n := len(renderedPolicies(t)); n != 0 {
		t.Errorf("%d NetworkPolicies by default", n)
	}
	type rules struct{ ingress, egress []string }
	for _, tc := range []struct {
		name string
		set  []string
		want map[string]rules // by policy name; "-" for none rendered
	}{
		{"minimal", nil, map[string]rules{
			"codeport-operator":   {[]string{operatorProbesFromTests}, []string{toAPIServer, toDNS, toAnyPostgreSQL}},
			"codeport-production": {[]string{fromIngress, fromTests}, []string{toDNS, toAnyPostgreSQL, toPublic}},
			"codeport-sandbox":    {[]string{fromIngress, fromTests}, []string{toDNS, toAnyPostgreSQL, toPublic}},
		}},
		{"scraped by Prometheus", []string{monitoringAPI, "serviceMonitor.enabled=true", "operator.metrics.port=9443",
			`networkPolicy.metrics.from[0].namespaceSelector.matchLabels.kubernetes\.io/metadata\.name=monitoring`,
			`networkPolicy.metrics.from[0].podSelector.matchLabels.app\.kubernetes\.io/name=prometheus`},
			map[string]rules{
				"codeport-operator": {[]string{operatorProbesFromTests,
					"9443/TCP from ns:kubernetes.io/metadata.name=monitoring pod:app.kubernetes.io/name=prometheus"},
					[]string{toAPIServer, toDNS, toAnyPostgreSQL}},
				"codeport-sandbox": {[]string{fromIngress, fromTests,
					"9090/TCP from ns:kubernetes.io/metadata.name=monitoring pod:app.kubernetes.io/name=prometheus"},
					[]string{toDNS, toAnyPostgreSQL, toPublic}},
			}},
		{"CloudNativePG", []string{cnpgAPI, "database.cnpg.enabled=true"}, map[string]rules{
			"codeport-operator": {[]string{operatorProbesFromTests}, []string{toAPIServer, toDNS,
				"5432/TCP to pod:cnpg.io/cluster=codeport-db | pod:cnpg.io/poolerName=codeport-db-pooler"}},
			"codeport-production": {[]string{fromIngress, fromTests}, []string{toDNS,
				"5432/TCP to pod:cnpg.io/cluster=codeport-db | pod:cnpg.io/poolerName=codeport-db-pooler", toPublic}},
		}},
		{"CloudNativePG without Pooler",
			[]string{cnpgAPI, "database.cnpg.enabled=true", "database.cnpg.pooler.enabled=false"},
			map[string]rules{"codeport-operator": {[]string{operatorProbesFromTests},
				[]string{toAPIServer, toDNS, "5432/TCP to pod:cnpg.io/cluster=codeport-db"}}}},
		{"database, API server and DNS elsewhere", []string{"networkPolicy.database.to[0].ipBlock.cidr=10.20.0.0/24",
			"networkPolicy.database.port=6432", "networkPolicy.kubeAPIServer.cidrs={10.0.0.1/32,10.0.0.2/32}",
			"networkPolicy.kubeAPIServer.ports={8443}", "networkPolicy.dns.to=null"}, map[string]rules{
			"codeport-operator": {[]string{operatorProbesFromTests}, []string{
				"8443/TCP to ip:10.0.0.1/32 | ip:10.0.0.2/32", "53/UDP,53/TCP to anywhere", "6432/TCP to ip:10.20.0.0/24"}},
			"codeport-production": {[]string{fromIngress, fromTests}, []string{"53/UDP,53/TCP to anywhere",
				"6432/TCP to ip:10.20.0.0/24", toPublic}},
		}},
		{"DNS behind the Service's port", []string{"networkPolicy.dns.ports={1053}"}, map[string]rules{
			"codeport-operator": {[]string{operatorProbesFromTests}, []string{toAPIServer,
				"1053/UDP,1053/TCP to ns:kubernetes.io/metadata.name=kube-system pod:k8s-app=kube-dns", toAnyPostgreSQL}},
		}},
		{"Redis and SMTP", []string{"redis.url=redis://redis:6379/0", "smtp.existingSecret=codeport-smtp",
			"networkPolicy.redis.to[0].podSelector.matchLabels.app=redis", "networkPolicy.smtp.port=465"},
			map[string]rules{
				"codeport-operator": {[]string{operatorProbesFromTests}, []string{toAPIServer, toDNS, toAnyPostgreSQL}},
				"codeport-production": {[]string{fromIngress, fromTests}, []string{toDNS, toAnyPostgreSQL,
					"6379/TCP to pod:app=redis", "465/TCP to anywhere", toPublic}},
			}},
		{"webhooks to private networks", []string{"webhooks.allowPrivateNetworks=true"}, map[string]rules{
			"codeport-production": {[]string{fromIngress, fromTests}, []string{toDNS, toAnyPostgreSQL,
				"any port to ip:0.0.0.0/0 | ip:::/0"}},
		}},
		{"webhooks through an egress gateway", []string{"networkPolicy.webhooks.to[0].ipBlock.cidr=203.0.113.10/32",
			"networkPolicy.webhooks.ports={443}"}, map[string]rules{
			"codeport-sandbox": {[]string{fromIngress, fromTests}, []string{toDNS, toAnyPostgreSQL,
				"443/TCP to ip:203.0.113.10/32"}},
		}},
		{"webhooks denied", []string{"networkPolicy.webhooks.enabled=false"}, map[string]rules{
			"codeport-production": {[]string{fromIngress, fromTests}, []string{toDNS, toAnyPostgreSQL}},
		}},
		{"no operator, so no API server", []string{"operator.enabled=false", "networkPolicy.kubeAPIServer.cidrs=null"},
			map[string]rules{"codeport-operator": {}, "codeport-sandbox": {[]string{fromIngress, fromTests},
				[]string{toDNS, toAnyPostgreSQL, toPublic}}}},
		{"no API, so no ingress", []string{"api.production.enabled=false", "api.sandbox.enabled=false",
			"networkPolicy.api.ingressFrom=null"}, map[string]rules{"codeport-production": {}, "codeport-sandbox": {},
			"codeport-operator": {[]string{operatorProbesFromTests}, []string{toAPIServer, toDNS, toAnyPostgreSQL}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			policies := renderedPolicies(t, append(slices.Clone(networkPolicyOn), tc.set...)...)
			for _, name := range slices.Sorted(maps.Keys(tc.want)) {
				want := tc.want[name]
				p, ok := policies[name]
				if want.ingress == nil && want.egress == nil {
					if ok {
						t.Errorf("NetworkPolicy %s rendered", name)
					}
					continue
				}
				if !ok {
					t.Errorf("no NetworkPolicy %s", name)
					continue
				}
				ingress, egress := policyRules(p)
				if !slices.Equal(ingress, want.ingress) {
					t.Errorf("%s ingress:\n%s\nwant:\n%s", name, strings.Join(ingress, "\n"), strings.Join(want.ingress, "\n"))
				}
				if !slices.Equal(egress, want.egress) {
					t.Errorf("%s egress:\n%s\nwant:\n%s", name, strings.Join(egress, "\n"), strings.Join(want.egress, "\n"))
				}
			}
		})
	}

	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"without the API server", []string{"networkPolicy.kubeAPIServer.cidrs=null"}, "networkPolicy.kubeAPIServer.cidrs"},
		{"without the ingress controller", []string{"networkPolicy.api.ingressFrom=null"}, "networkPolicy.api.ingressFrom"},
		{"scraped by nobody", []string{monitoringAPI, "serviceMonitor.enabled=true"}, "networkPolicy.metrics.from"},
		{"a peer of no kind", []string{"networkPolicy.database.to[0].podselector.matchLabels.app=db"}, "podselector"},
		{"a port out of range", []string{"networkPolicy.redis.port=70000"}, "port"},
		{"DNS on no port", []string{"networkPolicy.dns.ports=null"}, "dns"},
		{"an API server address without prefix", []string{"networkPolicy.kubeAPIServer.cidrs={10.0.0.1}"}, "cidrs"},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := renderErr(t, append(slices.Clone(networkPolicyOn), tc.set...)...)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Errorf("accepted, or refused without saying %q: %v\n%s", tc.want, err, out)
			}
		})
	}
}

// TestPlatformValuesInstall installs the chart with the NetworkPolicies and every Pod value set
// into a real kube-apiserver: the API server admits each object as rendered, and the values are
// there on the objects it stores. (Whether a network plugin enforces the policies is a node's
// business, which this server has none of.)
func TestPlatformValuesInstall(t *testing.T) {
	s, ns := sharedAPIServer(t)
	c := s.client
	ctx := context.Background()
	set := append(slices.Clone(networkPolicyOn), "redis.url=redis://redis:6379/0", "smtp.existingSecret=codeport-smtp",
		"api.production.replicas=2",
		`networkPolicy.metrics.from[0].namespaceSelector.matchLabels.kubernetes\.io/metadata\.name=monitoring`,
		"networkPolicy.webhooks.ports={443,8443}")
	for _, comp := range components {
		set = append(set, comp.values+".podLabels.team=payments", comp.values+".podAnnotations.owner=payments",
			comp.values+".priorityClassName=codeport-critical",
			comp.values+`.serviceAccount.annotations.eks\.amazonaws\.com/role-arn=arn:aws:iam::111122223333:role/codeport`,
			comp.values+".topologySpreadConstraints[0].maxSkew=1",
			comp.values+".topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
			comp.values+".topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule")
	}
	// The CloudNativePG variant of the policies, strictly, without installing CloudNativePG's CRDs.
	cnpgPolicies := ofKind(render(t, append([]string{"--namespace=" + ns, cnpgAPI, "database.cnpg.enabled=true",
		"webhooks.allowPrivateNetworks=true"}, networkPolicyOn...)...), "NetworkPolicy")
	createStrictly(t, c, cnpgPolicies...)
	createStrictly(t, c, ofKind(render(t, append([]string{"--namespace=" + ns}, set...)...), "NetworkPolicy")...)

	var args []string
	for _, v := range set {
		args = append(args, "--set", v)
	}
	installChart(t, s, ns, args...)
	var policies networkingv1.NetworkPolicyList
	if err := c.List(ctx, &policies, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range policies.Items {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"codeport-operator", "codeport-production", "codeport-sandbox"}) {
		t.Errorf("NetworkPolicies installed: %v", names)
	}
	for _, comp := range components {
		var sa corev1.ServiceAccount
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: comp.serviceAccount}, &sa); err != nil ||
			sa.Annotations["eks.amazonaws.com/role-arn"] == "" {
			t.Errorf("ServiceAccount %s: %v %v", comp.serviceAccount, err, sa.Annotations)
		}
		var d appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: comp.deployment}, &d); err != nil {
			t.Fatal(err)
		}
		pod := d.Spec.Template
		if pod.Labels["team"] != "payments" || pod.Annotations["owner"] != "payments" ||
			pod.Spec.PriorityClassName != "codeport-critical" || len(pod.Spec.TopologySpreadConstraints) != 1 ||
			pod.Spec.ServiceAccountName != comp.serviceAccount {
			t.Errorf("%s Pod template: labels %v, annotations %v, priority class %q, spread %v, ServiceAccount %q",
				comp.deployment, pod.Labels, pod.Annotations, pod.Spec.PriorityClassName,
				pod.Spec.TopologySpreadConstraints, pod.Spec.ServiceAccountName)
		}
	}
}
