package devenv

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/crdvalidation"
)

// cluster is a real kube-apiserver with the generated CRDs installed, and what is needed to
// reach it as a client and as kubectl does.
type cluster struct {
	client client.Client
	// kubeconfig is the path of a kubeconfig file for the kubectl binary.
	kubeconfig string
}

// startCluster starts envtest with config/crd/bases. Its client validates fields strictly, as
// kubectl does by default (--validate=strict).
func startCluster(t *testing.T) *cluster {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`, or export KUBEBUILDER_ASSETS=\"$(hack/envtest.sh)\"")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		// envtest's 20 s per attempt is too short for a kube-apiserver on a busy machine.
		ControlPlaneStartTimeout: 2 * time.Minute,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme, FieldValidation: metav1.FieldValidationStrict})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	user, err := env.AddUser(envtest.User{Name: "developer", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		t.Fatalf("add kubectl user: %v", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return &cluster{client: c, kubeconfig: path}
}

// TestManifestsAdmittedAsByTheAPIServer holds LoadManifests to the real API server: it refuses
// exactly what the server refuses, in the server's words as kubectl prints them, and keeps what
// it admits as the server stores it.
func TestManifestsAdmittedAsByTheAPIServer(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	for _, ns := range []string{"partners", "default"} {
		err := c.client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create namespace %s: %v", ns, err)
		}
	}
	t.Run("refusals", c.testRefusals)
	t.Run("samples", c.testSamplesStoredAsByTheServer)
	t.Run("updates", c.testUpdatesAcrossLoads)
}

const partnerHeader = `apiVersion: codeport.dev/v1alpha1
kind: Partner
metadata:
  name: acme
  namespace: partners
`

const catalogHeader = `apiVersion: codeport.dev/v1alpha1
kind: Catalog
metadata:
  name: acme-eu
  namespace: partners
`

const walletHeader = `apiVersion: codeport.dev/v1alpha1
kind: Wallet
metadata:
  name: acme-sandbox
  namespace: partners
`

// refusalCases are documents the API server refuses, one for each way it refuses: required
// fields, bounds, patterns, enums, list sets and maps, CEL rules on values and on objects, the
// note that CEL was skipped, names, and fields the schema does not declare.
var refusalCases = []struct{ name, doc string }{
	{"required field missing", partnerHeader + `spec:
  displayName: Acme
`},
	{"above the maximum", partnerHeader + `spec:
  displayName: Acme
  contactEmail: ops@acme.example
  rateLimit: {requestsPerMinute: 2000000}
`},
	{"several errors and CEL skipped", partnerHeader + `spec:
  displayName: ""
  rateLimit: {requestsPerMinute: 0}
  ipWhitelist: [nowhere]
`},
	{"pattern", partnerHeader + `spec:
  displayName: Acme
  contactEmail: ops-at-acme
`},
	{"CEL rule on a list item", partnerHeader + `spec:
  displayName: Acme
  contactEmail: ops@acme.example
  ipWhitelist: [127.0.0.1/32, nowhere]
`},
	{"CEL rule on a map", partnerHeader + `spec:
  displayName: Acme
  contactEmail: ops@acme.example
  ordering: {limits: {dailySpend: {euro: -1}}}
`},
	{"CEL rule on an object", catalogHeader + `spec:
  description: empty
`},
	{"list set duplicate", partnerHeader + `spec:
  displayName: Acme
  contactEmail: ops@acme.example
  ipWhitelist: [127.0.0.1/32, 127.0.0.1/32]
`},
	{"list map duplicate key and enum", walletHeader + `spec:
  partnerRef: {name: acme}
  environment: staging
  topUps:
    - {id: a, currency: EUR, amount: "1.00"}
    - {id: a, currency: EUR, amount: "0.00"}
`},
	{"name not a DNS subdomain", strings.Replace(partnerHeader, "name: acme", "name: Acme_Games", 1) + `spec:
  displayName: Acme
  contactEmail: ops@acme.example
`},
	{"unknown field", partnerHeader + `spec:
  displayName: Acme
  contactEmail: ops@acme.example
  colour: blue
`},
	{"unknown metadata field", strings.Replace(partnerHeader, "  namespace:", "  labelz: {a: b}\n  namespace:", 1) +
		`spec:
  displayName: Acme
  contactEmail: ops@acme.example
`},
	{"wrong type", partnerHeader + `spec:
  displayName: Acme
  contactEmail: ops@acme.example
  rateLimit: {requestsPerMinute: lots}
`},
	{"ConfigMap key with a slash", configMapHeader + `data: {"feeds/products.json": "[]"}
`},
	{"ConfigMap key in data and binaryData", configMapHeader + `data: {products.json: "[]"}
binaryData: {products.json: W10=}
`},
	{"ConfigMap value not a string", configMapHeader + `data: {count: 1}
`},
	{"ConfigMap unknown field", configMapHeader + `datas: {products.json: "[]"}
`},
	{"ConfigMap over 1 MiB", configMapHeader + `data: {products.json: "` + strings.Repeat("x", 1<<20+1) + `"}
`},
	{"Secret key with a space", secretHeader + `stringData: {"signing secret": whsec}
`},
	{"TLS Secret without its keys", secretHeader + `type: kubernetes.io/tls
stringData: {ca.crt: x}
`},
}

const configMapHeader = `apiVersion: v1
kind: ConfigMap
metadata: {name: feed, namespace: partners}
`

const secretHeader = `apiVersion: v1
kind: Secret
metadata: {name: webhook, namespace: partners}
`

// testRefusals loads each refusal case as the second document of a manifest file and compares
// LoadManifests' error with the server's answer to the same object: the same status, and as
// text kubectl's rendering of it after the file and document. Where kubectl is installed, its
// own output for the document is compared too.
func (c *cluster) testRefusals(t *testing.T) {
	kubectl, kubectlErr := exec.LookPath("kubectl")
	if kubectlErr != nil {
		t.Log("kubectl is not installed: the server's answers are compared, not kubectl's output")
	}
	for _, tc := range refusalCases {
		t.Run(tc.name, func(t *testing.T) {
			serverErr := createOnServer(t, c, tc.doc)
			if serverErr == nil {
				t.Fatal("the API server admitted the case; it tests nothing")
			}
			dir := t.TempDir()
			file := filepath.Join(dir, "manifests.yaml")
			leading := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: products, namespace: partners}\n"
			writeFile(t, file, "# a header comment is no document\n---\n"+leading+"---\n"+tc.doc)

			_, err := LoadManifests(context.Background(), dir, "")
			var refused *DocumentError
			if !errors.As(err, &refused) {
				t.Fatalf("LoadManifests admitted what the server refuses (%v): %v", serverErr, err)
			}
			if refused.File != file || refused.Document != 2 {
				t.Errorf("refusal located at %s document %d, want %s document 2", refused.File, refused.Document, file)
			}
			assertSameStatus(t, refused.Err, serverErr)
			want := file + " (document 2): " + crdvalidation.KubectlMessage(serverErr)
			if !sameLines(refused.Error(), want) {
				t.Errorf("error text:\n got: %s\nwant: %s", refused.Error(), want)
			}
			if !strings.Contains(err.Error(), refused.Error()) {
				t.Errorf("LoadManifests' error does not carry the refusal:\n%s", err)
			}
			if kubectlErr == nil {
				assertKubectlSays(t, kubectl, c, tc.doc, refused.Err)
			}
		})
	}
}

// createOnServer creates doc through the API server and returns its answer.
func createOnServer(t *testing.T, c *cluster, doc string) error {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
		t.Fatalf("decode case: %v", err)
	}
	return c.client.Create(context.Background(), obj)
}

// assertSameStatus compares the refusal's API status with the server's: code, reason, message
// and every cause. The server lists the errors of several fields in the order it meets them in a
// Go map, so causes are compared in any order.
func assertSameStatus(t *testing.T, got, want error) {
	t.Helper()
	var gotStatus, wantStatus apierrors.APIStatus
	if !errors.As(got, &gotStatus) || !errors.As(want, &wantStatus) {
		t.Fatalf("not both API statuses:\n got: %#v\nwant: %#v", got, want)
	}
	g, w := gotStatus.Status(), wantStatus.Status()
	if g.Code != w.Code || g.Reason != w.Reason || !sameMessage(g, w) {
		t.Errorf("status:\n got: %d %s %s\nwant: %d %s %s", g.Code, g.Reason, g.Message, w.Code, w.Reason, w.Message)
	}
	if !reflect.DeepEqual(sortedCauses(g.Details), sortedCauses(w.Details)) {
		t.Errorf("details:\n got: %+v\nwant: %+v", g.Details, w.Details)
	}
}

// sameMessage: the messages are equal but for the order of the causes they list.
func sameMessage(got, want metav1.Status) bool {
	if got.Message == want.Message {
		return true
	}
	if len(got.Message) != len(want.Message) || got.Details == nil {
		return false
	}
	for _, cause := range got.Details.Causes {
		if !strings.Contains(want.Message, cause.Field+": "+cause.Message) {
			return false
		}
	}
	return true
}

func sortedCauses(details *metav1.StatusDetails) *metav1.StatusDetails {
	if details == nil {
		return nil
	}
	sorted := details.DeepCopy()
	sort.Slice(sorted.Causes, func(i, j int) bool {
		a, b := sorted.Causes[i], sorted.Causes[j]
		return a.Field+a.Message < b.Field+b.Message
	})
	return sorted
}

// sameLines: got and want hold the same lines, in any order (see assertSameStatus).
func sameLines(got, want string) bool {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	sort.Strings(g)
	sort.Strings(w)
	return reflect.DeepEqual(g, w)
}

// assertKubectlSays runs `kubectl create` on doc and compares what it prints with the refusal:
// kubectl's words, after kubectl's own account of the source where it gives one.
func assertKubectlSays(t *testing.T, kubectl string, c *cluster, doc string, refusal error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "doc.yaml")
	writeFile(t, file, doc)
	cmd := exec.Command(kubectl, "--kubeconfig", c.kubeconfig, "create", "-f", file)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatal("kubectl create succeeded")
	}
	msg := crdvalidation.KubectlMessage(refusal)
	want := msg + "\n"
	if status, ok := refusal.(apierrors.APIStatus); ok && status.Status().Reason != metav1.StatusReasonInvalid {
		want = "Error from server (" + string(status.Status().Reason) + `): error when creating "` + file + `": ` + msg + "\n"
	}
	if !sameLines(stderr.String(), want) {
		t.Errorf("kubectl says:\n%s\nwant:\n%s", stderr.String(), want)
	}
}

// testSamplesStoredAsByTheServer loads config/samples, then creates every sample through the API
// server: LoadManifests refuses none, and holds each as the server stores it, defaults included.
func (c *cluster) testSamplesStoredAsByTheServer(t *testing.T) {
	ctx := context.Background()
	m, err := LoadManifests(ctx, filepath.Join("..", "..", "config", "samples"), "")
	if err != nil {
		t.Fatalf("the samples are refused: %v", err)
	}
	if len(m.Partners) == 0 || len(m.Catalogs) == 0 || len(m.Shards) == 0 || len(m.APIKeys) == 0 || len(m.Wallets) == 0 {
		t.Fatalf("samples: %d partners, %d catalogs, %d shards, %d keys, %d wallets",
			len(m.Partners), len(m.Catalogs), len(m.Shards), len(m.APIKeys), len(m.Wallets))
	}
	for _, obj := range customObjects(m) {
		created := obj.DeepCopyObject().(client.Object)
		created.SetGeneration(0)
		created.SetResourceVersion("")
		if err := c.client.Create(ctx, created); err != nil {
			t.Fatalf("create %s: %v", client.ObjectKeyFromObject(obj), err)
		}
		stored := obj.DeepCopyObject().(client.Object)
		if err := c.client.Get(ctx, client.ObjectKeyFromObject(obj), stored); err != nil {
			t.Fatal(err)
		}
		if got, want := specOf(t, obj), specOf(t, stored); !reflect.DeepEqual(got, want) {
			t.Errorf("%T %s:\nloaded: %v\nstored: %v", obj, client.ObjectKeyFromObject(obj), got, want)
		}
		if obj.GetGeneration() != stored.GetGeneration() {
			t.Errorf("%s: generation %d, the server's %d",
				client.ObjectKeyFromObject(obj), obj.GetGeneration(), stored.GetGeneration())
		}
	}
}

// specOf returns obj's spec as the JSON data the server holds.
func specOf(t *testing.T, obj client.Object) any {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return u["spec"]
}

// TestLoadManifestsRefusesUnknownKindsOfTheGroup: a kind or version of codeport.dev that no CRD
// serves is refused, as the cluster has no resource for it; other groups' kinds are skipped.
func TestLoadManifestsRefusesUnknownKindsOfTheGroup(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), `apiVersion: codeport.dev/v1beta1
kind: Partner
metadata: {name: acme, namespace: partners}
---
apiVersion: codeport.dev/v1alpha1
kind: Partners
metadata: {name: acme, namespace: partners}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
`)
	_, err := LoadManifests(context.Background(), dir, "")
	var noMatch *meta.NoKindMatchError
	if !errors.As(err, &noMatch) {
		t.Fatalf("want a refusal for no matching kind, got %v", err)
	}
	for _, want := range []string{
		`a.yaml (document 1): no matches for kind "Partner" in version "codeport.dev/v1beta1"`,
		`a.yaml (document 2): no matches for kind "Partners" in version "codeport.dev/v1alpha1"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%s", want, err)
		}
	}
	if strings.Contains(err.Error(), "document 3") {
		t.Errorf("a Deployment is not the cluster's to refuse here:\n%s", err)
	}
}

