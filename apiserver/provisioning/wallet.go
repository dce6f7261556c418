package provisioning

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/jackc/pgx/v5"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/apiserver/money"
	"github.com/codeport/codeport/apiserver/store"
	"github.com/codeport/codeport/apiserver/wallet"
)

// WalletResult is the state of a wallet after applying its resource.
type WalletResult struct {
	// Balances are decimal strings in major units per currency.
	Balances   map[string]string
	LowBalance bool
	// Applied counts the spec's top-ups that are in the ledger (now or before).
	Applied int
	// NewlyApplied lists the ids of top-ups applied by this call.
	NewlyApplied []string
	// Invalid maps top-up ids to why they cannot be applied.
	Invalid map[string]string
	// Removed lists top-ups in the ledger that the spec no longer has; they stay applied.
	Removed []string
}

// ApplyWallet sets the account's low-balance threshold and applies each top-up exactly once by
// id. It reads first and writes only what differs, so a Wallet whose spec is already applied
// (a resync, a status refresh after orders) takes no lock and writes nothing. Each top-up is its
// own transaction and idempotent, so concurrent or repeated calls (several operator replicas,
// restarts) never credit twice.
func (p *Provisioner) ApplyWallet(ctx context.Context, w *v1alpha1.Wallet) (WalletResult, error) {
	acct, err := p.account(ctx, w.Namespace, w.Spec.PartnerRef.Name, string(w.Spec.Environment))
	if err != nil {
		return WalletResult{}, err
	}
	threshold := w.Spec.LowBalanceThreshold
	if threshold == "" {
		threshold = "0"
	}
	wanted, err := money.ParseScaled(threshold, thresholdDigits)
	if err != nil {
		return WalletResult{}, fmt.Errorf("lowBalanceThreshold %q: %w", threshold, err)
	}
	if current, err := money.ParseScaled(acct.LowBalanceThreshold, thresholdDigits); err != nil || current != wanted {
		if err := p.setThreshold(ctx, acct.ID, threshold); err != nil {
			return WalletResult{}, err
		}
	}
	refs, err := store.TopUpReferences(ctx, p.db.Pool, acct.ID)
	if err != nil {
		return WalletResult{}, err
	}
	applied := make(map[string]bool, len(refs))
	for _, ref := range refs {
		applied[ref] = true
	}
	inSpec := make(map[string]bool, len(w.Spec.TopUps))
	res := WalletResult{Invalid: map[string]string{}}
	for _, t := range w.Spec.TopUps {
		inSpec[t.ID] = true
		if applied[t.ID] {
			res.Applied++
			continue
		}
		amount, err := money.Parse(t.Amount, t.Currency)
		if err == nil && amount <= 0 {
			err = errors.New("amount must be positive")
		}
		if err != nil {
			res.Invalid[t.ID] = err.Error()
			continue
		}
		var change store.LedgerResult
		err = p.db.InTx(ctx, func(tx pgx.Tx) error {
			var err error
			change, err = wallet.Credit(ctx, tx, acct.ID, t.Currency, store.EntryTopUp, amount, t.ID, t.Note)
			return err
		})
		if err != nil {
			return WalletResult{}, fmt.Errorf("top-up %s: %w", t.ID, err)
		}
		res.Applied++
		if change.Applied {
			res.NewlyApplied = append(res.NewlyApplied, t.ID)
		}
	}
	for _, ref := range refs {
		if !inSpec[ref] {
			res.Removed = append(res.Removed, ref)
		}
	}
	// The account row read above may predate the threshold just set: pass the new one.
	state, err := p.walletState(ctx, acct.ID, threshold)
	if err != nil {
		return WalletResult{}, err
	}
	res.Balances, res.LowBalance = state.Balances, state.LowBalance
	return res, nil
}

// thresholdDigits is the scale of accounts.low_balance_threshold.
const thresholdDigits = 6

// setThreshold writes a changed threshold and re-evaluates the low flags of the wallet's
// balances; a currency topped up later is judged when its first entry is applied.
func (p *Provisioner) setThreshold(ctx context.Context, accountID uuid.UUID, threshold string) error {
	return p.db.InTx(ctx, func(tx pgx.Tx) error {
		_, err := store.SetLowBalanceThreshold(ctx, tx, accountID, threshold)
		return err
	})
}

// WalletState is a wallet's balances as decimal strings, for resource status.
type WalletState struct {
	Balances   map[string]string
	LowBalance bool
}

// WalletState reads the current balances of a partner environment's wallet.
func (p *Provisioner) WalletState(ctx context.Context, namespace, partner, environment string) (WalletState, error) {
	acct, err := p.account(ctx, namespace, partner, environment)
	if err != nil {
		return WalletState{}, err
	}
	return p.walletState(ctx, acct.ID, acct.LowBalanceThreshold)
}

func (p *Provisioner) walletState(ctx context.Context, accountID uuid.UUID, threshold string) (WalletState, error) {
	v, err := wallet.Read(ctx, p.db.Pool, accountID, threshold)
	if err != nil {
		return WalletState{}, err
	}
	out := WalletState{Balances: make(map[string]string, len(v.Balances)), LowBalance: v.LowBalance}
	for cur, n := range v.Balances {
		out.Balances[cur] = n.String()
	}
	return out, nil
}

// WalletOwner is the Wallet resource (uid and name) that manages an account's wallet.
type WalletOwner = store.WalletOwner

// ClaimWallet makes w the manager of the wallet of the partner's environment unless another
// Wallet is, and returns the manager: one account, one Wallet.
func (p *Provisioner) ClaimWallet(
	ctx context.Context, namespace, partner, environment string, w WalletOwner,
) (WalletOwner, error) {
	acct, err := p.account(ctx, namespace, partner, environment)
	if err != nil {
		return WalletOwner{}, err
	}
	return store.ClaimWallet(ctx, p.db.Pool, acct.ID, w)
}

// ReplaceWalletOwner hands the wallet of the partner's environment from a Wallet that no longer
// exists to w, unless another Wallet took it over first; it returns the manager.
func (p *Provisioner) ReplaceWalletOwner(
	ctx context.Context, namespace, partner, environment string, from, w WalletOwner,
) (WalletOwner, error) {
	acct, err := p.account(ctx, namespace, partner, environment)
	if err != nil {
		return WalletOwner{}, err
	}
	return store.ReplaceWalletOwner(ctx, p.db.Pool, acct.ID, from, w)
}
