//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/test/poll"
)

// productionProduct is the sample catalog's product the production orders buy; the test imports
// its stock.
const productionProduct = "10000000000001"

// loadRateLimit is the sample partner's rate limit during the test, per key and minute.
const loadRateLimit = 100000

// nodeCPU is the smallest node the chart's defaults must fit on with the settings of the README's
// install plus two operator and two production API replicas.
var nodeCPU = resource.MustParse("2")

func TestMission(t *testing.T) {
	e := loadEnv(t)
	k := newKube(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}

	k.createNamespace(ctx, t, namespace)
	k.createNamespace(ctx, t, partnersNS)
	logs := watchLogs(ctx, t, k)
	t.Cleanup(func() { cleanup(t, e, k) })
	defer checkLogs(t, e, logs)

	install(ctx, t, e, k)
	checkPods(ctx, t, k)
	checkOperatorRBAC(ctx, t, k, root)
	t.Run("network policies enforced", func(t *testing.T) { checkNetworkPolicies(ctx, t, e, k) })

	t.Run("helm test", func(t *testing.T) {
		if _, err := run(ctx, e, e.helm, "test", release, "-n", namespace, "--timeout", "3m"); err != nil {
			t.Error(err)
		}
	})

	m := onboard(ctx, t, e, k, appSecret{name: "codeport-database", key: "url"})
	t.Run("orders through the Services", func(t *testing.T) {
		for _, tg := range []target{m.production, m.sandbox} {
			code := fmt.Sprintf("e2e-first-%d", time.Now().UnixNano())
			v, _, err := tg.api.placeOrder(ctx, code, tg.product, tg.price)
			if err != nil {
				t.Fatal(err)
			}
			if err := tg.api.waitCompleted(ctx, v.OrderID); err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("key rotation on every replica", func(t *testing.T) { rotateKey(ctx, t, k, m) })
	t.Run("kubectl codeport status and report", func(t *testing.T) { checkPlugin(ctx, t, e, m) })
	t.Run("leader and an API Pod deleted under load", func(t *testing.T) { churn(ctx, t, k, m) })
	t.Run("helm upgrade under load", func(t *testing.T) { upgrade(ctx, t, e, k, m) })
	logs.startUninstall()
	uninstall(ctx, t, e, k)
}

// checkLogs: every line read, also of Pods the test deleted, is JSON and reports no denied
// verb, and the audit log records no denial.
func checkLogs(t *testing.T, e env, logs *logWatch) {
	t.Helper()
	bad := logs.findings()
	for i, b := range bad {
		if i == 20 {
			t.Errorf("… %d log findings in all (logs in %s)", len(bad), logs.dir)
			break
		}
		t.Error(b)
	}
	if e.auditLog == "" {
		return
	}
	logs.mu.Lock()
	until := logs.uninstallAt
	logs.mu.Unlock()
	if until.IsZero() {
		// The test's cleanup deletes the namespace while Pods still stop; it comes after this.
		until = time.Now()
	}
	denials, err := auditDenials(e.auditLog, logs.started, until)
	if err != nil {
		t.Error(err)
	}
	for _, d := range denials {
		t.Errorf("the API server denied %s", d)
	}
}

// upgrade changes a value every API Pod's spec carries, so that each rolls, under order load.
//
//nolint:thelper // a phase of the end-to-end test, not a helper: a failure names its own line
func upgrade(ctx context.Context, t *testing.T, e env, k *kube, m *mission) {
	l := startLoad(ctx, "upgrade", 4, m.production, m.sandbox)
	before := podUIDs(ctx, t, k, "api-production")
	// A changed value that every API Pod's spec carries, so that each rolls.
	if _, err := run(ctx, e, e.helm, "upgrade", release, e.chart, "-n", namespace, "--reuse-values",
		"--set", "api.logFlushInterval=50ms", "--wait", "--timeout", "10m"); err != nil {
		t.Error(err)
	}
	if _, err := k.readyPods(ctx, "api-production", 2); err != nil {
		t.Error(err)
	}
	for uid := range podUIDs(ctx, t, k, "api-production") {
		if before[uid] {
			t.Errorf("production API Pod %s was not replaced by the upgrade", uid)
		}
	}
	if err := l.stop(ctx); err != nil {
		t.Errorf("orders during the upgrade: %v", err)
	}
	t.Logf("%d orders placed during the upgrade", l.placed.Load())
}

// install creates the Secrets the README names and installs the chart as a platform team
// would, with two operator replicas and two production API replicas sharing Redis, and its
// NetworkPolicies on (the node enforces them).
func install(ctx context.Context, t *testing.T, e env, k *kube) {
	t.Helper()
	k.createSecret(ctx, t, "codeport-database", map[string]string{"url": e.databaseURL})
	k.createSecret(ctx, t, "codeport-codes-key", map[string]string{"key": randomKey(t)})
	k.createSecret(ctx, t, "codeport-redis", map[string]string{"url": e.redisURL})
	repo, tag, ok := strings.Cut(e.image, ":")
	if !ok || strings.Contains(tag, "/") {
		t.Fatalf("E2E_IMAGE %q: want repository:tag", e.image)
	}
	start := time.Now()
	if _, err := run(ctx, e, e.helm, "install", release, e.chart, "-n", namespace,
		"--set", "image.repository="+repo, "--set", "image.tag="+tag,
		"--set", "operator.replicas=2", "--set", "api.production.replicas=2",
		"--set", "redis.existingSecret=codeport-redis",
		"-f", networkPolicyValues(ctx, t, e, k),
		"--wait", "--timeout", "10m"); err != nil {
		t.Fatal(err)
	}
	t.Logf("helm install --wait took %s", time.Since(start).Round(100*time.Millisecond))
	// The pre-install hook Job ran to completion (Helm deletes it once it succeeded; its events stay).
	err := poll.Wait(ctx, pollPause, time.Minute, "the migration Job's Completed event", func() (bool, string) {
		var evs corev1.EventList
		if err := k.k8s.List(ctx, &evs, client.InNamespace(namespace)); err != nil {
			return false, err.Error()
		}
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Kind == "Job" && ev.InvolvedObject.Name == release+"-migrate" && ev.Reason == "Completed" {
				return true, ""
			}
		}
		return false, "no Completed event for Job " + release + "-migrate"
	})
	if err != nil {
		t.Error(err)
	}
	var jobs batchv1.JobList
	if err := k.k8s.List(ctx, &jobs, client.InNamespace(namespace)); err == nil {
		for _, j := range jobs.Items {
			if j.Status.Failed > 0 {
				t.Errorf("Job %s failed", j.Name)
			}
		}
	}
}

// checkPods: every component Ready, never restarted, running as the chart says, and the
// requests of everything on the node fit a 2-CPU node.
func checkPods(ctx context.Context, t *testing.T, k *kube) {
	t.Helper()
	for component, n := range map[string]int{"operator": 2, "api-production": 2, "api-sandbox": 1} {
		pods, err := k.readyPods(ctx, component, n)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, p := range pods {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.RestartCount > 0 {
					t.Errorf("%s: container %s restarted %d times", p.Name, cs.Name, cs.RestartCount)
				}
			}
			sc := p.Spec.SecurityContext
			if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
				t.Errorf("%s does not run as non-root", p.Name)
			}
			for _, c := range p.Spec.Containers {
				if c.SecurityContext == nil || !ptr.Deref(c.SecurityContext.ReadOnlyRootFilesystem, false) {
					t.Errorf("%s/%s: root filesystem is writable", p.Name, c.Name)
				}
			}
		}
	}
	checkProbeEvents(ctx, t, k)
	checkRequests(ctx, t, k)
}

