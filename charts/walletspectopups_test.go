package charts_test

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// operatorDefinesFlag fails the test unless the operator's command defines the flag the chart
// passes, so that a renamed flag cannot leave the chart passing one the binary refuses.
func operatorDefinesFlag(t *testing.T, name string) {
	t.Helper()
	src, err := os.ReadFile("../operator.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), `"`+name+`"`) {
		t.Fatalf("the operator defines no flag --%s", name)
	}
}

// TestOperatorWalletSpecTopUps: operator.walletSpecTopUps=false turns off crediting from
// Wallet.spec.topUps; the default passes nothing, so the operator keeps its default (true).
func TestOperatorWalletSpecTopUps(t *testing.T) {
	t.Parallel()
	operatorDefinesFlag(t, "wallet-spec-top-ups")
	for _, tc := range []struct {
		set  []string
		want bool
	}{
		{nil, false},
		{[]string{"operator.walletSpecTopUps=true"}, false},
		{[]string{"operator.walletSpecTopUps=false"}, true},
	} {
		args := renderRBAC(t, tc.set...).operatorArgs
		if len(args) == 0 {
			t.Fatalf("%v: no operator Deployment rendered", tc.set)
		}
		if got := slices.Contains(args, "--wallet-spec-top-ups=false"); got != tc.want {
			t.Errorf("%v: operator args %v pass --wallet-spec-top-ups=false: %t, want %t", tc.set, args, got, tc.want)
		}
		for _, a := range args {
			if strings.HasPrefix(a, "--wallet-spec-top-ups") && a != "--wallet-spec-top-ups=false" {
				t.Errorf("%v: unexpected %s", tc.set, a)
			}
		}
	}
	if out, err := renderErr(t, "operator.walletSpecTopUps=no"); err == nil || !strings.Contains(out, "walletSpecTopUps") {
		t.Errorf("walletSpecTopUps=no accepted or not named: %v\n%s", err, out)
	}
}

// TestOperatorMaxTopUp: operator.maxTopUp reaches --max-top-up as a whole number (Helm reads a
// large YAML number as a float, which would print as 1e+06 and stop the operator), and the
// schema refuses what the operator would refuse at start.
func TestOperatorMaxTopUp(t *testing.T) {
	t.Parallel()
	operatorDefinesFlag(t, "max-top-up")
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{nil, "--max-top-up=1000000"},
		{[]string{"operator.maxTopUp=25000000"}, "--max-top-up=25000000"},
	} {
		if args := renderRBAC(t, tc.set...).operatorArgs; !slices.Contains(args, tc.want) {
			t.Errorf("%v: operator args %v lack %s", tc.set, args, tc.want)
		}
	}
	for _, bad := range []string{"operator.maxTopUp=0", "operator.maxTopUp=ten"} {
		if out, err := renderErr(t, bad); err == nil || !strings.Contains(out, "maxTopUp") {
			t.Errorf("%s accepted or not named: %v\n%s", bad, err, out)
		}
	}
}
