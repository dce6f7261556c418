package notify

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/codeport/codeport/internal/catalog"
	"github.com/codeport/codeport/internal/store"
)

// Product event types. Unlike the contract's events, an account receives them only when its
// endpoint lists them (events: [product.updated, product.removed, catalog.updated]), so a
// receiver written for the contract's four events never meets them.
const (
	EventProductUpdated = "product.updated"
	EventProductRemoved = "product.removed"
	EventCatalogUpdated = "catalog.updated"
)

// ProductEventTypes are the opt-in event types of catalog changes.
var ProductEventTypes = []string{EventProductUpdated, EventProductRemoved, EventCatalogUpdated}

// MaxProductEvents is the most products one catalog change reports one by one: a larger change
// (a catalog loaded or re-priced as a whole) raises one catalog.updated instead, telling the
// partner to read the catalog anew rather than flooding its receiver.
const MaxProductEvents = 1000

// ProductData is the data of product.updated and product.removed: the product as
// GET /catalog/products/{productCode} showed it before the change (null for a new product) and
// shows it after (null for a removed one).
type ProductData struct {
	ProductCode string          `json:"productCode"`
	Previous    json.RawMessage `json:"previous"`
	Current     json.RawMessage `json:"current"`
}

// CatalogData is the data of catalog.updated: how many products one change added, updated and
// removed.
type CatalogData struct {
	Added   int `json:"added"`
	Updated int `json:"updated"`
	Removed int `json:"removed"`
}

// CatalogChanged raises the product events of a catalog change, in the transaction q that wrote
// it, for every account of a live partner bound to the catalog whose endpoint asked for them.
// Rows rewritten only to keep the list order change nothing a partner sees and raise nothing.
func (n *Notifier) CatalogChanged(
	ctx context.Context, q store.Querier, change store.CatalogChange, now time.Time,
) error {
	changed := len(change.Added) + len(change.Updated) + len(change.Removed)
	if changed == 0 {
		return nil
	}
	subscribers, err := store.ProductSubscribers(ctx, q, change.ID, ProductEventTypes)
	if err != nil || len(subscribers) == 0 {
		return err
	}
	var events []productEvent
	if changed <= MaxProductEvents {
		if events, err = productEvents(change, now.UTC().Format(time.DateOnly)); err != nil {
			return err
		}
	}
	for _, s := range subscribers {
		if changed > MaxProductEvents {
			if slices.Contains(s.EventTypes, EventCatalogUpdated) {
				data := CatalogData{Added: len(change.Added), Updated: len(change.Updated), Removed: len(change.Removed)}
				if err := n.record(ctx, q, s.AccountID, s.Environment, EventCatalogUpdated, data); err != nil {
					return err
				}
			}
			continue
		}
		for _, e := range events {
			if !slices.Contains(s.EventTypes, e.eventType) {
				continue
			}
			if err := n.record(ctx, q, s.AccountID, s.Environment, e.eventType, e.data); err != nil {
				return err
			}
		}
	}
	return nil
}

type productEvent struct {
	eventType string
	data      ProductData
}

// productEvents renders each changed product once, as the product read shows it on day today.
func productEvents(change store.CatalogChange, today string) ([]productEvent, error) {
	render := func(row *store.CatalogProduct) (json.RawMessage, error) {
		if row == nil {
			return json.RawMessage("null"), nil
		}
		return catalog.DetailJSON(*row, today)
	}
	event := func(eventType, code string, previous, current *store.CatalogProduct) (productEvent, error) {
		before, err := render(previous)
		if err != nil {
			return productEvent{}, err
		}
		after, err := render(current)
		if err != nil {
			return productEvent{}, err
		}
		return productEvent{eventType, ProductData{ProductCode: code, Previous: before, Current: after}}, nil
	}
	events := make([]productEvent, 0, len(change.Added)+len(change.Updated)+len(change.Removed))
	add := func(e productEvent, err error) error {
		events = append(events, e)
		return err
	}
	for i := range change.Added {
		if err := add(event(EventProductUpdated, change.Added[i].ProductCode, nil, &change.Added[i])); err != nil {
			return nil, err
		}
	}
	for i := range change.Updated {
		u := &change.Updated[i]
		if err := add(event(EventProductUpdated, u.New.ProductCode, &u.Old, &u.New)); err != nil {
			return nil, err
		}
	}
	for i := range change.Removed {
		if err := add(event(EventProductRemoved, change.Removed[i].ProductCode, &change.Removed[i], nil)); err != nil {
			return nil, err
		}
	}
	return events, nil
}
