package money

import (
	"fmt"
	"slices"
)

// currencies are the codes a resource, a top-up or an order may name: the currencies of ISO
// 4217 List One as published on 2026-01-01, that is every entry with minor units that is not a
// fund. It is the one list: the partner API checks orders against it (Active), the operator its
// resources, and the CRDs' validation rules are generated from it (make generate).
//
// Left out, so refused wherever money is named anew:
//   - entries without minor units, which are not money one can hold: XXX (no currency), XTS
//     (reserved for testing), the precious metals (XAU, XAG, XPD, XPT), the SDR and other units
//     of account (XDR, XUA, XSU, XBA to XBD);
//   - funds, which price instruments rather than pay for goods: BOV, CHE, CHW, CLF, COU, MXV,
//     USN, UYI, UYW, XAD;
//   - withdrawn codes (List Three): DEM, FRF, HRK, BGN, ANG, CUC, SLL, ZWL, ...
//
// Ledger rows in a code that is not (or no longer) here stay as written and readable: Digits
// knows every code the ledger may hold, the list only decides what is accepted from now on.
// When ISO publishes an amendment, change this list (and newerDigits for a code x/text does not
// know) and run make generate.
var currencies = []string{
	"AED", "AFN", "ALL", "AMD", "AOA", "ARS", "AUD", "AWG", "AZN", "BAM", "BBD", "BDT",
	"BHD", "BIF", "BMD", "BND", "BOB", "BRL", "BSD", "BTN", "BWP", "BYN", "BZD", "CAD",
	"CDF", "CHF", "CLP", "CNY", "COP", "CRC", "CUP", "CVE", "CZK", "DJF", "DKK", "DOP",
	"DZD", "EGP", "ERN", "ETB", "EUR", "FJD", "FKP", "GBP", "GEL", "GHS", "GIP", "GMD",
	"GNF", "GTQ", "GYD", "HKD", "HNL", "HTG", "HUF", "IDR", "ILS", "INR", "IQD", "IRR",
	"ISK", "JMD", "JOD", "JPY", "KES", "KGS", "KHR", "KMF", "KPW", "KRW", "KWD", "KYD",
	"KZT", "LAK", "LBP", "LKR", "LRD", "LSL", "LYD", "MAD", "MDL", "MGA", "MKD", "MMK",
	"MNT", "MOP", "MRU", "MUR", "MVR", "MWK", "MXN", "MYR", "MZN", "NAD", "NGN", "NIO",
	"NOK", "NPR", "NZD", "OMR", "PAB", "PEN", "PGK", "PHP", "PKR", "PLN", "PYG", "QAR",
	"RON", "RSD", "RUB", "RWF", "SAR", "SBD", "SCR", "SDG", "SEK", "SGD", "SHP", "SLE",
	"SOS", "SRD", "SSP", "STN", "SVC", "SYP", "SZL", "THB", "TJS", "TMT", "TND", "TOP",
	"TRY", "TTD", "TWD", "TZS", "UAH", "UGX", "USD", "UYU", "UZS", "VED", "VES", "VND",
	"VUV", "WST", "XAF", "XCD", "XCG", "XOF", "XPF", "YER", "ZAR", "ZMW", "ZWG",
}

// newerDigits are the minor-unit digits, as ISO 4217 gives them, of the currencies above that
// golang.org/x/text's table predates. Codes that table knows keep its digits: amounts already
// stored in minor units must keep meaning what they meant.
var newerDigits = map[string]int{"MRU": 2, "SLE": 2, "VED": 2, "VES": 2, "XCG": 2, "ZWG": 2}

// Currencies returns the codes Active accepts, sorted.
func Currencies() []string { return slices.Clone(currencies) }

// Active reports whether code, exactly as spelled (upper case), is a currency money may be named
// in: a price, a top-up, an order, a spending limit.
func Active(code string) bool {
	_, found := slices.BinarySearch(currencies, code)
	return found
}

// CheckCurrency is Active as an error that says what is wrong with code.
func CheckCurrency(code string) error {
	if !Active(code) {
		return fmt.Errorf("currency %q is not an active ISO 4217 currency code "+
			"(placeholders such as XXX and XTS, funds and withdrawn codes such as DEM are refused)", code)
	}
	return nil
}
