package kubectlplugin

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/codeport/codeport/internal/auth"
)

// TestRedact: every kind of secret a bundle may meet is blanked, what tells a reader which key
// or which URL a line was about is kept, and ordinary resource text is left alone.
func TestRedact(t *testing.T) {
	live, err := auth.GenerateKey("production")
	if err != nil {
		t.Fatal(err)
	}
	test, err := auth.GenerateKey("sandbox")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, in, want string
	}{
		{"production key", "key " + live + " used", "key " + auth.DisplayPrefix(live) + "[REDACTED] used"},
		{"sandbox key in JSON", `{"apiKey":"` + test + `"}`, `{"apiKey":"[REDACTED]"}`},
		{"x-api-key header", "x-api-key: " + test, "x-api-key: [REDACTED]"},
		{"bearer token", "Authorization: Bearer " + test, "Authorization: [REDACTED] [REDACTED]"},
		{"bearer token alone", `token "bearer abc.def-ghi"`, `token "bearer [REDACTED]"`},
		{"database URL", "postgres://codeport:s3cr3t@db:5432/codeport?sslmode=require",
			"postgres://codeport:[REDACTED]@db:5432/codeport?sslmode=require"},
		{"redis URL without user", "redis://:hunter2@redis:6379/0", "redis://:[REDACTED]@redis:6379/0"},
		{"URL without password", "https://api.example/v2/orders", "https://api.example/v2/orders"},
		{"DSN keyword", "host=db password=s3cr3t user=codeport", "host=db password=[REDACTED] user=codeport"},
		{"webhook secret", "secret whsec_c2VjcmV0Cg== set", "secret whsec_[REDACTED] set"},
		{"sandbox code", "delivered SANDBOX-AB12-CD34-EF56-GH78.", "delivered SANDBOX-[REDACTED]."},
		{"codes in an order", `"codes":[{"code":"XK7-99-PLM"},{"code": "Q2"}]`,
			`"codes":[{"code":"[REDACTED]"},{"code": "[REDACTED]"}]`},
		{"codes key flag", "--codes-key=AAAAbase64==", "--codes-key=[REDACTED]"},
		{"resource text", "secretName: acme-sandbox-key\nsecretRef: {name: hook, key: secret}\nkeyPrefix: cp_test_Ab12",
			"secretName: acme-sandbox-key\nsecretRef: {name: hook, key: secret}\nkeyPrefix: cp_test_Ab12"},
		{"condition message", "password authentication failed for user codeport",
			"password authentication failed for user codeport"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(Redact([]byte(tc.in))); got != tc.want {
				t.Errorf("Redact(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestRedactPod: literal values of sensitive variables are blanked in every kind of container;
// references to Secrets and harmless values stay.
func TestRedactPod(t *testing.T) {
	env := func() []corev1.EnvVar {
		return []corev1.EnvVar{{Name: "CODEPORT_DATABASE_URL", Value: "postgres://u:p@db/x"},
			{Name: "CODEPORT_CODES_KEY", Value: "k"}, {Name: "SMTP_PASSWORD", Value: "p"},
			{Name: "CODEPORT_SMTP_FROM", Value: "ops@example.com"},
			{Name: "PGPASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}}}
	}
	p := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Env: env()}},
		Containers: []corev1.Container{{Env: env()}},
		EphemeralContainers: []corev1.EphemeralContainer{
			{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Env: env()}}}}}
	redactPod(p)
	for _, e := range [][]corev1.EnvVar{p.Spec.InitContainers[0].Env, p.Spec.Containers[0].Env,
		p.Spec.EphemeralContainers[0].Env} {
		var got []string
		for _, v := range e {
			got = append(got, v.Name+"="+v.Value)
		}
		want := "CODEPORT_DATABASE_URL=[REDACTED] CODEPORT_CODES_KEY=[REDACTED] SMTP_PASSWORD=[REDACTED] " +
			"CODEPORT_SMTP_FROM=ops@example.com PGPASSWORD="
		if strings.Join(got, " ") != want {
			t.Errorf("got  %s\nwant %s", strings.Join(got, " "), want)
		}
		if e[4].ValueFrom == nil {
			t.Error("the Secret reference was dropped")
		}
	}
}
