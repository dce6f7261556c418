package charts_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// backupOn is database.cnpg with backups through the Barman Cloud Plugin.
var backupOn = []string{cnpgAPI, "database.cnpg.enabled=true", "database.cnpg.backup.enabled=true",
	"database.cnpg.backup.plugin.objectStore=codeport-backups"}

// barmanOn is database.cnpg with backups through the operator's built-in Barman Cloud.
var barmanOn = []string{cnpgAPI, "database.cnpg.enabled=true", "database.cnpg.backup.enabled=true",
	"database.cnpg.backup.method=barmanObjectStore",
	"database.cnpg.backup.barmanObjectStore.destinationPath=s3://codeport-backups/production",
	"database.cnpg.backup.barmanObjectStore.s3Credentials.existingSecret=backup-s3"}

// TestCloudNativePGBackups: database.cnpg.backup renders WAL archiving on the Cluster and a
// ScheduledBackup, by either method, that CloudNativePG's CRDs admit field for field; off, it
// renders neither; values that cannot work are refused with a message saying what to set.
func TestCloudNativePGBackups(t *testing.T) {
	s, ns := sharedAPIServer(t)
	installTestCRDs(t, s.client, "postgresql.cnpg.io_clusters.yaml", "postgresql.cnpg.io_scheduledbackups.yaml",
		"postgresql.cnpg.io_backups.yaml")

	for _, tc := range []struct {
		name string
		set  []string
		// cluster is the Cluster's spec.backup and spec.plugins, as fmt prints them; scheduled the
		// ScheduledBackup's spec ("" for none).
		cluster, scheduled string
	}{
		{name: "off by default", set: []string{cnpgAPI, "database.cnpg.enabled=true"}, cluster: "map[] []"},
		{name: "plugin", set: backupOn,
			cluster: "map[] [map[isWALArchiver:true name:barman-cloud.cloudnative-pg.io " +
				"parameters:map[barmanObjectName:codeport-backups]]]",
			scheduled: "map[backupOwnerReference:self cluster:map[name:codeport-db] immediate:true method:plugin " +
				"pluginConfiguration:map[name:barman-cloud.cloudnative-pg.io] schedule:0 0 2 * * * target:prefer-standby]"},
		{name: "plugin beside the clusterSpec's plugins", set: append([]string{
			"database.cnpg.clusterSpec.plugins[0].name=metrics.example.com", "database.cnpg.backup.schedule=0 30 3 * * 0",
			"database.cnpg.backup.immediate=false", "database.cnpg.backup.target=primary"}, backupOn...),
			cluster: "map[] [map[name:metrics.example.com] map[isWALArchiver:true name:barman-cloud.cloudnative-pg.io " +
				"parameters:map[barmanObjectName:codeport-backups]]]",
			scheduled: "map[backupOwnerReference:self cluster:map[name:codeport-db] immediate:false method:plugin " +
				"pluginConfiguration:map[name:barman-cloud.cloudnative-pg.io] schedule:0 30 3 * * 0 target:primary]"},
		{name: "barmanObjectStore", set: append([]string{
			"database.cnpg.backup.barmanObjectStore.endpointURL=https://minio.example.com",
			"database.cnpg.backup.barmanObjectStore.retentionPolicy=4w"}, barmanOn...),
			cluster: "map[barmanObjectStore:map[data:map[compression:gzip] destinationPath:s3://codeport-backups/production " +
				"endpointURL:https://minio.example.com s3Credentials:map[accessKeyId:map[key:ACCESS_KEY_ID name:backup-s3] " +
				"secretAccessKey:map[key:ACCESS_SECRET_KEY name:backup-s3]] wal:map[compression:gzip]] " +
				"retentionPolicy:4w target:prefer-standby] []",
			scheduled: "map[backupOwnerReference:self cluster:map[name:codeport-db] immediate:true " +
				"method:barmanObjectStore schedule:0 0 2 * * * target:prefer-standby]"},
		{name: "barmanObjectStore with the pods' identity", set: []string{cnpgAPI, "database.cnpg.enabled=true",
			"database.cnpg.backup.enabled=true", "database.cnpg.backup.method=barmanObjectStore",
			"database.cnpg.backup.barmanObjectStore.destinationPath=s3://codeport-backups/production",
			"database.cnpg.backup.barmanObjectStore.s3Credentials.inheritFromIAMRole=true"},
			cluster: "map[barmanObjectStore:map[data:map[compression:gzip] destinationPath:s3://codeport-backups/production " +
				"s3Credentials:map[inheritFromIAMRole:true] wal:map[compression:gzip]] " +
				"retentionPolicy:30d target:prefer-standby] []",
			scheduled: "map[backupOwnerReference:self cluster:map[name:codeport-db] immediate:true " +
				"method:barmanObjectStore schedule:0 0 2 * * * target:prefer-standby]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, append([]string{"--namespace=" + ns}, tc.set...)...)
			cluster := objs["Cluster/codeport-db"]
			backup, _, _ := unstructured.NestedMap(cluster.Object, "spec", "backup")
			plugins, _, _ := unstructured.NestedSlice(cluster.Object, "spec", "plugins")
			if got := fmt.Sprint(backup, " ", plugins); got != tc.cluster {
				t.Errorf("Cluster backup and plugins:\n%s\nwant:\n%s", got, tc.cluster)
			}
			scheduled := ofKind(objs, "ScheduledBackup")
			switch {
			case tc.scheduled == "" && len(scheduled) != 0:
				t.Errorf("ScheduledBackup rendered: %v", scheduled[0].Object)
			case tc.scheduled != "" && len(scheduled) != 1:
				t.Errorf("%d ScheduledBackups rendered", len(scheduled))
			case tc.scheduled != "":
				spec, _, _ := unstructured.NestedMap(scheduled[0].Object, "spec")
				if got := fmt.Sprint(spec); got != tc.scheduled || scheduled[0].GetName() != "codeport-db" {
					t.Errorf("ScheduledBackup %s:\n%s\nwant:\n%s", scheduled[0].GetName(), got, tc.scheduled)
				}
				createStrictly(t, s.client, scheduled[0])
			}
			createStrictly(t, s.client, cluster)
		})
	}

	// The on-demand Backup of docs/operations.md is one CloudNativePG admits.
	backup := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(documentedYAML(t, "kind: Backup\n"), &backup.Object); err != nil {
		t.Fatalf("the Backup of docs/operations.md: %v", err)
	}
	backup.SetNamespace(ns)
	createStrictly(t, s.client, backup)
	if method, _, _ := unstructured.NestedString(backup.Object, "spec", "method"); method != "plugin" {
		t.Errorf("the documented Backup's method is %q, not the chart's default", method)
	}

	// So are the values docs/operations.md gives to recover the chart's Cluster from a backup:
	// a recovery instead of the empty database, archiving under a folder of its own.
	values := filepath.Join(t.TempDir(), "recovery.yaml")
	if err := os.WriteFile(values, documentedYAML(t, "recovery:"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The release's own backup values, which the recovery's upgrade reuses (make test-e2e's).
	recovered := render(t, "--namespace="+ns, cnpgAPI, "database.cnpg.enabled=true",
		"database.cnpg.backup.enabled=true", "database.cnpg.backup.method=barmanObjectStore",
		"database.cnpg.backup.barmanObjectStore.destinationPath=s3://codeport-backups/",
		"database.cnpg.backup.barmanObjectStore.s3Credentials.existingSecret=codeport-backups",
		"--values="+values)
	cluster := recovered["Cluster/codeport-db"]
	bootstrap, _, _ := unstructured.NestedMap(cluster.Object, "spec", "bootstrap")
	archive, _, _ := unstructured.NestedString(cluster.Object, "spec", "backup", "barmanObjectStore", "serverName")
	origin, _, _ := unstructured.NestedSlice(cluster.Object, "spec", "externalClusters")
	if fmt.Sprint(bootstrap) != "map[recovery:map[database:codeport owner:codeport "+
		"recoveryTarget:map[targetTime:2026-11-26 01:00:00.000000+00] source:origin]]" ||
		archive != "codeport-db-2" || len(origin) != 1 {
		t.Errorf("the recovered Cluster: bootstrap %v, archive folder %q, external clusters %v", bootstrap, archive, origin)
	}
	createStrictly(t, s.client, cluster)

	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"without the chart's Cluster", []string{"database.cnpg.backup.enabled=true"},
			"database.cnpg.backup.enabled needs database.cnpg.enabled"},
		{"plugin without an ObjectStore", []string{cnpgAPI, "database.cnpg.enabled=true",
			"database.cnpg.backup.enabled=true"}, "method=plugin needs database.cnpg.backup.plugin.objectStore"},
		{"no destination", []string{cnpgAPI, "database.cnpg.enabled=true", "database.cnpg.backup.enabled=true",
			"database.cnpg.backup.method=barmanObjectStore"},
			"needs database.cnpg.backup.barmanObjectStore.destinationPath"},
		{"no credentials", append(barmanOn, "database.cnpg.backup.barmanObjectStore.s3Credentials.existingSecret="),
			"needs credentials: database.cnpg.backup.barmanObjectStore.s3Credentials.existingSecret"},
		{"five-field cron", append(backupOn, "database.cnpg.backup.schedule=0 2 * * *"),
			`database.cnpg.backup.schedule "0 2 * * *" is not a six-field cron expression`},
		{"retention in words", append(barmanOn, "database.cnpg.backup.barmanObjectStore.retentionPolicy=30 days"),
			"retentionPolicy"},
		{"unknown method", append(backupOn, "database.cnpg.backup.method=volumeSnapshot"), "method"},
		{"destination not a URL", append(barmanOn, "database.cnpg.backup.barmanObjectStore.destinationPath=bucket"),
			"destinationPath"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := renderErr(t, tc.set...)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Errorf("rendered with %v (%v), want an error naming %q:\n%s", tc.set, err, tc.want, out)
			}
		})
	}
}

// documentedYAML is the first yaml block of docs/operations.md that contains marker.
func documentedYAML(t *testing.T, marker string) []byte {
	t.Helper()
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(doc, -1) {
		if strings.Contains(string(block[1]), marker) {
			return block[1]
		}
	}
	t.Fatalf("docs/operations.md has no yaml block with %q", marker)
	return nil
}
