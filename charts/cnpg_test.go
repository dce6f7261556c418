package charts_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const cnpgAPI = "--api-versions=postgresql.cnpg.io/v1"

// workloadDatabase is what a rendered workload's containers take from Secrets (secret/key) and
// the database URL they are given.
type workloadDatabase struct {
	secrets []string
	url     string
}

func workloadsDatabase(t *testing.T, objs rendered) map[string]workloadDatabase {
	t.Helper()
	out := map[string]workloadDatabase{}
	for _, kind := range []string{"Deployment", "Job"} {
		for _, o := range ofKind(objs, kind) {
			var spec corev1.PodSpec
			raw, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
			if err := runtimeConvert(raw, &spec); err != nil {
				t.Fatal(err)
			}
			var w workloadDatabase
			for _, c := range append(spec.InitContainers, spec.Containers...) {
				for _, e := range c.Env {
					if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
						w.secrets = append(w.secrets, ref.SecretKeyRef.Name+"/"+ref.SecretKeyRef.Key)
					}
					if e.Name == "CODEPORT_DATABASE_URL" && e.Value != "" {
						w.url = e.Value
					}
				}
			}
			slices.Sort(w.secrets)
			out[kind+"/"+o.GetName()] = w
		}
	}
	return out
}

// TestCloudNativePGRendering: database.cnpg renders a Cluster with a Pooler when CloudNativePG's
// API exists (and refuses to render without it), and gives each component its own credentials:
// the migration Job the owner's (DDL), the API and the operator a role that only reads and
// writes data, through the Pooler.
func TestCloudNativePGRendering(t *testing.T) {
	t.Parallel()
	out, err := renderErr(t, "database.cnpg.enabled=true")
	if err == nil || !strings.Contains(out, "CloudNativePG") {
		t.Fatalf("database.cnpg without CloudNativePG's API: %v\n%s", err, out)
	}
	if objs := render(t, cnpgAPI); len(ofKind(objs, "Cluster")) != 0 || len(ofKind(objs, "Pooler")) != 0 {
		t.Fatal("CloudNativePG objects rendered with database.cnpg off")
	}

	objs := render(t, cnpgAPI, "database.cnpg.enabled=true")
	cluster, pooler := objs["Cluster/codeport-db"], objs["Pooler/codeport-db-pooler"]
	secret := objs["Secret/codeport-db-runtime"]
	if cluster == nil || pooler == nil || secret == nil {
		t.Fatalf("rendered: %v", slices.Sorted(maps.Keys(objs)))
	}
	if cluster.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
		t.Error("the Cluster, and its data, would go with the release")
	}
	initdb, _, _ := unstructured.NestedStringMap(cluster.Object, "spec", "bootstrap", "initdb")
	if initdb["database"] != "codeport" || initdb["owner"] != "codeport" {
		t.Errorf("initdb %v", initdb)
	}
	roles, _, _ := unstructured.NestedSlice(cluster.Object, "spec", "managed", "roles")
	if len(roles) != 1 || fmt.Sprint(roles[0]) != "map[comment:codeport API and operator: reads and writes data, no DDL "+
		"ensure:present inRoles:[pg_read_all_data pg_write_all_data] login:true name:codeport_runtime "+
		"passwordSecret:map[name:codeport-db-runtime]]" {
		t.Errorf("managed roles %v", roles)
	}
	if str(pooler, "spec", "cluster", "name") != "codeport-db" || str(pooler, "spec", "type") != "rw" ||
		str(pooler, "spec", "pgbouncer", "poolMode") != "session" {
		t.Errorf("Pooler spec %v", pooler.Object["spec"])
	}
	data, _, _ := unstructured.NestedStringMap(secret.Object, "data")
	user, _ := base64.StdEncoding.DecodeString(data["username"])
	password, _ := base64.StdEncoding.DecodeString(data["password"])
	if str(secret, "type") != "kubernetes.io/basic-auth" || string(user) != "codeport_runtime" || len(password) != 32 ||
		secret.GetLabels()["cnpg.io/reload"] != "true" {
		t.Errorf("runtime Secret: type %s, user %q, password of %d bytes, labels %v",
			str(secret, "type"), user, len(password), secret.GetLabels())
	}

	runtime := workloadDatabase{
		secrets: []string{
			"codeport-codes-key/current-key-id", "codeport-codes-key/key",
			"codeport-db-runtime/password", "codeport-db-runtime/username",
		},
		url: "postgres://codeport-db-pooler.codeport-system.svc:5432/codeport?sslmode=require",
	}
	dbs := workloadsDatabase(t, objs)
	var migrateJob string
	for name, db := range dbs {
		if strings.HasPrefix(name, "Job/") {
			migrateJob = name
			if fmt.Sprint(db) != fmt.Sprint(workloadDatabase{secrets: []string{"codeport-db-app/uri"}}) {
				t.Errorf("%s takes %v, want the owner's URL only", name, db)
			}
			continue
		}
		if fmt.Sprint(db) != fmt.Sprint(runtime) {
			t.Errorf("%s takes %v, want %v", name, db, runtime)
		}
	}
	if len(dbs) != 4 {
		t.Errorf("workloads: %v", slices.Sorted(maps.Keys(dbs)))
	}
	// The first install creates the Cluster, so its migration cannot be a pre-install hook.
	job := objs[migrateJob]
	if !strings.HasPrefix(job.GetName(), "codeport-migrate-") || job.GetAnnotations()["helm.sh/hook"] != "" {
		t.Errorf("first install's migration Job %s, annotations %v", job.GetName(), job.GetAnnotations())
	}
	upgrade := render(t, cnpgAPI, "database.cnpg.enabled=true", "--is-upgrade")
	hook := upgrade["Job/codeport-migrate"]
	if hook == nil || hook.GetAnnotations()["helm.sh/hook"] != "pre-install,pre-upgrade" {
		t.Errorf("upgrades do not migrate in a pre-upgrade hook: %v", slices.Sorted(maps.Keys(upgrade)))
	}
}

