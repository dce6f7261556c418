package charts_test

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// cnpgOn is database.cnpg with CloudNativePG's API visible to helm template.
var cnpgOn = []string{cnpgAPI, "database.cnpg.enabled=true"}

// clusterDurability is what the Cluster says of replication and placement, and the Pooler's
// budget, as fmt prints them.
type clusterDurability struct {
	synchronous, affinity, enablePDB, poolerBudget string
}

func durabilityOf(objs rendered) clusterDurability {
	cluster := objs["Cluster/codeport-db"]
	synchronous, _, _ := unstructured.NestedMap(cluster.Object, "spec", "postgresql", "synchronous")
	affinity, _, _ := unstructured.NestedMap(cluster.Object, "spec", "affinity")
	enablePDB, found, _ := unstructured.NestedBool(cluster.Object, "spec", "enablePDB")
	d := clusterDurability{synchronous: fmt.Sprint(synchronous), affinity: fmt.Sprint(affinity), enablePDB: "unset"}
	if found {
		d.enablePDB = fmt.Sprint(enablePDB)
	}
	if pdb := objs["PodDisruptionBudget/codeport-db-pooler"]; pdb != nil {
		spec, _, _ := unstructured.NestedMap(pdb.Object, "spec")
		d.poolerBudget = fmt.Sprint(spec)
	}
	return d
}

