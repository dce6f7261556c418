package orders

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/wallet"
)

// Get runs GET /orders/{reference}: the account's order by orderId or externalOrderCode. The
// reference is trimmed as Decode trims the externalOrderCode it stores, so the code a partner
// placed an order with finds that order; as there, its length is the one sent, so a reference
// longer than any externalOrderCode names no order, whitespace or not.
func (s *Service) Get(ctx context.Context, acct *auth.Account, reference string) (View, error) {
	if utf8.RuneCountInString(reference) > MaxExternalOrderCodeLength {
		return View{}, &NotFoundError{Reference: reference}
	}
	o, err := store.FindOrder(ctx, s.db.Pool, acct.ID, strings.TrimSpace(reference))
	if errors.Is(err, store.ErrNotFound) {
		return View{}, &NotFoundError{Reference: reference}
	}
	if err != nil {
		return View{}, fmt.Errorf("get order %s: %w", reference, err)
	}
	v, err := s.view(ctx, acct, &o)
	if err != nil {
		return View{}, fmt.Errorf("render order %s: %w", reference, err)
	}
	return v, nil
}

func (s *Service) view(ctx context.Context, acct *auth.Account, o *store.Order) (View, error) {
	var byLine map[int][]string
	if o.Status == store.OrderCompleted || o.Status == store.OrderPartiallyCompleted {
		delivered, err := store.DeliveredCodesOf(ctx, s.db.Pool, o.ID)
		if err != nil {
			return View{}, err
		}
		byLine = make(map[int][]string, len(o.Lines))
		for _, d := range delivered {
			code, err := s.cipher.Open(d.KeyRef, d.Ciphertext, d.Digest)
			if err != nil {
				return View{}, fmt.Errorf("order %s line %d unit %d: %w", o.ID, d.LineNo, d.UnitNo, err)
			}
			byLine[d.LineNo] = append(byLine[d.LineNo], code)
		}
	}
	w, err := s.walletSnapshot(ctx, acct)
	if err != nil {
		return View{}, err
	}
	return render(o, byLine, w), nil
}

func (s *Service) walletSnapshot(ctx context.Context, acct *auth.Account) (wallet.Snapshot, error) {
	v, err := wallet.Read(ctx, s.db.Pool, acct.ID, acct.LowBalanceThreshold)
	if err != nil {
		return wallet.Snapshot{Balances: map[string]json.Number{}}, err
	}
	return v.Snapshot, nil
}