// TestCloudNativePGOptions: without the Pooler the API reaches the primary; an existing
// Secret replaces the generated one; clusterSpec adds fields and roles under the chart's own.
func TestCloudNativePGOptions(t *testing.T) {
	t.Parallel()
	objs := render(t, cnpgAPI, "database.cnpg.enabled=true", "database.cnpg.pooler.enabled=false",
		"database.cnpg.runtimeCredentials.existingSecret=payments-db",
		"database.cnpg.runtimeCredentials.username=payments",
		"database.cnpg.clusterSpec.instances=1",
		"database.cnpg.clusterSpec.backup.retentionPolicy=30d",
		"database.cnpg.clusterSpec.managed.roles[0].name=analytics",
		"database.cnpg.clusterSpec.managed.roles[0].inRoles[0]=pg_read_all_data")
	if objs["Pooler/codeport-db-pooler"] != nil || objs["Secret/codeport-db-runtime"] != nil {
		t.Errorf("rendered: %v", slices.Sorted(maps.Keys(objs)))
	}
	db := workloadsDatabase(t, objs)["Deployment/codeport-operator"]
	if db.url != "postgres://codeport-db-rw.codeport-system.svc:5432/codeport?sslmode=require" ||
		!slices.Contains(db.secrets, "payments-db/password") {
		t.Errorf("operator database %v", db)
	}
	cluster := objs["Cluster/codeport-db"]
	spec, _, _ := unstructured.NestedMap(cluster.Object, "spec")
	roles, _, _ := unstructured.NestedSlice(spec, "managed", "roles")
	if fmt.Sprint(spec["instances"]) != "3" || str(cluster, "spec", "backup", "retentionPolicy") != "30d" ||
		len(roles) != 2 || roles[0].(map[string]any)["name"] != "payments" ||
		roles[1].(map[string]any)["name"] != "analytics" {
		t.Errorf("Cluster spec %v", spec)
	}
}