// TestCloudNativePGDurability: the Cluster replicates synchronously by default (a commit waits
// for a standby, so a failover keeps every acknowledged order), keeps its instances apart
// without leaving them Pending, keeps CloudNativePG's budgets on, and the Pooler's pods get a
// budget of their own; each is a value, and values that cannot replicate are refused with a
// message saying what to set.
func TestCloudNativePGDurability(t *testing.T) {
	t.Parallel()
	const (
		required  = "map[dataDurability:required method:any number:1]"
		preferred = "map[enablePodAntiAffinity:true podAntiAffinityType:preferred topologyKey:kubernetes.io/hostname]"
		budget    = "map[maxUnavailable:1 selector:map[matchLabels:map[cnpg.io/poolerName:codeport-db-pooler]]]"
	)
	for _, tc := range []struct {
		name string
		set  []string
		want clusterDurability
	}{
		{"defaults", nil, clusterDurability{required, preferred, "true", budget}},
		{"availability over durability", []string{"database.cnpg.synchronous.dataDurability=preferred"},
			clusterDurability{"map[dataDurability:preferred method:any number:1]", preferred, "true", budget}},
		{"two standbys of five, in order", []string{"database.cnpg.instances=5", "database.cnpg.synchronous.number=2",
			"database.cnpg.synchronous.method=first"},
			clusterDurability{"map[dataDurability:required method:first number:2]", preferred, "true", budget}},
		{"asynchronous single instance", []string{"database.cnpg.instances=1", "database.cnpg.synchronous.enabled=false"},
			clusterDurability{"map[]", preferred, "true", budget}},
		{"one instance per zone, required", []string{"database.cnpg.affinity.topologyKey=topology.kubernetes.io/zone",
			"database.cnpg.affinity.podAntiAffinityType=required"}, clusterDurability{required,
			"map[enablePodAntiAffinity:true podAntiAffinityType:required topologyKey:topology.kubernetes.io/zone]",
			"true", budget}},
		// The chart's values win over clusterSpec's, false included; clusterSpec's other affinity
		// fields and synchronous settings are kept.
		{"clusterSpec beneath", []string{"database.cnpg.clusterSpec.enablePDB=true", "database.cnpg.enablePDB=false",
			"database.cnpg.clusterSpec.affinity.enablePodAntiAffinity=true",
			"database.cnpg.affinity.enablePodAntiAffinity=false",
			"database.cnpg.clusterSpec.affinity.nodeSelector.pool=databases",
			"database.cnpg.clusterSpec.postgresql.synchronous.failoverQuorum=true"},
			clusterDurability{"map[dataDurability:required failoverQuorum:true method:any number:1]",
				"map[enablePodAntiAffinity:false nodeSelector:map[pool:databases] podAntiAffinityType:preferred " +
					"topologyKey:kubernetes.io/hostname]", "false", budget}},
		{"pooler budget of a quarter", []string{"database.cnpg.pooler.instances=4",
			"database.cnpg.pooler.podDisruptionBudget.maxUnavailable=25%"}, clusterDurability{required, preferred, "true",
			"map[maxUnavailable:25% selector:map[matchLabels:map[cnpg.io/poolerName:codeport-db-pooler]]]"}},
		{"single PgBouncer", []string{"database.cnpg.pooler.instances=1"},
			clusterDurability{required, preferred, "true", ""}},
		{"pooler budget off", []string{"database.cnpg.pooler.podDisruptionBudget.enabled=false"},
			clusterDurability{required, preferred, "true", ""}},
		{"no pooler", []string{"database.cnpg.pooler.enabled=false"},
			clusterDurability{required, preferred, "true", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := durabilityOf(render(t, append(cnpgOn, tc.set...)...)); got != tc.want {
				t.Errorf("rendered %+v\nwant     %+v", got, tc.want)
			}
		})
	}

	for _, tc := range []struct {
		name string
		set  []string
		want []string // what the error says
	}{
		{"one instance, required", []string{"database.cnpg.instances=1"},
			[]string{"database.cnpg.instances=3", "database.cnpg.synchronous.enabled=false"}},
		{"one instance, preferred", []string{"database.cnpg.instances=1",
			"database.cnpg.synchronous.dataDurability=preferred"},
			[]string{"database.cnpg.instances=3", "database.cnpg.synchronous.enabled=false"}},
		{"as many standbys as instances", []string{"database.cnpg.synchronous.number=3"},
			[]string{"database.cnpg.instances=5"}},
		{"no standby", []string{"database.cnpg.synchronous.number=0"}, []string{"number"}},
		{"unknown durability", []string{"database.cnpg.synchronous.dataDurability=best-effort"},
			[]string{"dataDurability"}},
		{"unknown method", []string{"database.cnpg.synchronous.method=all"}, []string{"method"}},
		{"unknown anti-affinity", []string{"database.cnpg.affinity.podAntiAffinityType=strict"},
			[]string{"podAntiAffinityType"}},
		{"no topology key", []string{"database.cnpg.affinity.topologyKey="}, []string{"topologyKey"}},
		{"pooler budget of none", []string{"database.cnpg.pooler.podDisruptionBudget.maxUnavailable=0"},
			[]string{"maxUnavailable"}},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := renderErr(t, append(cnpgOn, tc.set...)...)
			if err == nil {
				t.Fatalf("accepted %v", tc.set)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("the error does not say %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestCloudNativePGDurabilityAdmitted: the replication, placement and budget settings are fields
// CloudNativePG v1.30's CRDs know, with values their schemas and rules accept, and the Pooler's
// budget is a valid PodDisruptionBudget.
func TestCloudNativePGDurabilityAdmitted(t *testing.T) {
	s, ns := sharedAPIServer(t)
	installTestCRDs(t, s.client, "postgresql.cnpg.io_clusters.yaml", "postgresql.cnpg.io_poolers.yaml")
	for _, set := range [][]string{
		nil,
		{"database.cnpg.synchronous.dataDurability=preferred", "database.cnpg.affinity.podAntiAffinityType=required",
			"database.cnpg.affinity.topologyKey=topology.kubernetes.io/zone", "database.cnpg.pooler.instances=3",
			"database.cnpg.pooler.podDisruptionBudget.maxUnavailable=34%"},
		{"database.cnpg.instances=5", "database.cnpg.synchronous.number=2", "database.cnpg.synchronous.method=first",
			"database.cnpg.enablePDB=false", "database.cnpg.affinity.enablePodAntiAffinity=false"},
		{"database.cnpg.instances=1", "database.cnpg.synchronous.enabled=false"},
	} {
		objs := render(t, append(append([]string{"--namespace=" + ns}, cnpgOn...), set...)...)
		pdb := objs["PodDisruptionBudget/codeport-db-pooler"]
		if pdb == nil {
			t.Fatalf("%v: no Pooler budget", set)
		}
		createStrictly(t, s.client, objs["Cluster/codeport-db"], objs["Pooler/codeport-db-pooler"], pdb)
	}
}

// TestCloudNativePGSmartShutdown: a stopping instance waits 10 seconds, not CloudNativePG's 180,
// for sessions that the API's and the Pooler's pools never end before it stops them, so that a
// deleted or drained primary fails over at once; the value sets it.
func TestCloudNativePGSmartShutdown(t *testing.T) {
	t.Parallel()
	for set, want := range map[string]int64{"": 10, "database.cnpg.smartShutdownTimeout=60": 60} {
		flags := cnpgOn
		if set != "" {
			flags = append(append([]string(nil), cnpgOn...), set)
		}
		cluster := render(t, flags...)["Cluster/codeport-db"]
		got, _, _ := unstructured.NestedFieldNoCopy(cluster.Object, "spec", "smartShutdownTimeout")
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%q: smartShutdownTimeout %v, want %d", set, got, want)
		}
	}
}