// checkProbeEvents: a readiness or liveness probe that fires before the process listens records
// an Unhealthy event, and must not; the startup probe, which holds them back, polls until it does.
func checkProbeEvents(ctx context.Context, t *testing.T, k *kube) {
	t.Helper()
	var evs corev1.EventList
	if err := k.k8s.List(ctx, &evs, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs.Items {
		// A startup probe polls until the process listens (the operator's every second, up to
		// two minutes): its failures while a loaded node starts the process are what it is for.
		if ev.Reason == "Unhealthy" && !strings.HasPrefix(ev.Message, "Startup probe failed") {
			t.Errorf("event on %s: %s", ev.InvolvedObject.Name, ev.Message)
		}
	}
}

// checkRequests: the CPU requests of every Pod of the cluster fit a 2-CPU node.
func checkRequests(ctx context.Context, t *testing.T, k *kube) {
	t.Helper()
	var pods corev1.PodList
	if err := k.k8s.List(ctx, &pods); err != nil {
		t.Fatal(err)
	}
	total := resource.Quantity{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			total.Add(*c.Resources.Requests.Cpu())
		}
	}
	t.Logf("CPU requested by every Pod of the cluster: %s", total.String())
	if total.Cmp(nodeCPU) > 0 {
		t.Errorf("the Pods request %s CPU; a %s-CPU node cannot schedule them", total.String(), nodeCPU.String())
	}
}

