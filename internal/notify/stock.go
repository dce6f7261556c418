package notify

import (
	"context"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/tenancy"
)

// EventStockLow is raised when a product's available codes fall under the threshold of the
// catalog holding it. Like the catalog events it goes only to endpoints that list it.
const EventStockLow = "stock.low"

// StockData is the data of stock.low: the product, the codes available when it fell under the
// threshold, and the threshold.
type StockData struct {
	ProductCode string `json:"productCode"`
	Available   int64  `json:"available"`
	Threshold   int64  `json:"threshold"`
}

// StockCrossedBelow is a fulfilment stock hook: it raises stock.low, in the delivery's
// transaction q, for every production account of a live partner bound to a catalog of low
// whose endpoint lists the event. Stock is production's: sandbox deliveries mint their codes.
func (n *Notifier) StockCrossedBelow(ctx context.Context, q store.Querier, low []store.StockLevel) error {
	var catalogs []uuid.UUID
	byCatalog := map[uuid.UUID][]store.StockLevel{}
	for _, l := range low {
		if _, ok := byCatalog[l.CatalogID]; !ok {
			catalogs = append(catalogs, l.CatalogID)
		}
		byCatalog[l.CatalogID] = append(byCatalog[l.CatalogID], l)
	}
	for _, id := range catalogs {
		subscribers, err := store.ProductSubscribers(ctx, q, id, []string{EventStockLow})
		if err != nil {
			return err
		}
		for _, s := range subscribers {
			if s.Environment != string(tenancy.Production) {
				continue
			}
			for _, l := range byCatalog[id] {
				data := StockData{ProductCode: l.ProductCode, Available: l.Available, Threshold: l.Threshold}
				if err := n.record(ctx, q, s.AccountID, s.Environment, EventStockLow, data); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
