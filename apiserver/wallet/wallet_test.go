package wallet_test

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"github.com/codeport/codeport/apiserver/store"
	"github.com/codeport/codeport/apiserver/wallet"
)

// TestIsLow: a balance is low when it is under a positive threshold, compared exactly even when
// the threshold is finer than the currency (0.5 JPY); no threshold, or an unreadable one, never
// makes a balance low.
func TestIsLow(t *testing.T) {
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
		if got := wallet.IsLow(tc.balance, tc.currency, tc.threshold); got != tc.low {
			t.Errorf("IsLow(%d %s, threshold %q) = %v, want %v", tc.balance, tc.currency, tc.threshold, got, tc.low)
		}
	}
}

// TestSnapshotOf renders minor units as the currency's decimal and flags the wallet low when
// any balance is.
func TestSnapshotOf(t *testing.T) {
	s, err := wallet.SnapshotOf([]store.Balance{{Currency: "EUR", Balance: 123456}, {Currency: "JPY", Balance: 40}},
		"50")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]json.Number{"EUR": "1234.56", "JPY": "40"}
	if len(s.Balances) != len(want) || s.Balances["EUR"] != want["EUR"] || s.Balances["JPY"] != want["JPY"] {
		t.Errorf("balances %v, want %v", s.Balances, want)
	}
	if !s.LowBalance {
		t.Error("40 JPY under a threshold of 50 is not flagged low")
	}
	if _, err := wallet.SnapshotOf([]store.Balance{{Currency: "ZZZ", Balance: 1}}, ""); err == nil {
		t.Error("a balance in an unknown currency rendered")
	}
}

// TestEntriesRefuseNonPositiveAmounts: a debit or a credit moves a positive amount of a known
// currency; anything else is refused before the database is touched.
func TestEntriesRefuseNonPositiveAmounts(t *testing.T) {
	account := uuid.New()
	for _, amount := range []int64{0, -1} {
		if _, err := wallet.DebitEntry(account, "EUR", amount, "order"); err == nil {
			t.Errorf("debit of %d accepted", amount)
		}
		if _, err := wallet.Credit(nil, account, "EUR", store.EntryTopUp, amount, "ref", ""); err == nil {
			t.Errorf("credit of %d accepted", amount)
		}
	}
	if _, err := wallet.DebitEntry(account, "ZZZ", 1, "order"); err == nil {
		t.Error("debit in an unknown currency accepted")
	}
	e, err := wallet.DebitEntry(account, "JPY", 500, "order-1")
	if err != nil || e.Amount != -500 || e.Scale != 1 || e.Kind != store.EntryOrderDebit || e.Reference != "order-1" {
		t.Errorf("debit entry %+v (%v), want -500 JPY at scale 1 for order-1", e, err)
	}
}
