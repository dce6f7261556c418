//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeport/codeport/internal/test/poll"

	"github.com/jackc/pgx/v5"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CloudNativePG's objects, read and written as unstructured: the test speaks to the operator
// through its API as kubectl would, without compiling its Go types into the project.
var (
	cnpgClusterGVK = schema.GroupVersionKind{Group: "postgresql.cnpg.io", Version: "v1", Kind: "Cluster"}
	cnpgBackupGVK  = schema.GroupVersionKind{Group: "postgresql.cnpg.io", Version: "v1", Kind: "Backup"}
)

const (
	// cnpgNamespace and cnpgDeployment are where CloudNativePG's release manifest runs it.
	cnpgNamespace  = "cnpg-system"
	cnpgDeployment = "cnpg-controller-manager"
	// localStorageClass holds the node's local volumes the instances get (localVolumes).
	localStorageClass = "e2e-local"
	// healthyPhase is CloudNativePG's Cluster phase once every instance runs and replicates.
	healthyPhase = "Cluster in healthy state"
	// switchoverPhase is the phase `kubectl cnpg promote` writes to ask for a switchover.
	switchoverPhase = "Switchover in progress"
)

// installCNPG applies CloudNativePG's release manifest, as its documentation installs it, and
// waits until its webhooks admit a Cluster (the Deployment may be Available a moment before
// the webhook configurations carry its certificate).
func installCNPG(ctx context.Context, t *testing.T, e env, k *kube) {
	t.Helper()
	start := time.Now()
	if _, err := run(ctx, e, e.kubectl, "apply", "--server-side", "-f", e.cnpg.manifest); err != nil {
		t.Fatal(err)
	}
	err := poll.Wait(ctx, pollPause, 5*time.Minute, "CloudNativePG's operator available", func() (bool, string) {
		var d appsv1.Deployment
		if err := k.k8s.Get(ctx, client.ObjectKey{Namespace: cnpgNamespace, Name: cnpgDeployment}, &d); err != nil {
			return false, err.Error()
		}
		return d.Status.AvailableReplicas > 0, fmt.Sprintf("%d available", d.Status.AvailableReplicas)
	})
	if err != nil {
		t.Fatal(err)
	}
	probe := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "webhook-probe", "namespace": "default"},
		"spec":     map[string]any{"instances": int64(1), "storage": map[string]any{"size": "1Gi"}},
	}}
	probe.SetGroupVersionKind(cnpgClusterGVK)
	err = poll.Wait(ctx, pollPause, 3*time.Minute, "CloudNativePG's webhook admitting a Cluster", func() (bool, string) {
		err := k.k8s.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return err == nil, fmt.Sprint(err)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CloudNativePG %s installed in %s", e.cnpg.version, time.Since(start).Round(100*time.Millisecond))
}

// localVolumes creates n local PersistentVolumes on the node, each a directory of the run, in a
// StorageClass that binds them when an instance's Pod is scheduled. No provisioner runs on the
// node (it would need an image of its own for its helper Pods); a platform on bare metal
// pre-creates its local volumes the same way.
func localVolumes(ctx context.Context, t *testing.T, e env, k *kube, n int, size string) {
	t.Helper()
	var nodes corev1.NodeList
	if err := k.k8s.List(ctx, &nodes); err != nil || len(nodes.Items) != 1 {
		t.Fatalf("want the one node of this cluster: %v (%d nodes)", err, len(nodes.Items))
	}
	node := nodes.Items[0].Name
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: localStorageClass},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimRetain)}
	if err := k.k8s.Create(ctx, sc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for i := range n {
		name := fmt.Sprintf("e2e-local-%02d", i)
		dir := filepath.Join(e.cnpg.volumes, name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              localStorageClass,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname,
							Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}},
			}}
		if err := k.k8s.Create(ctx, pv); err != nil {
			t.Fatalf("create PersistentVolume %s: %v", name, err)
		}
	}
}

// removeLocalVolumes deletes the test's PersistentVolumes, the StorageClass and their
// directories, also after a failure.
func removeLocalVolumes(ctx context.Context, e env, k *kube) {
	var pvs corev1.PersistentVolumeList
	if err := k.k8s.List(ctx, &pvs); err == nil {
		for i := range pvs.Items {
			if pvs.Items[i].Spec.StorageClassName == localStorageClass {
				_ = k.k8s.Delete(ctx, &pvs.Items[i])
			}
		}
	}
	_ = k.k8s.Delete(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: localStorageClass}})
	_ = os.RemoveAll(e.cnpg.volumes)
}

