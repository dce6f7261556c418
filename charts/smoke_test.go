package charts_test

import (
	"context"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// testPods lists the rendered helm test Pods by name.
func testPods(t *testing.T, objs rendered) map[string]*corev1.Pod {
	t.Helper()
	pods := map[string]*corev1.Pod{}
	for _, o := range ofKind(objs, "Pod") {
		var pod corev1.Pod
		if err := runtimeConvert(o.Object, &pod); err != nil {
			t.Fatal(err)
		}
		if pod.Annotations["helm.sh/hook"] != "test" {
			t.Errorf("Pod %s is not a helm test hook: %v", pod.Name, pod.Annotations)
		}
		pods[pod.Name] = &pod
	}
	return pods
}

// probedBy follows a smoke-test URL to what it reaches: the Service named by its host, the
// Service port, the container port behind it, and checks that the path is the one that
// container's readiness probe checks. It returns the Deployment it ends in.
func probedBy(t *testing.T, objs rendered, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.Split(u.Hostname(), ".")
	if len(host) != 3 || host[1] != "codeport-system" || host[2] != "svc" {
		t.Fatalf("%s: host is not <service>.codeport-system.svc", rawURL)
	}
	svcObj := objs["Service/"+host[0]]
	if svcObj == nil {
		t.Fatalf("%s: no Service %s", rawURL, host[0])
	}
	var svc corev1.Service
	if err := runtimeConvert(svcObj.Object, &svc); err != nil {
		t.Fatal(err)
	}
	var target *intstr.IntOrString
	for _, p := range svc.Spec.Ports {
		if strconv.Itoa(int(p.Port)) == u.Port() {
			target = &p.TargetPort
		}
	}
	if target == nil {
		t.Fatalf("%s: Service %s has no port %s", rawURL, svc.Name, u.Port())
	}
	for _, d := range ofKind(objs, "Deployment") {
		podLabels, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(podLabels)) {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		var c corev1.Container
		if err := runtimeConvert(containers[0].(map[string]any), &c); err != nil {
			t.Fatal(err)
		}
		probe := c.ReadinessProbe.HTTPGet
		if probe.Port.String() != target.String() || probe.Path != u.Path {
			t.Errorf("%s reaches %s port %s, path %s; the readiness probe checks port %s, path %s",
				rawURL, d.GetName(), target.String(), u.Path, probe.Port.String(), probe.Path)
		}
		return d.GetName()
	}
	t.Fatalf("%s: Service %s selects no Deployment", rawURL, svc.Name)
	return ""
}

// TestSmokeTestPods renders the helm test Pods and follows each URL to the component it checks.
func TestSmokeTestPods(t *testing.T) {
	t.Parallel()
	objs := render(t)
	pods := testPods(t, objs)
	want := map[string]string{
		"codeport-test-production": "codeport-production",
		"codeport-test-sandbox":    "codeport-sandbox",
		"codeport-test-operator":   "codeport-operator",
	}
	if len(pods) != len(want) {
		t.Fatalf("test Pods: %v", slices.Collect(maps.Keys(pods)))
	}
	for name, deployment := range want {
		pod := pods[name]
		if pod == nil {
			t.Fatalf("no test Pod %s", name)
		}
		c := pod.Spec.Containers[0]
		// The codeport image's own probe: nothing to pull that an air-gapped cluster lacks.
		served, _, _ := unstructured.NestedSlice(objs["Deployment/"+deployment].Object,
			"spec", "template", "spec", "containers")
		if c.Image != served[0].(map[string]any)["image"] ||
			len(c.Command) != 0 || c.Args[0] != "probe" {
			t.Errorf("%s: %s %v %v", name, c.Image, c.Command, c.Args)
		}
		if pod.Spec.RestartPolicy != corev1.RestartPolicyNever || pod.Spec.AutomountServiceAccountToken == nil ||
			*pod.Spec.AutomountServiceAccountToken {
			t.Errorf("%s: restartPolicy %s, automountServiceAccountToken %v", name, pod.Spec.RestartPolicy,
				pod.Spec.AutomountServiceAccountToken)
		}
		if got := probedBy(t, objs, c.Args[len(c.Args)-1]); got != deployment {
			t.Errorf("%s checks %s, want %s", name, got, deployment)
		}
	}

	pods = testPods(t, render(t, "image.repository=registry.example/mirror/codeport", "image.tag=9.9.9",
		"api.sandbox.enabled=false"))
	if _, ok := pods["codeport-test-sandbox"]; ok || len(pods) != 2 {
		t.Errorf("with the sandbox API disabled: %v", slices.Collect(maps.Keys(pods)))
	}
	if img := pods["codeport-test-production"].Spec.Containers[0].Image; img != "registry.example/mirror/codeport:9.9.9" {
		t.Errorf("image %s", img)
	}
	if pods := testPods(t, render(t, "operator.enabled=false")); pods["codeport-test-operator"] != nil {
		t.Error("operator test without the operator")
	}
	if pods := testPods(t, render(t, "tests.enabled=false")); len(pods) != 0 {
		t.Errorf("tests.enabled=false: %d test Pods", len(pods))
	}
}

// TestHelmTestRunsSmokePods runs `helm test` against envtest's API server. With no kubelet there,
// the test plays one: it marks each test Pod helm creates as succeeded, or one as failed, and
// expects helm test to report it.
func TestHelmTestRunsSmokePods(t *testing.T) {
	s, ns := sharedAPIServer(t)
	c := s.client
	env := installChart(t, s, ns)
	for _, failing := range []string{"", "codeport-test-operator"} {
		ctx, cancel := context.WithCancel(context.Background())
		seen := playKubelet(ctx, t, c, ns, failing)
		out, err := helm(t, env, "test", "codeport", "-n", ns, "--timeout", "1m")
		cancel()
		names := seen()
		slices.Sort(names)
		if failing == "" {
			want := []string{"codeport-test-operator", "codeport-test-production", "codeport-test-sandbox"}
			if err != nil || !slices.Equal(names, want) {
				t.Fatalf("helm test with every check passing ran %v (want %v): %v\n%s", names, want, err, out)
			}
			continue
		}
		// Helm stops at the first failed test Pod.
		if err == nil || !slices.Contains(names, failing) || !strings.Contains(out, failing) {
			t.Fatalf("helm test with %s failing ran %v: %v\n%s", failing, names, err, out)
		}
	}
}

// playKubelet finishes every Pending test Pod in namespace until ctx ends: Succeeded, or Failed
// for the one named failing. It returns a function listing the Pods it finished.
func playKubelet(ctx context.Context, t *testing.T, c client.Client, namespace, failing string) func() []string {
	t.Helper()
	var mu sync.Mutex
	var finished []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var pods corev1.PodList
			if err := c.List(ctx, &pods, client.InNamespace(namespace),
				client.MatchingLabels{"app.kubernetes.io/component": "test"}); err == nil {
				for i := range pods.Items {
					pod := &pods.Items[i]
					if pod.Status.Phase != "" && pod.Status.Phase != corev1.PodPending {
						continue
					}
					pod.Status.Phase = corev1.PodSucceeded
					if pod.Name == failing {
						pod.Status.Phase = corev1.PodFailed
					}
					if err := c.Status().Update(ctx, pod); err == nil {
						mu.Lock()
						finished = append(finished, pod.Name)
						mu.Unlock()
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() []string {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(finished)
	}
}
