package provisioning_test

import (
	"testing"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/apiserver/provisioning"
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
		AccessPolicy: v1alpha1.AccessPolicy{IPWhitelist: []string{"10.0.0.0/8"}, RateLimit: &v1alpha1.RateLimitSpec{RequestsPerMinute: 600},
			Ordering: &v1alpha1.OrderingSpec{Enabled: &on, WalletEnabled: &on, Limits: &v1alpha1.OrderLimits{DailySpend: map[string]int64{"EUR": 5}}}},
		Environments: &v1alpha1.EnvironmentOverrides{Sandbox: &v1alpha1.AccessPolicy{RateLimit: &v1alpha1.RateLimitSpec{RequestsPerMinute: 60},
			Ordering: &v1alpha1.OrderingSpec{WalletEnabled: &off, Limits: &v1alpha1.OrderLimits{MaxQuantityPerOrder: &limit}}}},
	}
	sb := provisioning.EffectivePolicy(spec, "sandbox")
	if sb.RateLimit.RequestsPerMinute != 60 || sb.IPWhitelist[0] != "10.0.0.0/8" || !*sb.Ordering.Enabled || *sb.Ordering.WalletEnabled ||
		*sb.Ordering.Limits.MaxQuantityPerOrder != 100 || sb.Ordering.Limits.DailySpend["EUR"] != 5 {
		t.Fatalf("sandbox policy: %+v %+v %+v", sb, *sb.Ordering, *sb.Ordering.Limits)
	}
	prod := provisioning.EffectivePolicy(spec, "production")
	if prod.RateLimit.RequestsPerMinute != 600 || !*prod.Ordering.WalletEnabled || prod.Ordering.Limits.MaxQuantityPerOrder != nil {
		t.Fatalf("production policy: %+v", prod)
	}
	// The override must not have modified the partner-wide policy.
	if spec.Ordering.Limits.MaxQuantityPerOrder != nil {
		t.Fatal("override leaked into the partner-wide policy")
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