// TestCloudNativePGInstall installs the chart with database.cnpg into an API server that serves
// CloudNativePG's CRDs: the chart finds the API by itself, the Cluster and Pooler match
// CloudNativePG's schema field for field, upgrades keep the generated password, and an
// uninstall keeps the Cluster.
func TestCloudNativePGInstall(t *testing.T) {
	s, ns := sharedAPIServer(t)
	c := s.client
	installTestCRDs(t, c, "postgresql.cnpg.io_clusters.yaml", "postgresql.cnpg.io_poolers.yaml")
	ctx := context.Background()
	objs := render(t, "--namespace="+ns, cnpgAPI, "database.cnpg.enabled=true",
		"database.cnpg.imageName=ghcr.io/cloudnative-pg/postgresql:17", "database.cnpg.storage.storageClass=fast",
		"database.cnpg.parameters.max_connections=400", "database.cnpg.pooler.parameters.max_client_conn=1000",
		"database.cnpg.pooler.imageName=registry.example.com/pgbouncer:1.24")
	createStrictly(t, c, objs["Cluster/codeport-db"], objs["Pooler/codeport-db-pooler"])
	params, _, _ := unstructured.NestedStringMap(objs["Cluster/codeport-db"].Object, "spec", "postgresql", "parameters")
	bouncer, _, _ := unstructured.NestedStringMap(objs["Pooler/codeport-db-pooler"].Object,
		"spec", "pgbouncer", "parameters")
	if params["max_connections"] != "400" || bouncer["max_client_conn"] != "1000" {
		t.Errorf("parameters %v, PgBouncer parameters %v", params, bouncer)
	}
	containers, _, _ := unstructured.NestedSlice(objs["Pooler/codeport-db-pooler"].Object,
		"spec", "template", "spec", "containers")
	if len(containers) != 1 || containers[0].(map[string]any)["image"] != "registry.example.com/pgbouncer:1.24" {
		t.Errorf("PgBouncer containers %v, want the image of database.cnpg.pooler.imageName", containers)
	}

	env := installChart(t, s, ns, "--set", "database.cnpg.enabled=true")
	for _, kind := range []string{"Cluster", "Pooler"} {
		var list unstructured.UnstructuredList
		list.SetAPIVersion("postgresql.cnpg.io/v1")
		list.SetKind(kind + "List")
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil || len(list.Items) != 1 {
			t.Fatalf("%ss: %v %v", kind, err, list.Items)
		}
	}
	secret := client.ObjectKey{Namespace: ns, Name: "codeport-db-runtime"}
	var before, after corev1.Secret
	if err := c.Get(ctx, secret, &before); err != nil {
		t.Fatal(err)
	}
	var jobs batchv1.JobList
	if err := c.List(ctx, &jobs, client.InNamespace(ns)); err != nil || len(jobs.Items) != 1 {
		t.Fatalf("first install's migration Job: %v %v", err, jobs.Items)
	}
	installJob := jobs.Items[0].Name

	if out, err := helm(t, env, "upgrade", "codeport", chart, "-n", ns, "--no-hooks",
		"--reuse-values"); err != nil {
		t.Fatalf("upgrade: %v\n%s", err, out)
	}
	if err := c.Get(ctx, secret, &after); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after.Data["password"], before.Data["password"]) {
		t.Error("helm upgrade replaced the runtime role's password")
	}
	// Upgrades migrate in the pre-upgrade hook; the first install's Job is the release's no more.
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: installJob}, &batchv1.Job{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("first install's migration Job after an upgrade: %v", err)
	}

	if out, err := helm(t, env, "uninstall", "codeport", "-n", ns, "--no-hooks", "--wait"); err != nil {
		t.Fatalf("uninstall: %v\n%s", err, out)
	}
	cluster := &unstructured.Unstructured{}
	cluster.SetAPIVersion("postgresql.cnpg.io/v1")
	cluster.SetKind("Cluster")
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "codeport-db"}, cluster); err != nil {
		t.Errorf("the Cluster went with the release: %v", err)
	}
}
