package charts_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/codeport/codeport/internal/poll"
)

// rbacKinds are the kinds that make up the operator's identity and permissions.
var rbacKinds = map[string]bool{
	"ServiceAccount": true, "Role": true, "RoleBinding": true, "ClusterRole": true, "ClusterRoleBinding": true,
}

// TestLeaderElectionRecordsItsEventUnderTheShippedRBAC grants the operator's ServiceAccount
// exactly the RBAC the chart and config/default ship, then runs controller-runtime's leader
// election as that ServiceAccount and waits for the LeaderElection event it records. A Role
// that lacks the events API the election records through leaves no event (and a denial in the
// operator's log on every leader change, as a real node showed).
func TestLeaderElectionRecordsItsEventUnderTheShippedRBAC(t *testing.T) {
	for _, tc := range []struct {
		name, serviceAccount string
		objs                 func(t *testing.T) []*unstructured.Unstructured
	}{
		{"chart", "codeport", func(t *testing.T) []*unstructured.Unstructured {
			var objs []*unstructured.Unstructured
			for _, o := range render(t) {
				objs = append(objs, o)
			}
			return objs
		}},
		{"config/default", "codeport-operator", func(t *testing.T) []*unstructured.Unstructured {
			return kustomize(t, "default")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Its own server: the RBAC objects are cluster-scoped and named as a release's.
			s := freshAPIServer(t)
			c, cfg := s.client, s.cfg
			ctx := context.Background()
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "codeport-system"}}); err != nil {
				t.Fatal(err)
			}
			for _, o := range tc.objs(t) {
				if !rbacKinds[o.GetKind()] {
					continue
				}
				if err := c.Create(ctx, o); err != nil {
					t.Fatalf("%s/%s: %v", o.GetKind(), o.GetName(), err)
				}
			}
			electAs(t, serviceAccountConfig(cfg, "codeport-system", tc.serviceAccount))
			poll.Until(t, time.Minute, "the LeaderElection event", func() (bool, string) {
				var events corev1.EventList
				if err := c.List(ctx, &events, client.InNamespace("codeport-system")); err != nil {
					return false, err.Error()
				}
				for _, e := range events.Items {
					if e.Reason == "LeaderElection" {
						return true, ""
					}
				}
				return false, fmt.Sprintf("%d events, none of reason LeaderElection", len(events.Items))
			})
		})
	}
}

// serviceAccountConfig is cfg impersonating a ServiceAccount, with the groups its token carries.
func serviceAccountConfig(cfg *rest.Config, namespace, name string) *rest.Config {
	sa := rest.CopyConfig(cfg)
	sa.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return sa
}

// electAs runs a manager with the operator's leader-election settings as cfg's user until the
// test ends.
func electAs(t *testing.T, cfg *rest.Config) {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          true,
		LeaderElectionID:        "operator.codeport.dev",
		LeaderElectionNamespace: "codeport-system",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}
