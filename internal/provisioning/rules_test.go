package provisioning_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/provisioning"
)

func TestBuyingPrice(t *testing.T) {
	cases := []struct {
		price int64
		pct   string
		want  int64
	}{
		{2000, "5", 1900}, {2000, "7.5", 1850}, {999, "5", 949}, // 49.95 rounds to 50
		{1000, "0", 1000}, {1000, "100", 0}, {1, "50", 0}, {3, "50", 1},
	}
	for _, tc := range cases {
		got, err := provisioning.BuyingPrice(tc.price, tc.pct)
		if err != nil || got != tc.want {
			t.Errorf("BuyingPrice(%d, %s) = %d, %v; want %d", tc.price, tc.pct, got, err, tc.want)
		}
	}
	for _, bad := range []string{"-1", "100.5", "x"} {
		if _, err := provisioning.BuyingPrice(100, bad); err == nil {
			t.Errorf("percentage %q accepted", bad)
		}
	}
}

func TestEffectivePolicy(t *testing.T) {
	on, off := true, false
	limit := int32(100)
	spec := &v1alpha1.PartnerSpec{
		AccessPolicy: v1alpha1.AccessPolicy{
			IPWhitelist: []string{"10.0.0.0/8"},
			RateLimit:   &v1alpha1.RateLimitSpec{RequestsPerMinute: 600},
			Ordering: &v1alpha1.OrderingSpec{
				Enabled:       &on,
				WalletEnabled: &on,
				Limits:        &v1alpha1.OrderLimits{DailySpend: map[string]int64{"EUR": 5}},
			},
		},
		Environments: &v1alpha1.EnvironmentOverrides{Sandbox: &v1alpha1.AccessPolicy{
			RateLimit: &v1alpha1.RateLimitSpec{RequestsPerMinute: 60},
			Ordering: &v1alpha1.OrderingSpec{
				WalletEnabled: &off,
				Limits:        &v1alpha1.OrderLimits{MaxQuantityPerOrder: &limit},
			},
		}},
	}
	sb := provisioning.EffectivePolicy(spec, "sandbox")
	if sb.RateLimit.RequestsPerMinute != 60 || sb.IPWhitelist[0] != "10.0.0.0/8" || !*sb.Ordering.Enabled ||
		*sb.Ordering.WalletEnabled || *sb.Ordering.Limits.MaxQuantityPerOrder != 100 ||
		sb.Ordering.Limits.DailySpend["EUR"] != 5 {
		t.Fatalf("sandbox policy: %+v %+v %+v", sb, *sb.Ordering, *sb.Ordering.Limits)
	}
	prod := provisioning.EffectivePolicy(spec, "production")
	if prod.RateLimit.RequestsPerMinute != 600 || !*prod.Ordering.WalletEnabled ||
		prod.Ordering.Limits.MaxQuantityPerOrder != nil {
		t.Fatalf("production policy: %+v", prod)
	}
	// The override must not have modified the partner-wide policy.
	if spec.Ordering.Limits.MaxQuantityPerOrder != nil {
		t.Fatal("override leaked into the partner-wide policy")
	}
}

func TestResolveWebhooks(t *testing.T) {
	shared := &v1alpha1.WebhookSpec{
		URL:       "https://hooks.example/all",
		SecretRef: v1alpha1.SecretKeySelector{Name: "hook", Key: "secret"},
		Events:    []v1alpha1.WebhookEventType{"order.failed"},
	}
	live := &v1alpha1.WebhookSpec{
		URL:       "https://live.example/hook",
		SecretRef: v1alpha1.SecretKeySelector{Name: "live", Key: "secret"},
	}
	secrets := map[string]string{"hook": "shared-secret", "live": "live-secret"}
	cases := map[string]struct {
		spec  v1alpha1.PartnerSpec
		want  map[string]string // environment → "url secret events"
		reads int
	}{
		"none": {v1alpha1.PartnerSpec{}, map[string]string{}, 0},
		"partner-wide serves both, its Secret read once": {
			v1alpha1.PartnerSpec{AccessPolicy: v1alpha1.AccessPolicy{Webhook: shared}},
			map[string]string{"sandbox": "https://hooks.example/all shared-secret [order.failed]",
				"production": "https://hooks.example/all shared-secret [order.failed]"}, 1},
		"production's own": {v1alpha1.PartnerSpec{AccessPolicy: v1alpha1.AccessPolicy{Webhook: shared},
			Environments: &v1alpha1.EnvironmentOverrides{Production: &v1alpha1.AccessPolicy{Webhook: live}}},
			map[string]string{"sandbox": "https://hooks.example/all shared-secret [order.failed]",
				"production": "https://live.example/hook live-secret []"}, 2},
		"sandbox only": {
			v1alpha1.PartnerSpec{Environments: &v1alpha1.EnvironmentOverrides{Sandbox: &v1alpha1.AccessPolicy{Webhook: live}}},
			map[string]string{"sandbox": "https://live.example/hook live-secret []"}, 1},
		"missing Secret leaves that environment without events": {
			v1alpha1.PartnerSpec{AccessPolicy: v1alpha1.AccessPolicy{Webhook: shared},
				Environments: &v1alpha1.EnvironmentOverrides{Sandbox: &v1alpha1.AccessPolicy{Webhook: &v1alpha1.WebhookSpec{
					URL: "https://x.example", SecretRef: v1alpha1.SecretKeySelector{Name: "absent", Key: "secret"}}}}},
			map[string]string{"production": "https://hooks.example/all shared-secret [order.failed]"}, 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reads := 0
			got, err := provisioning.ResolveWebhooks(&tc.spec, func(ref v1alpha1.SecretKeySelector) ([]byte, bool, error) {
				reads++
				s, ok := secrets[ref.Name]
				return []byte(s), ok, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			have := map[string]string{}
			for env, w := range got {
				have[env] = fmt.Sprintf("%s %s %v", w.URL, w.Secret, w.Events)
			}
			if fmt.Sprint(have) != fmt.Sprint(tc.want) || reads != tc.reads {
				t.Fatalf("got %v after %d reads, want %v after %d", have, reads, tc.want, tc.reads)
			}
		})
	}
	boom := errors.New("api server down")
	if _, err := provisioning.ResolveWebhooks(&v1alpha1.PartnerSpec{AccessPolicy: v1alpha1.AccessPolicy{Webhook: shared}},
		func(v1alpha1.SecretKeySelector) ([]byte, bool, error) { return nil, false, boom }); !errors.Is(err, boom) {
		t.Fatalf("read error: %v", err)
	}
}

func TestNormalizeWhitelist(t *testing.T) {
	got, err := provisioning.NormalizeWhitelist([]string{"127.0.0.1", "10.1.2.3/8", "::1", "2001:db8::/32"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.1/32", "10.0.0.0/8", "::1/128", "2001:db8::/32"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if _, err := provisioning.NormalizeWhitelist([]string{"not-an-ip"}); err == nil {
		t.Fatal("garbage accepted")
	}
}
