package codes

// StockIsLow is the low-stock rule, and the only place it is written: a product is low when its
// available codes are under a positive threshold. Deliveries raise stock.low with it and the
// operator counts a Catalog's low products with it.
func StockIsLow(available, threshold int64) bool { return threshold > 0 && available < threshold }

// StockNotice is what a delivery does about one catalog's low-stock notice of a product.
type StockNotice int

// What a delivery does about a notice.
const (
	// NoticeKeep leaves the notice as it is: there is none and the product is not low, or the
	// partners were told already and the product stayed low.
	NoticeKeep StockNotice = iota
	// NoticeRaise raises stock.low and records that the partners were told.
	NoticeRaise
	// NoticeClear forgets the notice: the product is back at the threshold or above, so the
	// next time it falls under it is a new crossing.
	NoticeClear
)

// LowStockTransition decides one delivery's notice of a product for one catalog. available is
// what remains after the delivery, delivered what it took, and told whether a notice stands.
//
// A notice standing while the product was at the threshold or above before this delivery is
// stale: a restock lifted the product and no delivery has seen it since. The delivery is then a
// new crossing and raises again. Without a notice, a low product raises whether or not this
// delivery crossed: the crossing may have been made by deliveries committed together, each
// counting the other's codes as still available, or before the threshold was set.
func LowStockTransition(threshold, available, delivered int64, told bool) StockNotice {
	switch {
	case !StockIsLow(available, threshold):
		if told {
			return NoticeClear
		}
		return NoticeKeep
	case !told || !StockIsLow(available+delivered, threshold):
		return NoticeRaise
	}
	return NoticeKeep
}
