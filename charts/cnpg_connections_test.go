package charts_test

import (
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/codeport/codeport/internal/store"
)

// databaseMaxConnsArg is the --database-max-conns a rendered Deployment passes, "" for none.
func databaseMaxConnsArg(t *testing.T, objs rendered, name string) string {
	t.Helper()
	d := objs["Deployment/"+name]
	if d == nil {
		t.Fatalf("no Deployment %s", name)
	}
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	for _, arg := range containers[0].(map[string]any)["args"].([]any) {
		if v, ok := strings.CutPrefix(arg.(string), "--database-max-conns="); ok {
			return v
		}
	}
	return ""
}

// connectionsCase is a render of database.cnpg and the connection sizes it must carry.
type connectionsCase struct {
	name string
	set  []string
	// sessions is what the pools may open; routes the PgBouncer instances (1 without the Pooler).
	sessions, routes    int
	apiArg, operatorArg string
	// maxConnections, poolSize and maxClientConn are the values asked for, when the chart is asked.
	maxConnections, poolSize, maxClientConn string
}

// orComputed is what the chart renders: the value asked for, else the one it computed.
func orComputed(asked string, computed int) string {
	if asked != "" {
		return asked
	}
	return strconv.Itoa(computed)
}

func (c connectionsCase) check(t *testing.T, objs rendered) {
	t.Helper()
	cluster := objs["Cluster/codeport-db"]
	if got, w := str(cluster, "spec", "postgresql", "parameters", "max_connections"),
		orComputed(c.maxConnections, c.routes*c.sessions+20); got != w {
		t.Errorf("max_connections %s, want %s (%d sessions through %d instances, and 20)", got, w, c.sessions, c.routes)
	}
	if pooler := objs["Pooler/codeport-db-pooler"]; pooler != nil {
		params, _, _ := unstructured.NestedStringMap(pooler.Object, "spec", "pgbouncer", "parameters")
		if w := orComputed(c.poolSize, c.sessions); params["default_pool_size"] != w {
			t.Errorf("default_pool_size %s, want %s", params["default_pool_size"], w)
		}
		if w := orComputed(c.maxClientConn, max(100, c.sessions+20)); params["max_client_conn"] != w {
			t.Errorf("max_client_conn %s, want %s", params["max_client_conn"], w)
		}
		if params["server_login_retry"] != "1" {
			t.Errorf("the chart's own PgBouncer parameters are lost: %v", params)
		}
	}
	if got := databaseMaxConnsArg(t, objs, "codeport-production"); got != c.apiArg {
		t.Errorf("API --database-max-conns=%q, want %q", got, c.apiArg)
	}
	if got := databaseMaxConnsArg(t, objs, "codeport-operator"); got != c.operatorArg {
		t.Errorf("operator --database-max-conns=%q, want %q", got, c.operatorArg)
	}
}

// TestCloudNativePGConnections: the Pooler gives every session codeport's pools may open a
// server connection of its own (session pooling holds one per client, so a smaller pool makes
// the rest wait two minutes for one), and PostgreSQL admits them through every PgBouncer
// instance. The sessions are each API and operator pod's pool for the most pods its Deployment
// runs, a rolling update's surge included.
func TestCloudNativePGConnections(t *testing.T) {
	t.Parallel()
	operatorDefinesFlag(t, "database-max-conns")
	api := int(store.DefaultMaxConns)
	// Pods of a Deployment of n replicas during a rolling update: 25% more, rounded up.
	pods := func(n int) int { return n + (n+3)/4 }
	defaults := 2*pods(1)*api + pods(1)*10
	for _, c := range []connectionsCase{
		{name: "defaults", sessions: defaults, routes: 2, operatorArg: "10"},
		{
			name: "replicas and pool sizes",
			set: []string{"api.production.replicas=3", "redis.url=redis://redis:6379", "operator.replicas=2",
				"api.databaseMaxConns=15", "operator.databaseMaxConns=4"},
			sessions: pods(3)*15 + pods(1)*15 + pods(2)*4, routes: 2, apiArg: "15", operatorArg: "4",
		},
		{
			name: "autoscaling counts its most pods",
			set: []string{"api.production.autoscaling.enabled=true", "api.production.autoscaling.maxReplicas=10",
				"redis.url=redis://redis:6379", "api.sandbox.enabled=false"},
			sessions: pods(10)*api + pods(1)*10, routes: 2, operatorArg: "10",
		},
		{
			name: "three PgBouncer instances", set: []string{"database.cnpg.pooler.instances=3"},
			sessions: defaults, routes: 3, operatorArg: "10",
		},
		{
			name: "no Pooler", set: []string{"database.cnpg.pooler.enabled=false"},
			sessions: defaults, routes: 1, operatorArg: "10",
		},
		{
			name: "more than needed is kept",
			set: []string{"database.cnpg.parameters.max_connections=900",
				"database.cnpg.pooler.parameters.default_pool_size=500",
				"database.cnpg.pooler.parameters.max_client_conn=5000"},
			sessions: defaults, routes: 2, operatorArg: "10",
			maxConnections: "900", poolSize: "500", maxClientConn: "5000",
		},
		{
			name:     "max_connections given in clusterSpec",
			set:      []string{"database.cnpg.clusterSpec.postgresql.parameters.max_connections=400"},
			sessions: defaults, routes: 2, operatorArg: "10", maxConnections: "400",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.check(t, render(t, append([]string{cnpgAPI, "database.cnpg.enabled=true"}, c.set...)...))
		})
	}
}

// TestCloudNativePGConnectionsRefused: values that leave codeport's sessions too few connections
// are refused at render, with the numbers.
func TestCloudNativePGConnectionsRefused(t *testing.T) {
	t.Parallel()
	const tooFew = "max_connections (database.cnpg.parameters or clusterSpec) is "
	for _, r := range []struct {
		set  string
		says string
	}{
		{"database.cnpg.parameters.max_connections=219", tooFew + "219, below the 220"},
		{"database.cnpg.clusterSpec.postgresql.parameters.max_connections=100", tooFew + "100, below the 220"},
		{"database.cnpg.pooler.parameters.default_pool_size=99", "default_pool_size is 99, below the 100 database sessions"},
		{"database.cnpg.pooler.parameters.max_client_conn=50", "max_client_conn is 50, below the 100 database sessions"},
	} {
		t.Run(r.set, func(t *testing.T) {
			t.Parallel()
			out, err := renderErr(t, cnpgAPI, "database.cnpg.enabled=true", r.set)
			if err == nil || !strings.Contains(out, r.says) {
				t.Errorf("%s rendered (err %v), want it refused with %q:\n%.500s", r.set, err, r.says, out)
			}
		})
	}
}