func checkOperatorRBAC(ctx context.Context, t *testing.T, k *kube, root string) {
	t.Helper()
	pods, err := k.pods(ctx, "operator")
	if err != nil || len(pods) == 0 {
		t.Fatalf("operator pods: %v", err)
	}
	needs, err := operatorNeeds(root)
	if err != nil {
		t.Fatal(err)
	}
	deniedVerbs, err := k.checkOperatorRBAC(ctx, pods[0].Spec.ServiceAccountName, needs)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deniedVerbs {
		t.Errorf("the chart's RBAC does not let the operator %s", d)
	}
}

// mission is the onboarded sample partner as the test calls it.
type mission struct {
	productionKey, sandboxKey atomic.Pointer[string]
	production, sandbox       target
	productionBase            string
}

// onboard applies config/samples as the README says, lets the test's addresses call, funds the
// wallets for the load and imports production stock.
// sandboxOrdering is the ordering override of a Partner's sandbox, nil when it has none.
func sandboxOrdering(p *v1alpha1.Partner) *v1alpha1.OrderingSpec {
	if p.Spec.Environments == nil || p.Spec.Environments.Sandbox == nil {
		return nil
	}
	return p.Spec.Environments.Sandbox.Ordering
}

func onboard(ctx context.Context, t *testing.T, e env, k *kube, db appSecret) *mission {
	t.Helper()
	if _, err := run(ctx, e, e.kubectl, "apply", "-k", e.samples); err != nil {
		t.Fatal(err)
	}
	p := &v1alpha1.Partner{}
	if err := k.k8s.Get(ctx, client.ObjectKey{Namespace: partnersNS, Name: "acme"}, p); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(p.DeepCopy())
	for _, c := range e.callerCIDRs {
		if !slices.Contains(p.Spec.IPWhitelist, c) {
			p.Spec.IPWhitelist = append(p.Spec.IPWhitelist, c)
		}
	}
	// The load of the test is well above the samples' rate limits (600 and 120 a minute).
	p.Spec.RateLimit = &v1alpha1.RateLimitSpec{RequestsPerMinute: loadRateLimit}
	if o := p.Spec.Environments; o != nil && o.Sandbox != nil && o.Sandbox.RateLimit != nil {
		o.Sandbox.RateLimit.RequestsPerMinute = loadRateLimit
	}
	// Nor may the samples' daily spend limits stop it: a long test places tens of thousands of
	// euros of orders, and a 422 is no answer the load expects.
	for _, o := range []*v1alpha1.OrderingSpec{p.Spec.Ordering, sandboxOrdering(p)} {
		if o != nil && o.Limits != nil {
			o.Limits.DailySpend = nil
		}
	}
	if err := k.k8s.Patch(ctx, p, patch); err != nil {
		t.Fatalf("allow the test's addresses and load: %v", err)
	}
	for _, w := range []string{"acme-production", "acme-sandbox"} {
		tu := &v1alpha1.WalletTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: partnersNS, Name: w + "-e2e"},
			Spec: v1alpha1.WalletTopUpSpec{WalletRef: v1alpha1.LocalObjectReference{Name: w}, ID: "e2e-load",
				Currency: "EUR", Amount: "200000.00", Note: "end-to-end load"}}
		if err := k.k8s.Create(ctx, tu); err != nil {
			t.Fatalf("top up %s: %v", w, err)
		}
	}
	// The load starts once the funds are there: an order before would be refused for want of them.
	for _, w := range []string{"acme-production", "acme-sandbox"} {
		if _, err := run(ctx, e, e.kubectl, "-n", partnersNS, "wait", "wallettopup/"+w+"-e2e",
			"--for=condition=Ready", "--timeout=3m"); err != nil {
			t.Fatal(err)
		}
	}
	importStock(ctx, t, e, k, db, 3000)

	m := &mission{}
	keys := map[string]*atomic.Pointer[string]{"production": &m.productionKey, "sandbox": &m.sandboxKey}
	for envName, dst := range keys {
		key, err := k.waitKey(ctx, "acme-"+envName+"-key", "")
		if err != nil {
			t.Fatal(err)
		}
		dst.Store(&key)
	}
	m.productionBase = k.serviceBase(ctx, t, release+"-production")
	prod := newPartnerAPI(t, m.productionBase, &m.productionKey)
	sand := newPartnerAPI(t, k.serviceBase(ctx, t, release+"-sandbox"), &m.sandboxKey)
	// The first call through a new Service may find kube-proxy still programming it; the
	// partner's allowlist and the wallets reach the APIs through the database a moment later.
	var errs []error
	for _, c := range []struct {
		api  *partnerAPI
		want string
		dst  *target
	}{{prod, productionProduct, &m.production}, {sand, "", &m.sandbox}} {
		err := poll.Wait(ctx, pollPause, 3*time.Minute, "the catalog through "+c.api.base, func() (bool, string) {
			code, price, err := c.api.firstProduct(ctx, c.want)
			if err != nil {
				return false, err.Error()
			}
			*c.dst = target{api: c.api, product: code, price: price}
			return true, ""
		})
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return m
}

