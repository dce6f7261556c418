//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// operatorNeeds is every verb the operator's code uses: the rules its kubebuilder markers
// generate (config/rbac/role.yaml, which the chart copies) in every watched namespace, and
// what leader election does in its own namespace: the Lease, and the LeaderElection event,
// which client-go's leader election records through the core events API.
func operatorNeeds(root string) ([]authv1.ResourceAttributes, error) {
	b, err := os.ReadFile(root + "/config/rbac/role.yaml")
	if err != nil {
		return nil, fmt.Errorf("read the operator's role: %w", err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(b, &role); err != nil {
		return nil, fmt.Errorf("parse the operator's role: %w", err)
	}
	var needs []authv1.ResourceAttributes
	for _, r := range role.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					// Checked in the partners' namespace, where the operator works.
					needs = append(needs, authv1.ResourceAttributes{Namespace: partnersNS, Group: g,
						Resource: res, Verb: v})
				}
			}
		}
	}
	for _, v := range []string{"get", "create", "update"} {
		needs = append(needs, authv1.ResourceAttributes{Namespace: namespace, Group: "coordination.k8s.io",
			Resource: "leases", Verb: v})
	}
	for _, v := range []string{"create", "patch"} {
		needs = append(needs, authv1.ResourceAttributes{Namespace: namespace, Group: "", Resource: "events", Verb: v})
	}
	return needs, nil
}

// checkOperatorRBAC asks the API server, as the operator's ServiceAccount, whether each verb the
// operator needs is allowed, and returns the denied ones.
func (k *kube) checkOperatorRBAC(
	ctx context.Context, serviceAccount string, needs []authv1.ResourceAttributes,
) ([]string, error) {
	var deniedVerbs []string
	user := "system:serviceaccount:" + namespace + ":" + serviceAccount
	for _, ra := range needs {
		sar := &authv1.SubjectAccessReview{Spec: authv1.SubjectAccessReviewSpec{
			User: user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace,
				"system:authenticated"},
			ResourceAttributes: &ra,
		}}
		if err := k.k8s.Create(ctx, sar); err != nil {
			return nil, fmt.Errorf("subject access review: %w", err)
		}
		if !sar.Status.Allowed {
			deniedVerbs = append(deniedVerbs, fmt.Sprintf("%s %s.%s in %s", ra.Verb, ra.Resource, ra.Group, ra.Namespace))
		}
	}
	return deniedVerbs, nil
}

// auditEvent is the part of an audit.k8s.io/v1 Event read here.
type auditEvent struct {
	Stage    string    `json:"stage"`
	Received time.Time `json:"requestReceivedTimestamp"`
	Verb     string    `json:"verb"`
	User     struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource  string `json:"resource"`
		APIGroup  string `json:"apiGroup"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// auditDenials reads the API server's audit log for requests the release's ServiceAccounts were
// refused (403): a verb the chart's RBAC does not grant, whether or not a log line says so.
// Requests received in [from, before) are counted (zero: unbounded). CloudNativePG's own
// ServiceAccounts of the chart's Cluster and Pooler are not the chart's: their Roles are
// CloudNativePG's, which deletes them with a Cluster whose Pods still stop.
func auditDenials(path string, from, before time.Time) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	defer f.Close()
	prefix := "system:serviceaccount:" + namespace + ":"
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev auditEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Stage != "ResponseComplete" {
			continue
		}
		if (!before.IsZero() && !ev.Received.Before(before)) || ev.Received.Before(from) {
			continue
		}
		if !strings.HasPrefix(ev.User.Username, prefix) || ev.ResponseStatus == nil || ev.ResponseStatus.Code != 403 {
			continue
		}
		if sa := strings.TrimPrefix(ev.User.Username, prefix); sa == dbCluster || sa == dbCluster+"-pooler" {
			continue
		}
		what := ev.Verb
		if o := ev.ObjectRef; o != nil {
			what = fmt.Sprintf("%s %s.%s %s/%s", ev.Verb, o.Resource, o.APIGroup, o.Namespace, o.Name)
		}
		out = append(out, ev.User.Username+": "+what)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return out, nil
}
