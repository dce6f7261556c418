package wallet

import (
	"context"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/store"
)

// Service reads accounts' wallets and statements for the API, as orders.Service places and
// reads orders: the handlers hold services, and the database stays behind them.
type Service struct {
	db *store.DB
}

// NewService reads wallets from db.
func NewService(db *store.DB) *Service { return &Service{db: db} }

// Read is the package's Read on the service's database.
func (s *Service) Read(ctx context.Context, accountID uuid.UUID, threshold string) (View, error) {
	return Read(ctx, s.db.Pool, accountID, threshold)
}
