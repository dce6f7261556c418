// Package money converts between integer minor units and decimal major units using each
// currency's ISO 4217 digits, and does overflow-checked arithmetic on minor units.
package money
