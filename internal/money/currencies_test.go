package money

import (
	"slices"
	"testing"
)

// TestActiveCurrencies: the currencies of ISO 4217 are accepted exactly as spelled; placeholders,
// funds, withdrawn codes, codes ISO never assigned and other spellings are refused.
func TestActiveCurrencies(t *testing.T) {
	cases := []struct {
		code   string
		active bool
	}{
		{"EUR", true}, {"USD", true}, {"JPY", true}, {"KWD", true}, {"CHF", true},
		{"VES", true}, {"ZWG", true}, {"XCG", true}, {"SLE", true}, {"MRU", true}, {"XOF", true},
		{"ERU", false}, // three capitals ISO never assigned
		{"XXX", false}, // "no currency"
		{"XTS", false}, // reserved for testing
		{"XAU", false}, // gold
		{"XDR", false}, // a unit of account
		{"CHE", false}, // a fund
		{"DEM", false}, // withdrawn (euro)
		{"HRK", false}, // withdrawn (euro, 2023)
		{"BGN", false}, // withdrawn (euro, 2026)
		{"ANG", false}, // withdrawn (replaced by XCG)
		{"eur", false}, {"Eur", false}, {"", false}, {"EURO", false}, {"EU", false}, {" EUR", false},
	}
	for _, tc := range cases {
		if got := Active(tc.code); got != tc.active {
			t.Errorf("Active(%q) = %v, want %v", tc.code, got, tc.active)
		}
		if err := CheckCurrency(tc.code); (err == nil) != tc.active {
			t.Errorf("CheckCurrency(%q) = %v", tc.code, err)
		}
	}
}

// TestEveryActiveCurrencyHasDigits: money can be parsed and rendered in every currency the list
// admits, and the list is sorted and free of repeats (Active searches it).
func TestEveryActiveCurrencyHasDigits(t *testing.T) {
	list := Currencies()
	if len(list) < 150 || !slices.IsSorted(list) || len(slices.Compact(slices.Clone(list))) != len(list) {
		t.Fatalf("currency list: %d codes, sorted %v", len(list), slices.IsSorted(list))
	}
	for _, code := range list {
		if len(code) != 3 {
			t.Errorf("%q is not three letters", code)
		}
		digits, err := Digits(code)
		if err != nil || digits < 0 || digits > 3 {
			t.Errorf("Digits(%s) = %d, %v", code, digits, err)
		}
	}
	// The newer codes have ISO's digits, and withdrawn ones keep theirs for the ledger's rows.
	for code, want := range map[string]int{"VES": 2, "ZWG": 2, "XCG": 2, "DEM": 2} {
		if got, err := Digits(code); err != nil || got != want {
			t.Errorf("Digits(%s) = %d, %v; want %d", code, got, err, want)
		}
	}
}
