package kubectlplugin

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/codeport/codeport/api/v1alpha1"
)

// TestReportRedactsEverySecret: a bundle of a namespace whose keys the operator issued, whose
// partner ordered codes, and where those keys, codes, a webhook secret and a database password
// were leaked into places a bundle collects (annotations, events, a Pod's environment and
// arguments) holds the resources, events and Pods, says why it has no logs and no migrate status
// (envtest runs no kubelet), and contains none of those secrets.
func TestReportRedactsEverySecret(t *testing.T) {
	tn := onboard(t, "")
	system := namespace(t, "system")
	ctx := context.Background()
	if _, err := kubectl(t, tn.ns, "topup", "acme-sandbox", "--currency", "EUR", "--amount", "100.00"); err != nil {
		t.Fatal(err)
	}
	codes := order(t, tn.key, "report-1")
	const webhookSecret = "whsec_c2VjcmV0LXNpZ25pbmcta2V5LWZvci10ZXN0cw=="
	const dbPassword = "pg-Pa55word-7f3a"
	databaseURL := "postgres://codeport:" + dbPassword + "@db.internal:5432/codeport?sslmode=require"

	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: "acme-webhook"},
		StringData: map[string]string{"secret": webhookSecret}})
	// The operator writes the Partner's status meanwhile: read it afresh on a conflict.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var p v1alpha1.Partner
		get(t, tn.ns, "acme", &p)
		p.Spec.Webhook = &v1alpha1.WebhookSpec{URL: "https://hooks.acme.example/codeport",
			SecretRef: v1alpha1.SecretKeySelector{Name: "acme-webhook", Key: "secret"}}
		p.Annotations = map[string]string{
			"ops.example/handover": "sandbox key " + tn.key + ", v1 token Bearer " + tn.bearer + ", hook " + webhookSecret,
			"ops.example/order":    `{"codes":[{"code":"` + codes[0] + `"}]}`,
		}
		return suite.cluster.client.Update(ctx, &p)
	})
	if err != nil {
		t.Fatal(err)
	}
	create(t, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: "leak"},
		InvolvedObject: corev1.ObjectReference{Kind: "Partner", Namespace: tn.ns, Name: "acme"},
		Type:           corev1.EventTypeWarning, Reason: "Leaked", LastTimestamp: metav1.Now(),
		Message: "Authorization: Bearer " + tn.bearer + "; x-api-key: " + tn.key + "; delivered " + codes[1] +
			"; db " + databaseURL})
	create(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: system, Name: "codeport-api-production-0", Labels: map[string]string{
			"app.kubernetes.io/name": "codeport", "app.kubernetes.io/component": "api-production"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "api", Image: "ghcr.io/codeport/codeport:test",
			Args: []string{"serve", "--database-url=" + databaseURL},
			Env: []corev1.EnvVar{{Name: "CODEPORT_DATABASE_URL", Value: databaseURL},
				{Name: "CODEPORT_CODES_KEY", Value: base64.StdEncoding.EncodeToString([]byte(dbPassword + dbPassword))},
				{Name: "PARTNER_KEY", Value: tn.key}}}}},
	})

	var buf bytes.Buffer
	c := *suite.cluster
	c.namespace = tn.ns
	err = WriteReport(ctx, &c, ReportOptions{Namespace: tn.ns, SystemNamespace: system, TailLines: 100,
		Now: time.Now()}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	files := untar(t, buf.Bytes())

	secrets := map[string]string{"API key": tn.key, "bearer token": tn.bearer, "webhook secret": webhookSecret,
		"database password": dbPassword, "first code": codes[0], "second code": codes[1],
		"API key (base64)": base64.StdEncoding.EncodeToString([]byte(tn.key)),
		"codes key":        base64.StdEncoding.EncodeToString([]byte(dbPassword + dbPassword)),
		// A key's checksum-free body is as good as the key to whoever finds it.
		"API key body": tn.key[12 : len(tn.key)-6]}
	for name, content := range files {
		for what, secret := range secrets {
			if strings.Contains(content, secret) {
				t.Errorf("%s holds the %s", name, what)
			}
		}
	}
	for file, wants := range map[string][]string{
		"resources/partners.yaml":     {"name: acme", "hooks.acme.example", "sandbox key cp_test_"},
		"resources/apikeys.yaml":      {"acme-sandbox-v1", "keyPrefix: cp_test_"},
		"resources/wallettopups.yaml": {"amount: \"100.00\""},
		"secrets.txt": {"acme-sandbox-key\tkey of ApiKey acme-sandbox",
			"acme-webhook\twebhook secret of Partner acme"},
		"events/" + tn.ns + ".txt": {"Leaked", "partner/acme", "Authorization: [REDACTED]",
			"postgres://codeport:[REDACTED]@db.internal"},
		"pods.yaml": {"codeport-api-production-0", "CODEPORT_DATABASE_URL"},
		"NOTES.txt": {"logs of codeport-api-production-0/api: not available",
			"migrate status: not collected: no running API Pod"},
	} {
		content, ok := files["codeport-report/"+file]
		if !ok {
			t.Errorf("the bundle has no %s; it has %v", file, keys(files))
			continue
		}
		for _, want := range wants {
			if !strings.Contains(content, want) {
				t.Errorf("%s lacks %q:\n%s", file, want, content)
			}
		}
	}
	for name := range files {
		// The namespaces are named after the test, which says "secret": only the rest counts.
		base := strings.NewReplacer(tn.ns, "", system, "").Replace(name)
		if strings.Contains(base, "secret") && name != "codeport-report/secrets.txt" {
			t.Errorf("the bundle has %s", name)
		}
	}

	// The command writes the same bundle to a new file, and never over an existing one.
	out := t.TempDir() + "/bundle.tar.gz"
	if o, err := kubectl(t, tn.ns, "report", "--system-namespace", system, "-o", out); err != nil {
		t.Fatalf("report: %v\n%s", err, o)
	}
	if _, err := kubectl(t, tn.ns, "report", "--system-namespace", system, "-o", out); err == nil ||
		!strings.Contains(err.Error(), "exists") {
		t.Fatalf("report over an existing file: %v", err)
	}
}

func untar(t *testing.T, b []byte) map[string]string {
	t.Helper()
	raw, err := readBundle(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for name, data := range raw {
		files[name] = string(data)
	}
	return files
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
