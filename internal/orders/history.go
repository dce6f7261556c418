package orders

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/apitime"
	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/listing"
	"github.com/codeport/codeport/internal/store"
)

// Summary is an order as the history lists it: what it was and where it stands, without its
// codes (GET /orders/{reference} has them) or the wallet.
type Summary struct {
	OrderID           uuid.UUID         `json:"orderId"`
	ExternalOrderCode string            `json:"externalOrderCode"`
	Status            string            `json:"status"`
	Currency          string            `json:"currency"`
	Price             int64             `json:"price"`
	Delivered         int               `json:"delivered"`
	Total             int               `json:"total"`
	Refunded          int64             `json:"refunded"`
	Reason            string            `json:"reason,omitempty"`
	CreatedAt         apitime.Time      `json:"createdAt"`
	EstimatedReadyAt  *apitime.Time     `json:"estimatedReadyAt,omitempty"`
	FinishedAt        *apitime.Time     `json:"finishedAt,omitempty"`
	Products          []LineSummary     `json:"products"`
	Metadata          map[string]string `json:"metadata,omitempty"`
}

// LineSummary is an order line without its codes.
type LineSummary struct {
	ProductCode string `json:"productCode"`
	Price       int64  `json:"price"`
	Quantity    int    `json:"quantity"`
	SKU         string `json:"sku,omitempty"`
}

// HistoryPage is one page of GET /orders.
type HistoryPage struct {
	Orders []Summary `json:"orders"`
	// NextCursor continues the history below this page; absent on the last page.
	NextCursor string `json:"nextCursor,omitempty"`
}

// History runs GET /orders: a page of the account's orders, newest first.
func (s *Service) History(ctx context.Context, acct *auth.Account, q listing.Query) (HistoryPage, error) {
	before, err := listing.OrderKey(q.Before)
	if err != nil {
		return HistoryPage{}, err
	}
	list, err := store.HistoryOrders(ctx, s.db.Pool, store.OrderFilter{AccountID: acct.ID, Status: q.Status,
		ExternalOrderCode: q.ExternalOrderCode, From: q.From, To: q.To, Before: before, Limit: q.Limit + 1})
	if err != nil {
		return HistoryPage{}, fmt.Errorf("order history: %w", err)
	}
	page := HistoryPage{Orders: make([]Summary, 0, min(len(list), q.Limit))}
	for i := range list {
		if i == q.Limit {
			last := list[i-1]
			page.NextCursor = listing.EncodeCursor(listing.Orders, acct.ID,
				listing.Cursor{At: last.CreatedAt, ID: last.ID.String()})
			break
		}
		page.Orders = append(page.Orders, summarize(&list[i]))
	}
	return page, nil
}

func summarize(o *store.Order) Summary {
	v := Summary{OrderID: o.ID, ExternalOrderCode: o.ExternalOrderCode, Status: o.Status, Currency: o.Currency,
		Price: o.TotalPrice, Delivered: o.Delivered, Total: o.TotalQuantity, Refunded: o.RefundedAmount,
		CreatedAt: apitime.Of(o.CreatedAt), Products: make([]LineSummary, 0, len(o.Lines)), Metadata: metadataOf(o)}
	if o.Reason != nil {
		v.Reason = *o.Reason
	}
	if o.Status == store.OrderProcessing {
		eta := apitime.Of(o.EstimatedReadyAt)
		v.EstimatedReadyAt = &eta
	}
	if o.FinishedAt != nil {
		at := apitime.Of(*o.FinishedAt)
		v.FinishedAt = &at
	}
	for _, l := range o.Lines {
		v.Products = append(v.Products, LineSummary{ProductCode: l.ProductCode, Price: l.UnitPrice, Quantity: l.Quantity,
			SKU: l.SKU})
	}
	return v
}