// cluster reads a CloudNativePG Cluster.
func (k *kube) cluster(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	c := &unstructured.Unstructured{}
	c.SetGroupVersionKind(cnpgClusterGVK)
	if err := k.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, c); err != nil {
		return nil, fmt.Errorf("get Cluster %s: %w", name, err)
	}
	return c, nil
}

// clusterState is what the test reads of a Cluster's status.
type clusterState struct {
	phase          string
	currentPrimary string
	targetPrimary  string
	ready          int64
}

func (k *kube) clusterState(ctx context.Context, name string) (clusterState, error) {
	c, err := k.cluster(ctx, name)
	if err != nil {
		return clusterState{}, err
	}
	var s clusterState
	s.phase, _, _ = unstructured.NestedString(c.Object, "status", "phase")
	s.currentPrimary, _, _ = unstructured.NestedString(c.Object, "status", "currentPrimary")
	s.targetPrimary, _, _ = unstructured.NestedString(c.Object, "status", "targetPrimary")
	s.ready, _, _ = unstructured.NestedInt64(c.Object, "status", "readyInstances")
	return s, nil
}

// waitHealthy waits until the Cluster runs all its instances, replicating, with a primary
// other than notPrimary (empty: any), and returns the primary.
func (k *kube) waitHealthy(
	ctx context.Context, name string, instances int64, notPrimary string, limit time.Duration,
) (string, error) {
	var s clusterState
	err := poll.Wait(ctx, pollPause, limit, "Cluster "+name+" healthy", func() (bool, string) {
		var err error
		if s, err = k.clusterState(ctx, name); err != nil {
			return false, err.Error()
		}
		ok := s.phase == healthyPhase && s.ready == instances && s.currentPrimary != "" &&
			s.currentPrimary == s.targetPrimary && s.currentPrimary != notPrimary
		return ok, fmt.Sprintf("phase %q, %d of %d ready, primary %q (target %q)",
			s.phase, s.ready, instances, s.currentPrimary, s.targetPrimary)
	})
	return s.currentPrimary, err
}

// waitRecovered waits until the Cluster is healthy again after losing its primary: with another
// primary, or with the same one once its postgres container has restarted (more than restarts
// times), which is how the instance manager may answer a crash, promoting no one.
func (k *kube) waitRecovered(ctx context.Context, primary string, restarts int32, limit time.Duration) (string, error) {
	var s clusterState
	err := poll.Wait(ctx, pollPause, limit, "Cluster "+dbCluster+" recovered", func() (bool, string) {
		var err error
		if s, err = k.clusterState(ctx, dbCluster); err != nil {
			return false, err.Error()
		}
		healthy := s.phase == healthyPhase && s.ready == dbInstances && s.currentPrimary != "" &&
			s.currentPrimary == s.targetPrimary
		if healthy && s.currentPrimary == primary {
			n, err := k.postgresRestarts(ctx, primary)
			healthy = err == nil && n > restarts
		}
		return healthy, fmt.Sprintf("phase %q, %d of %d ready, primary %q (target %q)",
			s.phase, s.ready, dbInstances, s.currentPrimary, s.targetPrimary)
	})
	return s.currentPrimary, err
}

// postgresRestarts is how often the postgres container of an instance Pod has restarted (0 for a
// Pod that is gone: its replacement starts afresh).
func (k *kube) postgresRestarts(ctx context.Context, pod string) (int32, error) {
	var p corev1.Pod
	err := k.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: pod}, &p)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("get pod %s: %w", pod, err)
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == "postgres" {
			return c.RestartCount, nil
		}
	}
	return 0, nil
}

// switchover asks CloudNativePG to make another instance the primary, as `kubectl cnpg promote`
// does: the Cluster's status names the target primary and the switchover phase, and the
// operator demotes the current primary (a fast shutdown after its WAL is sent) and promotes the
// target.
func (k *kube) switchover(ctx context.Context, name, target string) error {
	c, err := k.cluster(ctx, name)
	if err != nil {
		return err
	}
	status, _, _ := unstructured.NestedMap(c.Object, "status")
	status["targetPrimary"] = target
	status["targetPrimaryTimestamp"] = time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")
	status["phase"] = switchoverPhase
	status["phaseReason"] = "Switching over to " + target
	if err := unstructured.SetNestedMap(c.Object, status, "status"); err != nil {
		return fmt.Errorf("switchover: %w", err)
	}
	if err := k.k8s.Status().Update(ctx, c); err != nil {
		return fmt.Errorf("switchover to %s: %w", target, err)
	}
	return nil
}