// importStock loads production codes as an operator of the platform would: `codeport codes
// import` in a Job of the release's image, with the release's Secrets and the database URL in db.
func importStock(ctx context.Context, t *testing.T, e env, k *kube, db appSecret, n int) {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "E2E-%d-%06d\n", time.Now().Unix(), i)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "e2e-stock"},
		Data: map[string]string{"codes.txt": b.String()}}
	if err := k.k8s.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	envFrom := func(name, secret, key string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}}
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "e2e-stock"},
		Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](2), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "import", Image: e.image, ImagePullPolicy: corev1.PullIfNotPresent,
				Args: []string{"codes", "import", "--product", productionProduct, "/stock/codes.txt"},
				Env: []corev1.EnvVar{
					envFrom("CODEPORT_DATABASE_URL", db.name, db.key),
					envFrom("CODEPORT_CODES_KEY", "codeport-codes-key", "key"),
				},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem: ptr.To(true), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "stock", MountPath: "/stock"}},
			}},
			Volumes: []corev1.Volume{{Name: "stock", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "e2e-stock"}}}}},
		}}}}
	if err := k.k8s.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	err := poll.Wait(ctx, pollPause, 5*time.Minute, "the stock import Job", func() (bool, string) {
		if err := k.k8s.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err.Error()
		}
		if job.Status.Failed > 2 {
			t.Fatalf("stock import failed; see its Pod's log")
		}
		return job.Status.Succeeded == 1, fmt.Sprintf("succeeded %d, failed %d", job.Status.Succeeded, job.Status.Failed)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitKey waits until the Secret holds a key other than notEqual.
func (k *kube) waitKey(ctx context.Context, secret, notEqual string) (string, error) {
	key := ""
	err := poll.Wait(ctx, pollPause, 3*time.Minute, "a key in Secret "+secret, func() (bool, string) {
		var s corev1.Secret
		if err := k.k8s.Get(ctx, client.ObjectKey{Namespace: partnersNS, Name: secret}, &s); err != nil {
			return false, err.Error()
		}
		key = string(s.Data["apiKey"])
		return key != "" && key != notEqual, "no new key yet"
	})
	return key, err
}

// rotate raises an ApiKey's rotation and waits for its Secret (<name>-key) to hold a new key.
func (k *kube) rotate(ctx context.Context, name, old string) (string, error) {
	ak := &v1alpha1.ApiKey{}
	if err := k.k8s.Get(ctx, client.ObjectKey{Namespace: partnersNS, Name: name}, ak); err != nil {
		return "", fmt.Errorf("get ApiKey %s: %w", name, err)
	}
	patch := client.MergeFrom(ak.DeepCopy())
	ak.Spec.Rotation++
	if err := k.k8s.Patch(ctx, ak, patch); err != nil {
		return "", fmt.Errorf("rotate ApiKey %s: %w", name, err)
	}
	return k.waitKey(ctx, name+"-key", old)
}

// serviceBase is a Service's address as this machine reaches it: its ClusterIP (the test runs
// where kube-proxy routes Service addresses, as on the node itself).
func (k *kube) serviceBase(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	var svc corev1.Service
	if err := k.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &svc); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
}

