package wallet_test

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/wallet"
)

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
		if _, err := wallet.Credit(t.Context(), nil, account, "EUR", store.EntryTopUp, amount, "ref", ""); err == nil {
			t.Errorf("credit of %d accepted", amount)
		}
	}
	if _, err := wallet.DebitEntry(account, "ZZZ", 1, "order"); err == nil {
		t.Error("debit in an unknown currency accepted")
	}
	e, err := wallet.DebitEntry(account, "JPY", 500, "order-1")
	if err != nil || e.Amount != -500 || e.Currency != "JPY" || e.Kind != store.EntryOrderDebit ||
		e.Reference != "order-1" {
		t.Errorf("debit entry %+v (%v), want -500 JPY for order-1", e, err)
	}
}

// TestSpreadsheetText: free text a spreadsheet would evaluate is written as text.
func TestSpreadsheetText(t *testing.T) {
	for in, want := range map[string]string{
		"po-1001":           "po-1001",
		"":                  "",
		"=HYPERLINK(\"x\")": "'=HYPERLINK(\"x\")",
		"+1":                "'+1",
		"-2+3":              "'-2+3",
		"@SUM(A1)":          "'@SUM(A1)",
		"\t=1":              "'\t=1",
		"wire ref =1":       "wire ref =1",
	} {
		if got := wallet.SpreadsheetText(in); got != want {
			t.Errorf("SpreadsheetText(%q) = %q, want %q", in, got, want)
		}
	}
}
