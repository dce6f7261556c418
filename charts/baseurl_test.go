package charts_test

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// operatorBaseURLs reads the base URLs the rendered operator writes into key Secrets.
func operatorBaseURLs(t *testing.T, objs rendered) map[string]string {
	t.Helper()
	op := objs["Deployment/codeport-operator"]
	if op == nil {
		t.Fatal("no operator Deployment")
	}
	containers, _, _ := unstructured.NestedSlice(op.Object, "spec", "template", "spec", "containers")
	urls := map[string]string{}
	for _, arg := range containers[0].(map[string]any)["args"].([]any) {
		for _, env := range []string{"production", "sandbox"} {
			if v, ok := strings.CutPrefix(arg.(string), "--"+env+"-base-url="); ok {
				urls[env] = v
			}
		}
	}
	return urls
}

// TestPublicBaseURLReachesKeySecrets: publicBaseUrl is what the operator writes into key
// Secrets, ahead of the chart's Ingress host and the in-cluster Service.
func TestPublicBaseURLReachesKeySecrets(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		set  []string
		want map[string]string
	}{
		{"in-cluster Services", nil, map[string]string{
			"production": "http://codeport-production.codeport-system.svc:80/v2",
			"sandbox":    "http://codeport-sandbox.codeport-system.svc:80/v2",
		}},
		{"ingress", []string{"api.sandbox.ingress.enabled=true", "api.sandbox.ingress.tlsSecretName=tls"},
			map[string]string{
				"production": "http://codeport-production.codeport-system.svc:80/v2",
				"sandbox":    "https://sandbox.api.codeport.example/v2",
			}},
		{"public base URLs", []string{
			"api.production.publicBaseUrl=https://partners.example.com/codeport/v2",
			"api.production.ingress.enabled=true",
			"api.sandbox.publicBaseUrl=https://sandbox.partners.example.com/v2",
		}, map[string]string{
			"production": "https://partners.example.com/codeport/v2",
			"sandbox":    "https://sandbox.partners.example.com/v2",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := operatorBaseURLs(t, render(t, tc.set...))
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("operator base URLs %v, want %v", got, tc.want)
			}
		})
	}
	for _, bad := range []string{"api.example.com/v2", "https://api.example.com/v2/", "ftp://api.example.com"} {
		out, err := renderErr(t, "api.production.publicBaseUrl="+bad)
		if err == nil || !strings.Contains(out, "publicBaseUrl") {
			t.Errorf("publicBaseUrl %q accepted: %v\n%s", bad, err, out)
		}
	}
}

// TestHTTPRoute: off by default; on, an HTTPRoute from the given Gateways to the API's Service,
// valid against Gateway API's CRD, and only with the public base URL that key Secrets need.
func TestHTTPRoute(t *testing.T) {
	if routes := ofKind(render(t), "HTTPRoute"); len(routes) != 0 {
		t.Fatalf("HTTPRoutes rendered by default: %d", len(routes))
	}
	const p = "api.production."
	route := []string{
		p + "httpRoute.enabled=true",
		p + "httpRoute.parentRefs[0].name=public", p + "httpRoute.parentRefs[0].namespace=gateway-system",
		p + "httpRoute.parentRefs[0].sectionName=https",
		p + "httpRoute.hostnames[0]=api.codeport.example",
		p + "service.port=8000",
	}
	for missing, want := range map[string]string{"publicBaseUrl": "publicBaseUrl", "parentRefs": "parentRefs"} {
		set := route
		if missing == "parentRefs" {
			set = []string{p + "httpRoute.enabled=true", p + "publicBaseUrl=https://api.codeport.example/v2"}
		}
		if out, err := renderErr(t, set...); err == nil || !strings.Contains(out, want) {
			t.Errorf("HTTPRoute without %s: %v\n%s", missing, err, out)
		}
	}

	objs := render(t, append(route, p+"publicBaseUrl=https://api.codeport.example/v2")...)
	routes := ofKind(objs, "HTTPRoute")
	if len(routes) != 1 || routes[0].GetName() != "codeport-production" {
		t.Fatalf("HTTPRoutes: %v", routes)
	}
	hr := routes[0]
	parents, _, _ := unstructured.NestedSlice(hr.Object, "spec", "parentRefs")
	hostnames, _, _ := unstructured.NestedStringSlice(hr.Object, "spec", "hostnames")
	if fmt.Sprint(parents) != "[map[name:public namespace:gateway-system sectionName:https]]" ||
		fmt.Sprint(hostnames) != "[api.codeport.example]" {
		t.Errorf("HTTPRoute parentRefs %v, hostnames %v", parents, hostnames)
	}
	rules, _, _ := unstructured.NestedSlice(hr.Object, "spec", "rules")
	backends := rules[0].(map[string]any)["backendRefs"].([]any)
	backend := backends[0].(map[string]any)
	svc := objs["Service/codeport-production"]
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if backend["name"] != svc.GetName() || backend["port"] != ports[0].(map[string]any)["port"] ||
		ports[0].(map[string]any)["name"] != "http" {
		t.Errorf("HTTPRoute backend %v, partner-facing Service ports %v", backend, ports)
	}
	if got := operatorBaseURLs(t, objs)["production"]; got != "https://api.codeport.example/v2" {
		t.Errorf("production base URL %q", got)
	}

	s, ns := sharedAPIServer(t)
	installTestCRDs(t, s.client, "gateway.networking.k8s.io_httproutes.yaml")
	hr.SetNamespace(ns)
	createStrictly(t, s.client, hr)
}