// TestLoadManifestsPutsObjectsWithoutNamespaceInDefault, as kubectl does without --namespace, so
// a Catalog and the ConfigMap it reads still meet.
func TestLoadManifestsPutsObjectsWithoutNamespaceInDefault(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), `apiVersion: v1
kind: ConfigMap
metadata: {name: products}
data: {products.json: "[]"}
---
`+strings.Replace(partnerHeader, "  namespace: partners\n", "", 1)+`spec:
  displayName: Acme
  contactEmail: ops@acme.example
`)
	m, err := LoadManifests(context.Background(), dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if m.ConfigMaps[0].Namespace != metav1.NamespaceDefault || m.Partners[0].Namespace != metav1.NamespaceDefault {
		t.Fatalf("namespaces %q and %q, want default", m.ConfigMaps[0].Namespace, m.Partners[0].Namespace)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// updateCases are an object as first applied and as changed later: the cluster refuses the change
// when refusal is set (a transition rule), and admits it otherwise.
var updateCases = []struct{ name, first, changed, refusal string }{
	{"immutable top-up amount", topUpDoc("t1", "10.00"), topUpDoc("t1", "1000.00"), "amount is immutable"},
	{"rotation decreased", keyDoc("k1", 2), keyDoc("k1", 1), "rotation may only increase"},
	{"rotation increased", keyDoc("k2", 1), keyDoc("k2", 2), ""},
	{"settings changed", partnerDoc("p1", "Acme"), partnerDoc("p1", "Acme Games"), ""},
}

func topUpDoc(name, amount string) string {
	return `apiVersion: codeport.dev/v1alpha1
kind: WalletTopUp
metadata: {name: ` + name + `, namespace: updates}
spec: {walletRef: {name: acme-production}, id: ` + name + `, currency: EUR, amount: "` + amount + `"}
`
}

func keyDoc(name string, rotation int) string {
	return `apiVersion: codeport.dev/v1alpha1
kind: ApiKey
metadata: {name: ` + name + `, namespace: updates}
spec: {partnerRef: {name: acme}, environment: sandbox, secretName: ` + name + `, rotation: ` +
		strconv.Itoa(rotation) + `}
`
}

func partnerDoc(name, displayName string) string {
	return `apiVersion: codeport.dev/v1alpha1
kind: Partner
metadata: {name: ` + name + `, namespace: updates}
spec: {displayName: ` + displayName + `, contactEmail: ops@acme.example}
`
}

// testUpdatesAcrossLoads applies each case's first document and then its change, to the API
// server and to LoadManifests with one state directory across two loads: the change is refused
// with the server's answer, located in the file, or admitted and stored as the server stores it.
// A third load without the object and a fourth with the change again are a delete and a create.
func (c *cluster) testUpdatesAcrossLoads(t *testing.T) {
	ctx := context.Background()
	if err := c.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "updates"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range updateCases {
		t.Run(tc.name, func(t *testing.T) {
			serverErr := updateOnServer(t, c, tc.first, tc.changed)
			if (serverErr == nil) != (tc.refusal == "") ||
				(serverErr != nil && !strings.Contains(serverErr.Error(), tc.refusal)) {
				t.Fatalf("the API server answered %v; the case expects refusal %q", serverErr, tc.refusal)
			}
			dir, state := t.TempDir(), t.TempDir()
			file := filepath.Join(dir, "manifests.yaml")
			load := func(doc string) (*Manifests, error) {
				writeFile(t, file, doc)
				return LoadManifests(ctx, dir, state)
			}
			if _, err := load(tc.first); err != nil {
				t.Fatalf("first load: %v", err)
			}
			if serverErr != nil {
				checkRefusedChange(t, load, file, tc.changed, serverErr)
				return
			}
			m, err := load(tc.changed)
			if err != nil {
				t.Fatalf("LoadManifests refused a change the server admits: %v", err)
			}
			obj := loadedObject(t, m)
			stored := obj.DeepCopyObject().(client.Object)
			if err := c.client.Get(ctx, client.ObjectKeyFromObject(obj), stored); err != nil {
				t.Fatal(err)
			}
			if got, want := specOf(t, obj), specOf(t, stored); !reflect.DeepEqual(got, want) {
				t.Errorf("loaded: %v\nstored: %v", got, want)
			}
			if obj.GetGeneration() != stored.GetGeneration() || stored.GetGeneration() != 2 {
				t.Errorf("generation %d, the server's %d (want 2)", obj.GetGeneration(), stored.GetGeneration())
			}
		})
	}
}

// checkRefusedChange: loading changed is refused with the server's answer, located in file and
// naming the stored object; it stays refused on the next load; after a load without the object
// (a delete) it is admitted as a create.
func checkRefusedChange(
	t *testing.T, load func(doc string) (*Manifests, error), file, changed string, serverErr error,
) {
	t.Helper()
	_, err := load(changed)
	var refused *DocumentError
	if !errors.As(err, &refused) {
		t.Fatalf("LoadManifests admitted the change the server refuses (%v): %v", serverErr, err)
	}
	assertSameStatus(t, refused.Err, serverErr)
	if refused.File != file || refused.Document != 1 || refused.Stored == "" ||
		!strings.Contains(err.Error(), refused.Stored) {
		t.Errorf("refusal at %s document %d, stored %q:\n%v", refused.File, refused.Document, refused.Stored, err)
	}
	if _, err := load(changed); !errors.As(err, &refused) {
		t.Fatalf("second try of the refused change: %v", err)
	}
	if _, err := load("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := load(changed); err != nil {
		t.Fatalf("the change applied after a delete: %v", err)
	}
}

// updateOnServer creates first and replaces it with changed, as kubectl apply of a manifest that
// is the object's whole content does, returning the server's answer to the change.
func updateOnServer(t *testing.T, c *cluster, first, changed string) error {
	t.Helper()
	if err := createOnServer(t, c, first); err != nil {
		t.Fatalf("create: %v", err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(changed), &obj.Object); err != nil {
		t.Fatal(err)
	}
	current := &unstructured.Unstructured{}
	current.SetGroupVersionKind(obj.GroupVersionKind())
	if err := c.client.Get(context.Background(), client.ObjectKeyFromObject(obj), current); err != nil {
		t.Fatal(err)
	}
	obj.SetResourceVersion(current.GetResourceVersion())
	return c.client.Update(context.Background(), obj)
}

// loadedObject is the one custom object of m.
func loadedObject(t *testing.T, m *Manifests) client.Object {
	t.Helper()
	objs := customObjects(m)
	if len(objs) != 1 {
		t.Fatalf("%d objects loaded, want 1", len(objs))
	}
	return objs[0]
}

// customObjects are m's objects of codeport's kinds.
func customObjects(m *Manifests) []client.Object {
	var objs []client.Object
	objs = appendObjects(objs, m.Partners)
	objs = appendObjects(objs, m.Catalogs)
	objs = appendObjects(objs, m.Shards)
	objs = appendObjects(objs, m.APIKeys)
	objs = appendObjects(objs, m.Wallets)
	return appendObjects(objs, m.TopUps)
}

// appendObjects appends a pointer to each item of items.
func appendObjects[T any, PT interface {
	*T
	client.Object
}](objs []client.Object, items []T) []client.Object {
	for i := range items {
		objs = append(objs, PT(&items[i]))
	}
	return objs
}