// rotateKey raises the production ApiKey's rotation and checks, on each production API Pod
// directly, that the new key is accepted and the old one refused.
//
//nolint:thelper // a phase of the end-to-end test, not a helper: a failure names its own line
func rotateKey(ctx context.Context, t *testing.T, k *kube, m *mission) {
	old := *m.productionKey.Load()
	fresh, err := k.rotate(ctx, "acme-production", old)
	if err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	m.productionKey.Store(&fresh)
	pods, err := k.readyPods(ctx, "api-production", 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		api := newPartnerAPI(t, fmt.Sprintf("http://%s:8080", p.Status.PodIP), &m.productionKey)
		var tookNew, tookOld time.Duration
		err := poll.Wait(ctx, pollPause, time.Minute, p.Name+": new key accepted, old key refused", func() (bool, string) {
			okNew, errNew := api.do(ctx, fresh, http.MethodGet, "/v2/ping", nil)
			okOld, errOld := api.do(ctx, old, http.MethodGet, "/v2/ping", nil)
			if err := errors.Join(errNew, errOld); err != nil {
				return false, err.Error()
			}
			if okNew.status == http.StatusOK && tookNew == 0 {
				tookNew = time.Since(changed)
			}
			if okOld.status == http.StatusUnauthorized && tookOld == 0 {
				tookOld = time.Since(changed)
			}
			return okNew.status == http.StatusOK && okOld.status == http.StatusUnauthorized,
				fmt.Sprintf("new key %d, old key %d", okNew.status, okOld.status)
		})
		if err != nil {
			t.Error(err)
			continue
		}
		// Measured, not asserted: the machine is shared; the soak test holds the bound.
		t.Logf("%s: new key accepted after %s, old key refused after %s (from the Secret's change)",
			p.Name, tookNew.Round(time.Millisecond), tookOld.Round(time.Millisecond))
	}
}

func podUIDs(ctx context.Context, t *testing.T, k *kube, component string) map[types.UID]bool {
	t.Helper()
	pods, err := k.pods(ctx, component)
	if err != nil {
		t.Fatal(err)
	}
	uids := map[types.UID]bool{}
	for _, p := range pods {
		uids[p.UID] = true
	}
	return uids
}

// leaderPod is the operator Pod holding the Lease.
func (k *kube) leaderPod(ctx context.Context) (string, error) {
	var lease coordinationv1.Lease
	if err := k.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "operator.codeport.dev"}, &lease); err != nil {
		return "", fmt.Errorf("lease: %w", err)
	}
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	// controller-runtime's identity is "<hostname>_<uuid>"; the hostname is the Pod's name.
	name, _, _ := strings.Cut(holder, "_")
	return name, nil
}

// churn deletes the leader operator Pod and one production API Pod while orders flow through
// both Services: no order may be lost and no answer may be a 5xx; a new leader takes over and
// reconciles (a key rotation is issued after it).
//
//nolint:thelper // a phase of the end-to-end test, not a helper: a failure names its own line
func churn(ctx context.Context, t *testing.T, k *kube, m *mission) {
	l := startLoad(ctx, "churn", 4, m.production, m.sandbox)
	leader, err := k.leaderPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	apiPods, err := k.pods(ctx, "api-production")
	if err != nil || len(apiPods) == 0 {
		t.Fatalf("production API pods: %v", err)
	}
	// Let the load reach both replicas first.
	if err := poll.Wait(ctx, pollPause, 2*time.Minute, "orders before the deletions", func() (bool, string) {
		return l.placed.Load() >= 20, fmt.Sprintf("%d placed", l.placed.Load())
	}); err != nil {
		t.Error(err)
	}
	for _, name := range []string{leader, apiPods[0].Name} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
		if err := k.k8s.Delete(ctx, pod); err != nil {
			t.Errorf("delete pod %s: %v", name, err)
		}
	}
	deleted := time.Now()
	err = poll.Wait(ctx, pollPause, 3*time.Minute, "a new leader", func() (bool, string) {
		now, err := k.leaderPod(ctx)
		if err != nil {
			return false, err.Error()
		}
		return now != "" && now != leader, "leader " + now
	})
	if err != nil {
		t.Error(err)
	} else {
		t.Logf("a new operator took the Lease %s after the leader Pod was deleted",
			time.Since(deleted).Round(100*time.Millisecond))
	}
	if _, err := k.readyPods(ctx, "api-production", 2); err != nil {
		t.Error(err)
	}
	if _, err := k.readyPods(ctx, "operator", 2); err != nil {
		t.Error(err)
	}
	// The new leader reconciles: a rotation of the sandbox key is issued.
	fresh, err := k.rotate(ctx, "acme-sandbox", *m.sandboxKey.Load())
	if err != nil {
		t.Errorf("the new leader did not rotate the sandbox key: %v", err)
	} else {
		m.sandboxKey.Store(&fresh)
	}
	if err := l.stop(ctx); err != nil {
		t.Errorf("orders during the deletions: %v", err)
	}
	t.Logf("%d orders placed during the deletions", l.placed.Load())
}