// instancePods are the Cluster's instance Pods by name.
func (k *kube) instancePods(ctx context.Context, cluster string) (map[string]corev1.Pod, error) {
	var list corev1.PodList
	err := k.k8s.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{
		"cnpg.io/cluster": cluster, "cnpg.io/podRole": "instance"})
	if err != nil {
		return nil, fmt.Errorf("list instances of %s: %w", cluster, err)
	}
	pods := map[string]corev1.Pod{}
	for _, p := range list.Items {
		pods[p.Name] = p
	}
	return pods, nil
}

// postmasterPID finds, among this node's processes, the postgres server of a Pod: the
// postgres process in the Pod's cgroup whose parent is not a postgres process.
func postmasterPID(pod types.UID) (int, error) {
	// The cgroup path names the Pod by its UID, with dashes (cgroupfs) or underscores (systemd).
	marks := []string{string(pod), strings.ReplaceAll(string(pod), "-", "_")}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("read /proc: %w", err)
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || procComm(pid) != "postgres" {
			continue
		}
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil || !slices.ContainsFunc(marks, func(m string) bool { return strings.Contains(string(cg), m) }) {
			continue
		}
		if procComm(procParent(pid)) != "postgres" {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no postgres server process of Pod %s on this node", pod)
}

func procComm(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func procParent(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid …: comm may hold spaces, so read after its closing parenthesis.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// killPostmaster sends SIGKILL to the postgres server of an instance Pod, on the node: the
// crash of the server alone, its Pod and volume left as they are.
func (k *kube) killPostmaster(ctx context.Context, pod string) error {
	var p corev1.Pod
	if err := k.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: pod}, &p); err != nil {
		return fmt.Errorf("get pod %s: %w", pod, err)
	}
	pid, err := postmasterPID(p.UID)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill postgres %d of %s: %w", pid, pod, err)
	}
	return nil
}

// appDB connects to the Cluster's primary through its read-write Service as the database's
// owner (CloudNativePG's <cluster>-app Secret), from this machine, as an operator with
// kubectl access would through a port-forward.
func (k *kube) appDB(ctx context.Context, cluster string) (*pgx.Conn, error) {
	var s corev1.Secret
	if err := k.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: cluster + "-app"}, &s); err != nil {
		return nil, fmt.Errorf("app secret of %s: %w", cluster, err)
	}
	var svc corev1.Service
	if err := k.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: cluster + "-rw"}, &svc); err != nil {
		return nil, fmt.Errorf("read-write service of %s: %w", cluster, err)
	}
	u := url.URL{Scheme: "postgres", User: url.UserPassword(string(s.Data["username"]), string(s.Data["password"])),
		Host: svc.Spec.ClusterIP + ":5432", Path: "/" + string(s.Data["dbname"]),
		RawQuery: "sslmode=require&connect_timeout=5"}
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cluster, err)
	}
	return conn, nil
}

// psql runs a statement as postgres on an instance, over its local socket (the superuser has
// no password and no network access under CloudNativePG's defaults).
func psql(ctx context.Context, e env, pod, sql string) (string, error) {
	out, err := run(ctx, e, e.kubectl, "-n", namespace, "exec", pod, "-c", "postgres", "--",
		"psql", "-X", "-U", "postgres", "-d", "postgres", "-Atc", sql)
	return strings.TrimSpace(out), err
}

// backup takes an on-demand base backup of the Cluster, as docs/operations.md does, and waits
// until it is completed.
func (k *kube) backup(ctx context.Context, cluster, name string) error {
	b := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec":     map[string]any{"cluster": map[string]any{"name": cluster}, "method": "barmanObjectStore"},
	}}
	b.SetGroupVersionKind(cnpgBackupGVK)
	if err := k.k8s.Create(ctx, b); err != nil {
		return fmt.Errorf("create Backup %s: %w", name, err)
	}
	return poll.Wait(ctx, pollPause, 5*time.Minute, "Backup "+name+" completed", func() (bool, string) {
		if err := k.k8s.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, err.Error()
		}
		phase, _, _ := unstructured.NestedString(b.Object, "status", "phase")
		if phase == "failed" {
			msg, _, _ := unstructured.NestedString(b.Object, "status", "error")
			return false, "failed: " + msg
		}
		return phase == "completed", "phase " + phase
	})
}

// errNoReplica is a Cluster without a ready instance to switch over to.
var errNoReplica = errors.New("no ready replica")

