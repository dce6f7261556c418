package pgtext

import "testing"

func TestStorable(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want bool
	}{
		{"empty", "", true},
		{"ascii", "ORDER-1", true},
		{"multibyte", "Bestellung-äöü-注文-🎮", true},
		{"NUL alone", "\x00", false},
		{"NUL inside", "A\x00B", false},
		{"lone continuation byte", "\x80", false},
		{"0xFF", "\xff", false},
		{"overlong slash", "\xc0\xaf", false},
		{"UTF-16 surrogate as UTF-8", "\xed\xa0\x80", false},
		{"truncated sequence", "é"[:1], false},
		{"replacement character itself", "\uFFFD", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Storable(tc.in); got != tc.want {
				t.Errorf("Storable(%q) = %v, want %v", tc.in, got, tc.want)
			}
			if got := StorableBytes([]byte(tc.in)); got != tc.want {
				t.Errorf("StorableBytes(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}
