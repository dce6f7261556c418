//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/codeport/codeport/internal/test/poll"
)

const (
	// ingressNS is the namespace networkPolicy.api.ingressFrom admits, as an ingress
	// controller's would be.
	ingressNS = "e2e-ingress"
	// elsewhereNS is any other namespace, which the policies do not admit.
	elsewhereNS = "e2e-elsewhere"
	// netcheckPort is where the probe Pods listen.
	netcheckPort = 8080
)

// networkPolicyValues writes the values that turn the chart's NetworkPolicies on for this
// cluster, as docs/operator.md tells a platform team to fill them in, and returns the file's
// path: the API server's endpoints (where the default/kubernetes Service leads), the port the
// DNS Pods listen on behind the kube-dns Service, the host and
// port of PostgreSQL and Redis (here the node's own servers, outside the cluster), and the
// namespace the APIs are called from.
func networkPolicyValues(ctx context.Context, t *testing.T, e env, k *kube) string {
	t.Helper()
	var eps discoveryv1.EndpointSliceList
	if err := k.k8s.List(ctx, &eps, client.InNamespace("default"),
		client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"}); err != nil {
		t.Fatalf("the API server's endpoints: %v", err)
	}
	var apiServer []string
	for _, s := range eps.Items {
		for _, ep := range s.Endpoints {
			for _, a := range ep.Addresses {
				apiServer = append(apiServer, a+"/32")
			}
		}
	}
	if len(apiServer) == 0 {
		t.Fatal("the default/kubernetes Service has no endpoints")
	}
	// The port CoreDNS listens on behind the kube-dns Service's 53 (1053 here, unprivileged).
	var dnsEPs discoveryv1.EndpointSliceList
	if err := k.k8s.List(ctx, &dnsEPs, client.InNamespace("kube-system"),
		client.MatchingLabels{discoveryv1.LabelServiceName: "kube-dns"}); err != nil {
		t.Fatalf("kube-dns's endpoints: %v", err)
	}
	dnsPorts := map[int32]bool{}
	for _, s := range dnsEPs.Items {
		for _, p := range s.Ports {
			if p.Port != nil {
				dnsPorts[*p.Port] = true
			}
		}
	}
	if len(dnsPorts) == 0 {
		t.Fatal("the kube-system/kube-dns Service has no endpoint ports")
	}
	dbHost, dbPort := urlHostPort(t, e.databaseURL)
	redisHost, redisPort := urlHostPort(t, e.redisURL)
	// The chart's schema takes ports as integers.
	port := func(p string) int {
		n, err := strconv.Atoi(p)
		if err != nil {
			t.Fatalf("port %q: %v", p, err)
		}
		return n
	}
	only := func(host string) []any {
		return []any{map[string]any{"ipBlock": map[string]any{"cidr": host + "/32"}}}
	}
	values := map[string]any{"networkPolicy": map[string]any{
		"enabled": true,
		"api": map[string]any{"ingressFrom": []any{map[string]any{"namespaceSelector": map[string]any{
			"matchLabels": map[string]any{corev1.LabelMetadataName: ingressNS}}}}},
		"kubeAPIServer": map[string]any{"cidrs": apiServer},
		"dns":           map[string]any{"ports": slices.Sorted(maps.Keys(dnsPorts))},
		"database":      map[string]any{"to": only(dbHost), "port": port(dbPort)},
		"redis":         map[string]any{"to": only(redisHost), "port": port(redisPort)},
	}}
	b, err := json.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	// JSON is YAML: helm reads it as a values file.
	path := filepath.Join(t.TempDir(), "network-policy.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// urlHostPort is the host and port of a database or Redis URL.
func urlHostPort(t *testing.T, raw string) (string, string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" || u.Port() == "" {
		t.Fatalf("a URL with a host and a port, not %q: %v", u.Redacted(), err)
	}
	return u.Hostname(), u.Port()
}

// checkNetworkPolicies proves the release's NetworkPolicies on the node's enforcing engine with
// real connections from real Pods, both ways: each API takes connections from the namespace
// networkPolicy.api.ingressFrom names and refuses them from any other; the operator reaches the
// API server, DNS and PostgreSQL and nothing else, neither a Pod of another namespace nor Redis
// (which the APIs reach). Each refusal is held against a control: the same address reached from
// a Pod no policy restricts, or the same Pod reaching another address. Without an engine, or with
// a policy missing, a refused connection goes through and the test fails.
func checkNetworkPolicies(ctx context.Context, t *testing.T, e env, k *kube) {
	t.Helper()
	checkPoliciesRendered(ctx, t, k)
	k.createNamespace(ctx, t, ingressNS)
	k.createNamespace(ctx, t, elsewhereNS)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		for _, ns := range []string{ingressNS, elsewhereNS} {
			_ = k.k8s.Delete(cctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		}
		for _, ns := range []string{ingressNS, elsewhereNS} {
			if err := k.waitNamespaceGone(cctx, ns); err != nil {
				t.Logf("namespace %s: %v", ns, err)
			}
		}
	})
	p := probes{ctx: ctx, e: e, k: k}
	p.inside, p.outside = k.startNetcheck(ctx, t, e, ingressNS), k.startNetcheck(ctx, t, e, elsewhereNS)
	for _, component := range []string{"api-production", "api-sandbox"} {
		pods, err := k.readyPods(ctx, component, map[string]int{"api-production": 2, "api-sandbox": 1}[component])
		if err != nil {
			t.Fatal(err)
		}
		p.apis = append(p.apis, net.JoinHostPort(pods[0].Status.PodIP, "8080"))
	}
	p.insideAddr = net.JoinHostPort(p.inside.Status.PodIP, fmt.Sprint(netcheckPort))
	p.outsideAddr = net.JoinHostPort(p.outside.Status.PodIP, fmt.Sprint(netcheckPort))
	t.Run("API ingress", p.apiIngress)
	t.Run("operator egress", p.operatorEgress)
}

