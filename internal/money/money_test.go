package money

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestDigits(t *testing.T) {
	for code, want := range map[string]int{"EUR": 2, "USD": 2, "JPY": 0, "KWD": 3, "GBP": 2} {
		got, err := Digits(code)
		if err != nil || got != want {
			t.Errorf("Digits(%s) = %d, %v; want %d", code, got, err, want)
		}
	}
	if _, err := Digits("XYZ1"); err == nil {
		t.Error("Digits(XYZ1) succeeded")
	}
}

func TestFormatAndParse(t *testing.T) {
	cases := []struct {
		minor int64
		code  string
		text  string
	}{
		{498050, "EUR", "4980.50"},
		{0, "EUR", "0.00"},
		{5, "EUR", "0.05"},
		{1500, "JPY", "1500"},
		{1234, "KWD", "1.234"},
		{-250, "EUR", "-2.50"},
	}
	for _, tc := range cases {
		got, err := Format(tc.minor, tc.code)
		if err != nil || got != tc.text {
			t.Errorf("Format(%d, %s) = %q, %v; want %q", tc.minor, tc.code, got, err, tc.text)
		}
		back, err := Parse(tc.text, tc.code)
		if err != nil || back != tc.minor {
			t.Errorf("Parse(%q, %s) = %d, %v; want %d", tc.text, tc.code, back, err, tc.minor)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, in := range []string{"", "abc", "1.234", "1.2.3", "--1", "1e3", "."} {
		if v, err := Parse(in, "EUR"); err == nil {
			t.Errorf("Parse(%q, EUR) = %d, want error", in, v)
		}
	}
	if _, err := Parse("99999999999999999999", "EUR"); !errors.Is(err, ErrOverflow) {
		t.Errorf("huge amount: err = %v, want ErrOverflow", err)
	}
	if v, err := Parse("12", "EUR"); err != nil || v != 1200 {
		t.Errorf("Parse(12) = %d, %v", v, err)
	}
	if v, err := Parse("0.5", "EUR"); err != nil || v != 50 {
		t.Errorf("Parse(0.5) = %d, %v", v, err)
	}
}

func TestCheckedArithmetic(t *testing.T) {
	if _, err := Mul(math.MaxInt64/2+1, 2); !errors.Is(err, ErrOverflow) {
		t.Error("Mul overflow not detected")
	}
	if v, err := Mul(2000, 3); err != nil || v != 6000 {
		t.Errorf("Mul(2000,3) = %d, %v", v, err)
	}
	if _, err := Add(math.MaxInt64, 1); !errors.Is(err, ErrOverflow) {
		t.Error("Add overflow not detected")
	}
	if v, err := Add(-5, 3); err != nil || v != -2 {
		t.Errorf("Add(-5,3) = %d, %v", v, err)
	}
}

// TestCeilMinor rounds what is finer than the currency up to its next minor unit, and refuses
// what is not a number or does not fit.
func TestCeilMinor(t *testing.T) {
	cases := []struct {
		major, code string
		want        int64
	}{
		{"10", "EUR", 1000}, {"10.005", "EUR", 1001}, {"0.5", "JPY", 1}, {"2", "JPY", 2}, {"0.0001", "KWD", 1},
		{"12.3456", "KWD", 12346}, {"-0.5", "JPY", 0}, {"-1.5", "JPY", -1}, {" 7 ", "EUR", 700}, {"0", "EUR", 0},
	}
	for _, tc := range cases {
		if got, err := CeilMinor(tc.major, tc.code); err != nil || got != tc.want {
			t.Errorf("CeilMinor(%q, %s) = %d, %v; want %d", tc.major, tc.code, got, err, tc.want)
		}
	}
	for _, bad := range []struct{ major, code string }{{"", "EUR"}, {"ten", "EUR"}, {"1", "ZZZ"},
		{"100000000000000000000", "EUR"}} {
		if got, err := CeilMinor(bad.major, bad.code); err == nil {
			t.Errorf("CeilMinor(%q, %s) = %d, want an error", bad.major, bad.code, got)
		}
	}
}

// TestLowBalanceRule: a balance is low when it is under a positive threshold, compared exactly
// even when the threshold is finer than the currency (0.5 JPY); no threshold, or an unreadable
// one, never makes a balance low.
func TestLowBalanceRule(t *testing.T) {
	cases := []struct {
		balance   int64
		currency  string
		threshold string
		low       bool
	}{
		{999, "EUR", "10.00", true},
		{1000, "EUR", "10", false},
		{1001, "EUR", "10.00", false},
		{0, "EUR", "0", false},
		{-1, "EUR", "0", false},
		{0, "EUR", "", false},
		{0, "EUR", "ten", false},
		{0, "EUR", "-5", false},
		{0, "JPY", "0.5", true},
		{1, "JPY", "0.5", false},
		{9999, "KWD", "10.000", true},
		{10000, "KWD", "10.000", false},
		{100, "EUR", "1.005", true},
		{101, "EUR", "1.005", false},
		{0, "ZZZ", "1", false},
	}
	for _, tc := range cases {
		if got := IsLow(tc.balance, LowBalanceLimit(tc.threshold, tc.currency)); got != tc.low {
			t.Errorf("%d %s under threshold %q: low = %v, want %v", tc.balance, tc.currency, tc.threshold, got, tc.low)
		}
	}
}

// TestTopUpAmount: the rule every top-up passes before it is credited, whichever resource asks
// for it.
func TestTopUpAmount(t *testing.T) {
	const max = DefaultMaxTopUp
	cases := []struct {
		amount, currency string
		max              int64 // the largest top-up, major units
		want             int64 // minor units; 0 when refused
		refusal          string
	}{
		{"10.00", "EUR", max, 1000, ""},
		{"12", "EUR", max, 1200, ""},
		{"500", "JPY", max, 500, ""},
		{"1.234", "KWD", max, 1234, ""},
		{"10.00", "VES", max, 1000, ""},
		{"10.00", "ERU", max, 0, `currency "ERU" is not an active ISO 4217 currency code`},
		{"10.00", "XXX", max, 0, `currency "XXX" is not an active ISO 4217`},
		{"10.00", "XTS", max, 0, `currency "XTS" is not an active ISO 4217`},
		{"10.00", "DEM", max, 0, `currency "DEM" is not an active ISO 4217`},
		{"10.00", "eur", max, 0, `currency "eur" is not an active ISO 4217`},
		{"0.00", "EUR", max, 0, "must be positive"},
		{"1.005", "EUR", max, 0, "more than 2 decimal places"},
		{"0.5", "JPY", max, 0, "more than 0 decimal places"},
		{"-5.00", "EUR", max, 0, "must be positive"},
		{"ten", "EUR", max, 0, "invalid amount"},
		{"92233720368547758.08", "EUR", max, 0, "out of range"},
		// The largest top-up, in major units of the top-up's own currency.
		{"1000000.00", "EUR", max, 100000000, ""},
		{"1000000.01", "EUR", max, 0, "above the largest top-up, 1000000 EUR (the operator's --max-top-up)"},
		{"1000000", "JPY", max, 1000000, ""},
		{"1000001", "JPY", max, 0, "above the largest top-up, 1000000 JPY"},
		{"1000000.000", "KWD", max, 1000000000, ""},
		{"1000000.001", "KWD", max, 0, "above the largest top-up"},
		{"92233720368547758.07", "EUR", max, 0, "above the largest top-up"},
		{"5.00", "EUR", 5, 500, ""},
		{"5.01", "EUR", 5, 0, "above the largest top-up, 5 EUR"},
		// A limit past what minor units can count leaves the ledger's own bound.
		{"92233720368547758.07", "EUR", math.MaxInt64, math.MaxInt64, ""},
	}
	for _, tc := range cases {
		got, err := TopUpAmount(tc.amount, tc.currency, tc.max)
		switch {
		case tc.refusal == "" && (err != nil || got != tc.want):
			t.Errorf("TopUpAmount(%s %s, %d) = %d, %v; want %d", tc.amount, tc.currency, tc.max, got, err, tc.want)
		case tc.refusal != "" && (err == nil || !strings.Contains(err.Error(), tc.refusal)):
			t.Errorf("TopUpAmount(%s %s, %d) = %d, %v; want a refusal saying %q",
				tc.amount, tc.currency, tc.max, got, err, tc.refusal)
		}
	}
}
