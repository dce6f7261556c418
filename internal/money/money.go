package money

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"

	"golang.org/x/text/currency"
)

// ErrOverflow is returned when a computation would not fit in int64 minor units.
var ErrOverflow = errors.New("amount out of range")

// Digits is the number of minor-unit digits of an ISO 4217 currency code (JPY 0, EUR 2, KWD 3).
// It knows withdrawn codes too, so that ledger rows written in them stay readable; whether a code
// may be used anew is Active's to say.
func Digits(code string) (int, error) {
	if digits, ok := newerDigits[strings.ToUpper(code)]; ok {
		return digits, nil
	}
	unit, err := currency.ParseISO(code)
	if err != nil {
		return 0, fmt.Errorf("unknown currency %q: %w", code, err)
	}
	scale, _ := currency.Standard.Rounding(unit)
	return scale, nil
}

// Format renders minor units as a plain decimal string of major units: 498050 EUR -> "4980.50".
func Format(minor int64, code string) (string, error) {
	digits, err := Digits(code)
	if err != nil {
		return "", err
	}
	r := new(big.Rat).SetFrac(big.NewInt(minor), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(digits)), nil))
	return r.FloatString(digits), nil
}

// Number renders minor units as a JSON number in major units, exactly (no float rounding).
func Number(minor int64, code string) (json.Number, error) {
	s, err := Format(minor, code)
	if err != nil {
		return "", err
	}
	return json.Number(s), nil
}

// Parse converts a decimal string of major units ("5000.00", "12", "0.5") to minor units. It
// rejects more fractional digits than the currency has rather than rounding money silently.
func Parse(major, code string) (int64, error) {
	digits, err := Digits(code)
	if err != nil {
		return 0, err
	}
	return ParseScaled(major, digits)
}

// ParseScaled converts a decimal string to an integer scaled by 10^digits, exactly.
func ParseScaled(decimal string, digits int) (int64, error) {
	s := strings.TrimSpace(decimal)
	if s == "" {
		return 0, errors.New("empty amount")
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" && frac == "" || !allDigits(whole) || !allDigits(frac) {
		return 0, fmt.Errorf("invalid amount %q", decimal)
	}
	frac = strings.TrimRight(frac, "0")
	if len(frac) > digits {
		return 0, fmt.Errorf("amount %q has more than %d decimal places", decimal, digits)
	}
	frac += strings.Repeat("0", digits-len(frac))
	n, ok := new(big.Int).SetString(strings.TrimLeft(whole+frac, "0")+"0", 10)
	if !ok {
		return 0, fmt.Errorf("invalid amount %q", decimal)
	}
	n.Quo(n, big.NewInt(10))
	if neg {
		n.Neg(n)
	}
	if !n.IsInt64() {
		return 0, fmt.Errorf("amount %q: %w", decimal, ErrOverflow)
	}
	return n.Int64(), nil
}

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// Mul returns a*b or ErrOverflow.
func Mul(a, b int64) (int64, error) {
	if a == 0 || b == 0 {
		return 0, nil
	}
	c := a * b
	if c/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, ErrOverflow
	}
	return c, nil
}

// Add returns a+b or ErrOverflow.
func Add(a, b int64) (int64, error) {
	c := a + b
	if (b > 0 && c < a) || (b < 0 && c > a) {
		return 0, ErrOverflow
	}
	return c, nil
}

// LowBalanceLimit is a low-balance threshold (decimal major units, as stored and as the Wallet
// spells it) in minor units of currency, rounded up: an integer balance is under a threshold
// exactly when it is under its ceiling, so "0.5" JPY is 1. It is 0, no threshold, for an empty
// or unreadable one.
func LowBalanceLimit(threshold, currency string) int64 {
	if strings.TrimSpace(threshold) == "" {
		return 0
	}
	limit, err := CeilMinor(threshold, currency)
	if err != nil || limit < 0 {
		return 0
	}
	return limit
}

// IsLow is the low-balance rule, and the only place it is written: a balance (minor units) is
// low when it is under a positive limit (LowBalanceLimit). The ledger sets balances' low flags
// with it, alerts fire when it turns true, and GET /wallet reports it.
func IsLow(balance, limit int64) bool { return limit > 0 && balance < limit }

// CeilMinor converts a decimal string of major units to minor units of the currency, rounding
// up what is finer than its digits ("0.5" JPY -> 1).
func CeilMinor(major, code string) (int64, error) {
	scale, err := Scale(code)
	if err != nil {
		return 0, err
	}
	r, ok := new(big.Rat).SetString(strings.TrimSpace(major))
	if !ok {
		return 0, fmt.Errorf("amount %q is not a decimal number", major)
	}
	r.Mul(r, new(big.Rat).SetInt64(scale))
	q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1)) // DivMod floors (Euclidean, positive denominator): one up is the ceiling
	}
	if !q.IsInt64() {
		return 0, fmt.Errorf("amount %q: %w", major, ErrOverflow)
	}
	return q.Int64(), nil
}

// Scale is 10^digits of a currency: the number of minor units in one major unit.
func Scale(code string) (int64, error) {
	digits, err := Digits(code)
	if err != nil {
		return 0, err
	}
	s := int64(1)
	for range digits {
		s *= 10
	}
	return s, nil
}

// TrimDecimal renders a decimal string minimally for JSON: "7.5000" -> "7.5", "100.000" ->
// "100", "" -> "0".
func TrimDecimal(s string) string {
	s = strings.TrimSpace(s)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "" || s == "-" || s == "-0" {
		return "0"
	}
	return s
}

// DefaultMaxTopUp is the largest top-up credited unless the operator is given another
// (--max-top-up), in major units of the top-up's currency: a million euros, dollars or yen. A
// larger amount is far likelier a slip (a test's 99999..., a pasted reference) than a transfer,
// and a balance near the ledger's bound could never be credited again.
const DefaultMaxTopUp = 1_000_000

// TopUpAmount is the rule every top-up passes before it is credited, whichever resource asks
// for it (a WalletTopUp, an entry of Wallet.spec.topUps): the currency an active ISO 4217 code,
// the amount a positive decimal of major units with no more decimals than the currency has, and
// at most maxMajor major units. It returns the amount in minor units.
func TopUpAmount(amount, currency string, maxMajor int64) (int64, error) {
	if err := CheckCurrency(currency); err != nil {
		return 0, err
	}
	minor, err := Parse(amount, currency)
	if err != nil {
		return 0, fmt.Errorf("amount %s %s: %w", amount, currency, err)
	}
	if minor <= 0 {
		return 0, fmt.Errorf("amount %s %s must be positive", amount, currency)
	}
	scale, err := Scale(currency)
	if err != nil {
		return 0, err
	}
	ceiling, err := Mul(maxMajor, scale)
	if err != nil {
		ceiling = math.MaxInt64 // a ceiling past the ledger's bound leaves only that bound
	}
	if minor > ceiling {
		return 0, fmt.Errorf("amount %s %s is above the largest top-up, %d %s (the operator's --max-top-up): "+
			"split a larger transfer into several top-ups, or raise the limit", amount, currency, maxMajor, currency)
	}
	return minor, nil
}