// checkPoliciesRendered fails the test unless the release rendered a NetworkPolicy per component.
func checkPoliciesRendered(ctx context.Context, t *testing.T, k *kube) {
	t.Helper()
	var nps networkingv1.NetworkPolicyList
	if err := k.k8s.List(ctx, &nps, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{release + "-operator": false, release + "-production": false, release + "-sandbox": false}
	for _, np := range nps.Items {
		if _, ok := want[np.Name]; ok {
			want[np.Name] = true
		}
	}
	for name, found := range want {
		if !found {
			t.Errorf("NetworkPolicy %s not rendered", name)
		}
	}
}

// probes are the netcheck Pods of the admitted namespace (inside) and of another (outside), and
// the addresses they are reached at and reach.
type probes struct {
	ctx                     context.Context // the subtests' context: t.Run passes only t
	e                       env
	k                       *kube
	inside, outside         *corev1.Pod
	insideAddr, outsideAddr string
	apis                    []string // one Pod of each API
}

// apiIngress: each API takes connections from the namespace networkPolicy.api.ingressFrom names
// and refuses them from another, which does reach a Pod of the first.
func (p probes) apiIngress(t *testing.T) {
	ctx := p.ctx
	// The engine adds a new Pod to the sets its policies' peers match a moment after the Pod
	// starts: the admitted client is given that moment; a refusal needs none.
	err := poll.Wait(ctx, pollPause, 2*time.Minute, "the APIs from namespace "+ingressNS, func() (bool, string) {
		got, err := p.k.dialFrom(ctx, p.e, p.inside, p.apis...)
		if err != nil {
			return false, err.Error()
		}
		return unreached(got, p.apis...) == "", unreached(got, p.apis...)
	})
	if err != nil {
		t.Error(err)
	}
	got, err := p.k.dialFrom(ctx, p.e, p.outside, append([]string{p.insideAddr}, p.apis...)...)
	if err != nil {
		t.Fatal(err)
	}
	if why := unreached(got, p.insideAddr); why != "" {
		t.Fatalf("control: namespace %s reaches no Pod of namespace %s: %s", elsewhereNS, ingressNS, why)
	}
	if why := reached(got, p.apis...); why != "" {
		t.Errorf("namespace %s, which networkPolicy.api.ingressFrom does not name, reached %s", elsewhereNS, why)
	}
}

// operatorEgress: an operator Pod reaches the API server, DNS and PostgreSQL, and neither the
// other namespace's Pod nor Redis, both of which the admitted namespace reaches.
func (p probes) operatorEgress(t *testing.T) {
	ctx := p.ctx
	pods, err := p.k.readyPods(ctx, "operator", 2)
	if err != nil {
		t.Fatal(err)
	}
	// What the operator's client dials: the kubernetes Service, which leads to the API server.
	apiServer := net.JoinHostPort(p.k.serviceIP(ctx, t, "default", "kubernetes"), "443")
	// Names are resolved through the kube-dns Service (TCP here; its UDP port is the same).
	dns := net.JoinHostPort(p.k.serviceIP(ctx, t, "kube-system", "kube-dns"), "53")
	dbHost, dbPort := urlHostPort(t, p.e.databaseURL)
	redisHost, redisPort := urlHostPort(t, p.e.redisURL)
	database, redis := net.JoinHostPort(dbHost, dbPort), net.JoinHostPort(redisHost, redisPort)
	// Control: both addresses the operator must not reach take connections from elsewhere.
	control, err := p.k.dialFrom(ctx, p.e, p.inside, p.outsideAddr, redis)
	if err != nil {
		t.Fatal(err)
	}
	if why := unreached(control, p.outsideAddr, redis); why != "" {
		t.Fatalf("control: namespace %s reaches neither %s nor Redis: %s", ingressNS, elsewhereNS, why)
	}
	got, err := p.k.dialFromEphemeral(ctx, p.e, &pods[0], apiServer, dns, database, p.outsideAddr, redis)
	if err != nil {
		t.Fatal(err)
	}
	if why := unreached(got, apiServer, dns, database); why != "" {
		t.Errorf("the operator (%s) does not reach the API server, DNS and PostgreSQL: %s", pods[0].Name, why)
	}
	if why := reached(got, p.outsideAddr, redis); why != "" {
		t.Errorf("the operator (%s) reached %s, which its policy does not allow", pods[0].Name, why)
	}
}

// dialResult is one line of `netcheck dial`.
type dialResult struct {
	Addr    string `json:"addr"`
	Reached bool   `json:"reached"`
	Error   string `json:"error"`
}

// unreached names the addresses of want that were not reached, with why; "" when all were.
func unreached(got map[string]dialResult, want ...string) string {
	var out []string
	for _, a := range want {
		if r, ok := got[a]; !ok || !r.Reached {
			out = append(out, fmt.Sprintf("%s (%s)", a, r.Error))
		}
	}
	return strings.Join(out, ", ")
}

// reached names the addresses of refused that were reached; "" when none was.
func reached(got map[string]dialResult, refused ...string) string {
	var out []string
	for _, a := range refused {
		if r, ok := got[a]; !ok || r.Reached {
			out = append(out, a)
		}
	}
	return strings.Join(out, ", ")
}

func parseDials(out string) (map[string]dialResult, error) {
	got := map[string]dialResult{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var r dialResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("netcheck printed %q: %w", sc.Text(), err)
		}
		got[r.Addr] = r
	}
	return got, sc.Err()
}

