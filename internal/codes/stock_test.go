package codes_test

import (
	"testing"

	"github.com/codeport/codeport/internal/codes"
)

// TestLowStockTransition: stock.low is raised once per crossing of the threshold, not on every
// delivery under it; back at the threshold the notice is forgotten, so the next fall under it
// raises again, also when no delivery saw the product between the restock and the fall.
func TestLowStockTransition(t *testing.T) {
	tests := []struct {
		name                            string
		threshold, available, delivered int64
		told                            bool
		want                            codes.StockNotice
	}{
		{"above, never told", 10, 15, 1, false, codes.NoticeKeep},
		{"at the threshold is not low", 10, 10, 1, false, codes.NoticeKeep},
		{"crossing", 10, 9, 1, false, codes.NoticeRaise},
		{"crossing in one large delivery", 10, 0, 50, false, codes.NoticeRaise},
		{"under, told already", 10, 8, 1, true, codes.NoticeKeep},
		{"out of stock, told already", 10, 0, 0, true, codes.NoticeKeep},
		{"under, not told (crossing missed or threshold new)", 10, 5, 1, false, codes.NoticeRaise},
		{"back at the threshold after a restock", 10, 10, 1, true, codes.NoticeClear},
		{"above after a restock", 10, 40, 2, true, codes.NoticeClear},
		{"restocked and crossed again in one delivery", 10, 7, 5, true, codes.NoticeRaise},
		{"restock that stays under keeps the notice", 10, 8, 1, true, codes.NoticeKeep},
		{"threshold 0: never low", 0, 0, 3, false, codes.NoticeKeep},
		{"threshold 0 forgets an old notice", 0, 0, 3, true, codes.NoticeClear},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := codes.LowStockTransition(tt.threshold, tt.available, tt.delivered, tt.told); got != tt.want {
				t.Errorf("LowStockTransition(threshold %d, available %d, delivered %d, told %v) = %d, want %d",
					tt.threshold, tt.available, tt.delivered, tt.told, got, tt.want)
			}
		})
	}
}