// uninstall follows docs/operator.md's order: the partners' namespace deleted while the
// operator runs (its finalizers revoke the keys, then let go), then helm uninstall, which leaves
// the CRDs and no Pod, then the release's namespace.
//
//nolint:thelper // a phase of the end-to-end test, not a helper: a failure names its own line
func uninstall(ctx context.Context, t *testing.T, e env, k *kube) {
	t.Run("partners deleted, helm uninstall, then the namespace deleted", func(t *testing.T) {
		if err := k.k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: partnersNS}}); err != nil {
			t.Fatalf("delete namespace %s: %v", partnersNS, err)
		}
		if err := k.waitNamespaceGone(ctx, partnersNS); err != nil {
			t.Fatal(err)
		}
		if _, err := run(ctx, e, e.helm, "uninstall", release, "-n", namespace, "--wait", "--timeout", "5m"); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"partners.codeport.dev", "apikeys.codeport.dev", "wallets.codeport.dev"} {
			var crd metav1.PartialObjectMetadata
			crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
			if err := k.k8s.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
				t.Errorf("CRD %s after uninstall: %v", name, err)
			}
		}
		err := poll.Wait(ctx, pollPause, 3*time.Minute, "no Pod of the release", func() (bool, string) {
			var pods corev1.PodList
			err := k.k8s.List(ctx, &pods, client.InNamespace(namespace),
				client.MatchingLabels{"app.kubernetes.io/instance": release})
			if err != nil {
				return false, err.Error()
			}
			return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items))
		})
		if err != nil {
			t.Error(err)
		}
		if err := k.k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
			t.Errorf("delete namespace %s: %v", namespace, err)
		}
		if err := k.waitNamespaceGone(ctx, namespace); err != nil {
			t.Error(err)
		}
	})
}

// waitNamespaceGone waits until a deleted namespace is gone, and says what holds it otherwise.
func (k *kube) waitNamespaceGone(ctx context.Context, ns string) error {
	return poll.Wait(ctx, pollPause, 3*time.Minute, "namespace "+ns+" deleted", func() (bool, string) {
		var n corev1.Namespace
		err := k.k8s.Get(ctx, client.ObjectKey{Name: ns}, &n)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		for _, c := range n.Status.Conditions {
			if c.Status == corev1.ConditionTrue {
				return false, fmt.Sprintf("%s: %s", c.Type, c.Message)
			}
		}
		return false, string(n.Status.Phase)
	})
}

// cleanup leaves the cluster as the test found it, also after a failure: the release, the
// namespaces (their codeport finalizers dropped when no operator is left to drop them) and
// the CRDs the release kept.
//
//nolint:thelper // a phase of the end-to-end test, not a helper: a failure names its own line
func cleanup(t *testing.T, e env, k *kube) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, _ = run(ctx, e, e.helm, "uninstall", release, "-n", namespace, "--wait", "--timeout", "2m")
	for _, list := range []client.ObjectList{&v1alpha1.WalletTopUpList{}, &v1alpha1.WalletList{}, &v1alpha1.ApiKeyList{},
		&v1alpha1.CatalogList{}, &v1alpha1.CatalogShardList{}, &v1alpha1.PartnerList{}} {
		if err := k.k8s.List(ctx, list, client.InNamespace(partnersNS)); err != nil {
			continue
		}
		objs, err := meta.ExtractList(list)
		if err != nil {
			continue
		}
		for _, o := range objs {
			obj, ok := o.(client.Object)
			if ok && len(obj.GetFinalizers()) > 0 {
				_ = k.k8s.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
			}
		}
	}
	for _, ns := range []string{partnersNS, namespace} {
		_ = k.k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	_, err := run(ctx, e, e.kubectl, "delete", "crd", "-l", "app.kubernetes.io/part-of=codeport", "--wait=true")
	if err != nil {
		t.Logf("delete CRDs: %v", err)
	}
}