// restrictedContainer is the securityContext the restricted Pod Security profile asks of every
// container, ephemeral ones included.
func restrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true),
		ReadOnlyRootFilesystem: ptr.To(true), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
}

// startNetcheck runs a Pod listening on netcheckPort in ns, which no policy selects, and returns
// it once it is Ready.
func (k *kube) startNetcheck(ctx context.Context, t *testing.T, e env, ns string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "netcheck",
		Labels: map[string]string{"app.kubernetes.io/name": "netcheck"}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "netcheck", Image: e.netcheckImage, ImagePullPolicy: corev1.PullNever,
				Args:            []string{"listen", fmt.Sprintf(":%d", netcheckPort)},
				Ports:           []corev1.ContainerPort{{ContainerPort: netcheckPort}},
				SecurityContext: restrictedContainer(),
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
					TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(netcheckPort)}}},
			}},
		}}
	if err := k.k8s.Create(ctx, pod); err != nil {
		t.Fatalf("create %s/netcheck: %v", ns, err)
	}
	err := poll.Wait(ctx, pollPause, 2*time.Minute, ns+"/netcheck Ready", func() (bool, string) {
		if err := k.k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err.Error()
		}
		return podReady(pod), string(pod.Status.Phase)
	})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// dialFrom runs `netcheck dial` in a netcheck Pod.
func (k *kube) dialFrom(ctx context.Context, e env, pod *corev1.Pod, addrs ...string) (map[string]dialResult, error) {
	args := append([]string{"-n", pod.Namespace, "exec", pod.Name, "-c", "netcheck", "--", "/netcheck", "dial"},
		addrs...)
	out, err := run(ctx, e, e.kubectl, args...)
	if err != nil {
		return nil, err
	}
	return parseDials(out)
}

// dialFromEphemeral runs `netcheck dial` as an ephemeral container of pod, in the Pod's own
// network namespace, which its policies apply to, and returns what it printed.
func (k *kube) dialFromEphemeral(
	ctx context.Context, e env, pod *corev1.Pod, addrs ...string,
) (map[string]dialResult, error) {
	if err := k.k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		return nil, fmt.Errorf("get pod %s: %w", pod.Name, err)
	}
	name := fmt.Sprintf("netcheck-%d", len(pod.Spec.EphemeralContainers))
	pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: name, Image: e.netcheckImage, ImagePullPolicy: corev1.PullNever,
			Args: append([]string{"dial"}, addrs...), SecurityContext: restrictedContainer(),
		}})
	if _, err := k.cs.CoreV1().Pods(pod.Namespace).UpdateEphemeralContainers(ctx, pod.Name, pod,
		metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("add ephemeral container %s to %s: %w", name, pod.Name, err)
	}
	err := poll.Wait(ctx, pollPause, 2*time.Minute, pod.Name+"/"+name+" finished", func() (bool, string) {
		if err := k.k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err.Error()
		}
		for _, cs := range pod.Status.EphemeralContainerStatuses {
			if cs.Name == name && cs.State.Terminated != nil {
				return true, ""
			}
		}
		return false, "not finished"
	})
	if err != nil {
		return nil, err
	}
	out, err := k.cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: name}).
		DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("logs of %s/%s: %w", pod.Name, name, err)
	}
	return parseDials(string(out))
}

// serviceIP is a Service's ClusterIP.
func (k *kube) serviceIP(ctx context.Context, t *testing.T, ns, name string) string {
	t.Helper()
	var svc corev1.Service
	if err := k.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &svc); err != nil {
		t.Fatal(err)
	}
	return svc.Spec.ClusterIP
}
