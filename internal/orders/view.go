package orders

import (
	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/apitime"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/wallet"
)

// MessageProcessing is the spec's text while an order is processing.
const MessageProcessing = "Order is still processing"

// View is an order as the API returns it; which fields are present depends on the status.
type View struct {
	OrderID           uuid.UUID     `json:"orderId"`
	ExternalOrderCode string        `json:"externalOrderCode"`
	Status            string        `json:"status"`
	EstimatedReadyAt  *apitime.Time `json:"estimatedReadyAt,omitempty"`
	Message           string        `json:"message,omitempty"`
	Reason            string        `json:"reason,omitempty"`
	Delivered         *int          `json:"delivered,omitempty"`
	Total             *int          `json:"total,omitempty"`
	Products          []ProductView `json:"products,omitempty"`
	// Metadata is the partner's key/value pairs of the order, when it was placed with some.
	Metadata map[string]string `json:"metadata,omitempty"`
	Wallet   wallet.Snapshot   `json:"wallet"`
}

// ProductView is one order line with the codes delivered for it.
type ProductView struct {
	ProductCode string     `json:"productCode"`
	Price       int64      `json:"price"`
	Quantity    int        `json:"quantity"`
	Codes       []CodeView `json:"codes"`
}

// CodeView is one delivered unit.
type CodeView struct {
	Code string `json:"code"`
}

// render builds the representation of o; codes maps line number to its delivered codes.
func render(o *store.Order, codes map[int][]string, w wallet.Snapshot) View {
	v := View{OrderID: o.ID, ExternalOrderCode: o.ExternalOrderCode, Status: o.Status, Metadata: metadataOf(o),
		Wallet: w}
	switch o.Status {
	case store.OrderProcessing:
		eta := apitime.Of(o.EstimatedReadyAt)
		v.EstimatedReadyAt = &eta
		v.Message = MessageProcessing
	case store.OrderFailed:
		if o.Reason != nil {
			v.Reason = *o.Reason
		}
	case store.OrderCompleted, store.OrderPartiallyCompleted:
		if o.Status == store.OrderPartiallyCompleted {
			delivered, total := o.Delivered, o.TotalQuantity
			v.Delivered, v.Total = &delivered, &total
		}
		v.Products = make([]ProductView, 0, len(o.Lines))
		for _, l := range o.Lines {
			pv := ProductView{ProductCode: l.ProductCode, Price: l.UnitPrice, Quantity: l.Quantity, Codes: []CodeView{}}
			for _, c := range codes[l.LineNo] {
				pv.Codes = append(pv.Codes, CodeView{Code: c})
			}
			v.Products = append(v.Products, pv)
		}
	}
	return v
}

// metadataOf is o's metadata as responses show it: nil (omitted) when it has none.
func metadataOf(o *store.Order) map[string]string {
	if len(o.Metadata) == 0 {
		return nil
	}
	return o.Metadata
}