// readyReplica names a ready instance other than the primary.
func (k *kube) readyReplica(ctx context.Context, cluster, primary string) (string, error) {
	pods, err := k.instancePods(ctx, cluster)
	if err != nil {
		return "", err
	}
	for _, name := range slices.Sorted(maps.Keys(pods)) {
		p := pods[name]
		if name != primary && podReady(&p) {
			return name, nil
		}
	}
	return "", errNoReplica
}

// objectStore is the S3-compatible store the Cluster archives WAL and base backups to.
type objectStore struct {
	accessKey, secretKey string
	// endpoint is the store's address inside the cluster; destination the bucket and folder.
	endpoint, destination string
}

// checkAlertMetrics: every CloudNativePG series the chart's alerts read
// (charts/codeport/files/cnpg-rules.yaml) is exported by the primary's instance manager, and
// none of them says an alert would fire on a healthy Cluster.
func checkAlertMetrics(ctx context.Context, t *testing.T, k *kube, root, primary string) {
	t.Helper()
	rules, err := os.ReadFile(filepath.Join(root, "charts", "codeport", "files", "cnpg-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	metric := regexp.MustCompile(`\bcnpg_[a-z_]+`)
	names := slices.Compact(slices.Sorted(slices.Values(metric.FindAllString(string(rules), -1))))
	var p corev1.Pod
	if err := k.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: primary}, &p); err != nil {
		t.Fatal(err)
	}
	// The exporter runs its queries on a schedule of its own: the first scrapes of a new primary
	// may lack their series.
	var series map[string]float64
	err = poll.Wait(ctx, pollPause, 3*time.Minute, "the series the alerts read", func() (bool, string) {
		var err error
		if series, err = scrape(ctx, fmt.Sprintf("http://%s:9187/metrics", p.Status.PodIP)); err != nil {
			return false, err.Error()
		}
		var missing []string
		for _, name := range names {
			if _, ok := series[name]; !ok {
				missing = append(missing, name)
			}
		}
		return len(missing) == 0, "CloudNativePG's instance manager does not export " + strings.Join(missing, ", ")
	})
	if err != nil {
		t.Fatal(err)
	}
	if series["cnpg_pg_replication_streaming_replicas"] < series["cnpg_collector_sync_replicas"] {
		t.Errorf("a healthy Cluster's primary streams to %v standbys and waits for %v",
			series["cnpg_pg_replication_streaming_replicas"], series["cnpg_collector_sync_replicas"])
	}
}

// scrape reads a Prometheus text endpoint: each series name with the value of its first sample
// (for a label set such as sync_replicas{value="observed"}, the one there is).
func scrape(ctx context.Context, url string) (map[string]float64, error) {
	samples, err := scrapeSeries(ctx, url)
	if err != nil {
		return nil, err
	}
	series := map[string]float64{}
	for _, s := range samples.ordered {
		name, _, _ := strings.Cut(s, "{")
		if _, seen := series[name]; !seen {
			series[name] = samples.values[s]
		}
	}
	return series, nil
}

// scrapeSeries reads a Prometheus text endpoint: each series (its name and labels as written)
// with its value.
func scrapeSeries(ctx context.Context, url string) (samplesOf, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return samplesOf{}, err
	}
	resp, err := http.DefaultClient.Do(req) //contract:unchecked Prometheus metrics, which no document describes
	if err != nil {
		return samplesOf{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return samplesOf{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	samples := samplesOf{values: map[string]float64{}}
	for line := range strings.SplitSeq(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cut := strings.LastIndexByte(line, ' ')
		if cut < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[cut+1:], 64)
		if err != nil {
			continue
		}
		samples.ordered = append(samples.ordered, line[:cut])
		samples.values[line[:cut]] = v
	}
	return samples, nil
}

// samplesOf is one scrape: the value of each series, and the series in the order written.
type samplesOf struct {
	values  map[string]float64
	ordered []string
}

// first is the value of the first series of the metric name whose labels contain label.
func (s samplesOf) first(name, label string) (float64, bool) {
	for _, series := range s.ordered {
		metric, labels, _ := strings.Cut(series, "{")
		if metric == name && strings.Contains(labels, label) {
			return s.values[series], true
		}
	}
	return 0, false
}

// standbyCut is PostgreSQL's port dropped, both ways, in the network namespace of each standby
// of a Cluster: replication from the primary stops while the primary itself goes on serving, as
// when the network between the primary's node and the others' fails.
type standbyCut struct{ pods []types.UID }

// replicationRules are the iptables rules of a cut: the standby's connections to a PostgreSQL
// port, and whatever comes back from one.
var replicationRules = [][]string{
	{"OUTPUT", "-p", "tcp", "--dport", "5432", "-j", "DROP"},
	{"INPUT", "-p", "tcp", "--sport", "5432", "-j", "DROP"},
}

// cutStandbys cuts every instance of the Cluster but the primary off from it.
func (k *kube) cutStandbys(ctx context.Context, cluster, primary string) (*standbyCut, error) {
	pods, err := k.instancePods(ctx, cluster)
	if err != nil {
		return nil, err
	}
	c := &standbyCut{}
	for name, p := range pods {
		if name == primary {
			continue
		}
		c.pods = append(c.pods, p.UID)
		if err := podIPTables(ctx, p.UID, "-I"); err != nil {
			return c, err
		}
	}
	return c, nil
}

// heal removes the cut's rules.
func (c *standbyCut) heal(ctx context.Context) error {
	var errs []error
	for _, uid := range c.pods {
		errs = append(errs, podIPTables(ctx, uid, "-D"))
	}
	return errors.Join(errs...)
}

// podIPTables inserts (-I) or deletes (-D) replicationRules in a Pod's network namespace, which
// it enters through the Pod's postgres server: any process of the Pod shares it.
func podIPTables(ctx context.Context, pod types.UID, op string) error {
	pid, err := postmasterPID(pod)
	if err != nil {
		return err
	}
	for _, rule := range replicationRules {
		args := append([]string{"-t", strconv.Itoa(pid), "-n", "iptables", op}, rule...)
		if out, err := exec.CommandContext(ctx, "nsenter", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("iptables %s %v in Pod %s: %w: %s", op, rule, pod, err, out)
		}
	}
	return nil
}

// loseCutOffPrimary cuts the primary off from its standbys for a while under load, then loses it
// with what it committed meanwhile, as a node lost after its network: its Pod deleted at once
// and its postgres killed. The standbys are joined again only once that postgres is gone, so
// nothing it committed while cut off can still reach them. Under synchronous replication those
// commits waited for a standby and were never acknowledged; under asynchronous replication they
// were, and the promoted standby lacks them.
//
// It returns, besides, how long into the cut the primary's exporter first showed the condition of
// the chart's CodeportSynchronousStandbysMissing alert (0: not within the cut).
func (k *kube) loseCutOffPrimary(ctx context.Context, primary string, cutFor time.Duration) (time.Duration, error) {
	var p corev1.Pod
	if err := k.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: primary}, &p); err != nil {
		return 0, fmt.Errorf("get pod %s: %w", primary, err)
	}
	pid, err := postmasterPID(p.UID)
	if err != nil {
		return 0, err
	}
	cut, err := k.cutStandbys(ctx, dbCluster, primary)
	if err != nil {
		return 0, errors.Join(err, cut.heal(context.WithoutCancel(ctx)))
	}
	stalled := watchStandbyAlert(ctx, p.Status.PodIP, cutFor)
	err = k.k8s.Delete(ctx, &p, client.GracePeriodSeconds(0))
	if kerr := syscall.Kill(pid, syscall.SIGKILL); kerr != nil && !errors.Is(kerr, syscall.ESRCH) {
		err = errors.Join(err, fmt.Errorf("kill postgres %d of %s: %w", pid, primary, kerr))
	}
	gone := poll.Wait(ctx, pollPause, time.Minute, "the cut-off primary's postgres gone", func() (bool, string) {
		_, statErr := os.Stat(fmt.Sprintf("/proc/%d", pid))
		return os.IsNotExist(statErr), fmt.Sprintf("pid %d", pid)
	})
	return stalled, errors.Join(err, gone, cut.heal(context.WithoutCancel(ctx)))
}

// watchStandbyAlert scrapes the exporter of the primary at podIP every second for d, and returns
// how long it took until its series met the condition of CodeportSynchronousStandbysMissing:
// fewer standbys streaming than synchronous replication waits for, on a primary (0: never).
func watchStandbyAlert(ctx context.Context, podIP string, d time.Duration) time.Duration {
	start := time.Now()
	var met time.Duration
	for time.Since(start) < d && ctx.Err() == nil {
		if met == 0 {
			samples, err := scrapeSeries(ctx, fmt.Sprintf("http://%s:9187/metrics", podIP))
			waited, ok1 := samples.first("cnpg_collector_sync_replicas", `value="observed"`)
			streaming, ok2 := samples.first("cnpg_pg_replication_streaming_replicas", "")
			recovery, ok3 := samples.first("cnpg_pg_replication_in_recovery", "")
			if err == nil && ok1 && ok2 && ok3 && waited > streaming && recovery == 0 {
				met = time.Since(start)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return met
}
