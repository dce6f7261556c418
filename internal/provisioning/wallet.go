package provisioning

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/money"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/wallet"
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
	return p.ApplyWalletWith(ctx, w, WalletOptions{SpecTopUps: true})
}

// WalletOptions change how a Wallet is applied.
type WalletOptions struct {
	// SpecTopUps applies new entries of spec.topUps. Off, only WalletTopUps move money: whoever
	// may edit a Wallet's settings can no longer credit it, and new entries of the list are
	// reported Invalid; entries applied before stay applied and counted.
	SpecTopUps bool
}

// ApplyWalletWith is ApplyWallet with options.
func (p *Provisioner) ApplyWalletWith(ctx context.Context, w *v1alpha1.Wallet, opts WalletOptions) (
	WalletResult, error,
) {
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
	res, err := p.applySpecTopUps(ctx, acct.ID, w, opts)
	if err != nil {
		return WalletResult{}, err
	}
	// The account row read above may predate the threshold just set: pass the new one.
	state, err := p.walletState(ctx, acct.ID, threshold)
	if err != nil {
		return WalletResult{}, err
	}
	res.Balances, res.LowBalance = state.Balances, state.LowBalance
	return res, nil
}

// applySpecTopUps credits the top-ups of the Wallet's list that are not in the ledger yet, each
// in a transaction of its own, and reports what the list and the ledger say.
func (p *Provisioner) applySpecTopUps(
	ctx context.Context, accountID uuid.UUID, w *v1alpha1.Wallet, opts WalletOptions,
) (WalletResult, error) {
	entries, err := store.TopUps(ctx, p.db.Pool, accountID)
	if err != nil {
		return WalletResult{}, err
	}
	// Entries recorded by WalletTopUps are theirs: an id of this list among them is refused,
	// not taken for applied, and they are never reported as removed from this list.
	applied := make(map[string]string, len(entries))
	for _, e := range entries {
		applied[e.Reference] = e.Source
	}
	inSpec := make(map[string]bool, len(w.Spec.TopUps))
	res := WalletResult{Invalid: map[string]string{}}
	for _, t := range w.Spec.TopUps {
		inSpec[t.ID] = true
		source, done := applied[t.ID]
		switch {
		case done && source != "":
			res.Invalid[t.ID] = "id already applied by " + source
			continue
		case done:
			res.Applied++
			continue
		case !opts.SpecTopUps:
			res.Invalid[t.ID] = "top-ups in Wallet.spec.topUps are turned off on this operator: create a WalletTopUp"
			continue
		}
		currency := string(t.Currency)
		amount, err := money.TopUpAmount(t.Amount, currency, p.maxTopUp)
		if err != nil {
			res.Invalid[t.ID] = err.Error()
			continue
		}
		var change store.LedgerResult
		err = p.db.InTx(ctx, func(tx store.Tx) error {
			var err error
			change, err = wallet.Credit(ctx, tx, accountID, currency, store.EntryTopUp, amount, t.ID, t.Note)
			return err
		})
		if errors.Is(err, ErrBalanceOverflow) {
			res.Invalid[t.ID] = fmt.Sprintf("crediting %s %s: %v", t.Amount, currency, err)
			continue
		}
		if err != nil {
			return WalletResult{}, fmt.Errorf("top-up %s: %w", t.ID, err)
		}
		res.Applied++
		if change.Applied {
			res.NewlyApplied = append(res.NewlyApplied, t.ID)
		}
	}
	for _, e := range entries {
		if e.Source == "" && !inSpec[e.Reference] {
			res.Removed = append(res.Removed, e.Reference)
		}
	}
	return res, nil
}

// WithMaxTopUp sets the largest top-up credited, in major units of its currency (at least 1).
func (p *Provisioner) WithMaxTopUp(major int64) *Provisioner {
	p.maxTopUp = major
	return p
}

// ErrBalanceOverflow means a credit would take its balance past the most the ledger can hold. It is a
// rule of money, not a failure of the database: retrying the same credit fails the same way.
var ErrBalanceOverflow = store.ErrBalanceOverflow

// thresholdDigits is the scale of accounts.low_balance_threshold.
const thresholdDigits = 6

// setThreshold writes a changed threshold and re-evaluates the low flags of the wallet's
// balances; a currency topped up later is judged when its first entry is applied.
func (p *Provisioner) setThreshold(ctx context.Context, accountID uuid.UUID, threshold string) error {
	return p.db.InTx(ctx, func(tx store.Tx) error {
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

// HeldWalletState reads the wallet of a partner environment for the Wallet w, when w manages it,
// whether or not the partner is still provisioned: a deleted partner's ledger is kept, its last
// orders may not have been shown yet and those in flight still settle, and its Wallet should show
// what the ledger holds. held is false when the account does not exist (the partner was never
// provisioned) or another Wallet manages it. It only reads.
func (p *Provisioner) HeldWalletState(ctx context.Context, namespace, partner, environment string, w WalletOwner) (
	state WalletState, held bool, err error,
) {
	acct, err := store.RetainedAccountOf(ctx, p.db.Pool, namespace, partner, environment)
	if errors.Is(err, store.ErrNotFound) {
		return WalletState{}, false, nil
	}
	if err != nil {
		return WalletState{}, false, err
	}
	owner, found, err := store.WalletOwnerOf(ctx, p.db.Pool, acct.ID)
	if err != nil || !found || owner.UID != w.UID {
		return WalletState{}, false, err
	}
	state, err = p.walletState(ctx, acct.ID, acct.LowBalanceThreshold)
	return state, err == nil, err
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

// TopUpSource names a WalletTopUp in the ledger's record of who applied an entry. The name, not
// the uid: a top-up deleted and created again from the same manifest is the same top-up, and
// must find its credit applied rather than credit again.
func TopUpSource(name string) string { return "WalletTopUp/" + name }

// TopUp is a WalletTopUp to apply to the wallet of a partner environment.
type TopUp struct {
	Namespace, Partner, Environment string
	ID, Currency, Amount, Note      string
	// Source names the WalletTopUp (TopUpSource): an id already in the ledger counts as this
	// top-up's only when the same source recorded it.
	Source string
}

// TopUpOf is the top-up a WalletTopUp asks for on the wallet of w's partner environment.
func TopUpOf(t *v1alpha1.WalletTopUp, w *v1alpha1.Wallet) TopUp {
	return TopUp{
		Namespace: t.Namespace, Partner: w.Spec.PartnerRef.Name, Environment: string(w.Spec.Environment),
		ID: t.Spec.ID, Currency: string(t.Spec.Currency), Amount: t.Spec.Amount, Note: t.Spec.Note,
		Source: TopUpSource(t.Name),
	}
}

// TopUpRecorded says whether the ledger holds top-up t (by its id in the partner's account).
func (p *Provisioner) TopUpRecorded(ctx context.Context, t TopUp) (bool, error) {
	acct, err := p.account(ctx, t.Namespace, t.Partner, t.Environment)
	if err != nil {
		return false, err
	}
	_, found, err := store.TopUpByReference(ctx, p.db.Pool, acct.ID, t.ID)
	if err != nil {
		return false, fmt.Errorf("top-up %s: %w", t.ID, err)
	}
	return found, nil
}

// TopUpResult is what applying a top-up found or did.
type TopUpResult struct {
	// Applied: the credit is in the ledger, recorded by this top-up; AppliedAt is when.
	Applied   bool
	AppliedAt time.Time
	// Newly: this call wrote it.
	Newly bool
	// Conflict, when set, says why the top-up cannot be applied: its id is in the ledger for
	// another top-up, or with another amount or currency.
	Conflict string
}

// InvalidTopUpError says that a top-up can never be applied as written: it breaks money.TopUpAmount's
// rule (a currency that is not an active ISO 4217 code, an amount with more decimals than its
// currency has, an amount above the largest top-up).
type InvalidTopUpError struct{ Err error }

// Error implements error.
func (e *InvalidTopUpError) Error() string { return e.Err.Error() }

// Unwrap returns the error underneath, for errors.Is and errors.As.
func (e *InvalidTopUpError) Unwrap() error { return e.Err }

// errTopUpRaced aborts a credit that found the entry written meanwhile by someone else.
var errTopUpRaced = errors.New("top-up applied concurrently")

// ApplyTopUp credits a WalletTopUp exactly once, by id, as the wallet's ledger entry plus the
// record of its source, in one transaction. It reads first: a top-up already applied (every
// reconcile after the first) takes no lock and writes nothing, and stays applied whatever the
// rules for new credits have become since. A credit that breaks money.TopUpAmount's rule is an
// *InvalidTopUpError; one that would overflow its balance is ErrBalanceOverflow.
func (p *Provisioner) ApplyTopUp(ctx context.Context, t TopUp) (TopUpResult, error) {
	acct, err := p.account(ctx, t.Namespace, t.Partner, t.Environment)
	if err != nil {
		return TopUpResult{}, err
	}
	e, found, err := store.TopUpByReference(ctx, p.db.Pool, acct.ID, t.ID)
	if err != nil {
		return TopUpResult{}, err
	}
	if found {
		return judgeTopUp(t, e), nil
	}
	amount, err := money.TopUpAmount(t.Amount, t.Currency, p.maxTopUp)
	if err != nil {
		return TopUpResult{}, &InvalidTopUpError{Err: err}
	}
	err = p.db.InTx(ctx, func(tx store.Tx) error {
		change, err := wallet.Credit(ctx, tx, acct.ID, t.Currency, store.EntryTopUp, amount, t.ID, t.Note)
		if err != nil {
			return err
		}
		if !change.Applied {
			return errTopUpRaced
		}
		return store.RecordTopUpSource(ctx, tx, acct.ID, t.ID, t.Source)
	})
	newly := err == nil
	if err != nil && !errors.Is(err, errTopUpRaced) {
		return TopUpResult{}, fmt.Errorf("top-up %s of %s %s: %w", t.ID, t.Amount, t.Currency, err)
	}
	e, found, err = store.TopUpByReference(ctx, p.db.Pool, acct.ID, t.ID)
	if err != nil {
		return TopUpResult{}, err
	}
	if !found {
		return TopUpResult{}, fmt.Errorf("top-up %s: entry missing after its credit", t.ID)
	}
	res := judgeTopUp(t, e)
	res.Newly = newly && res.Applied
	return res, nil
}

// judgeTopUp decides whether the ledger's entry of a top-up's id is that top-up's.
func judgeTopUp(t TopUp, e store.TopUpEntry) TopUpResult {
	amount, err := money.Parse(t.Amount, t.Currency)
	switch {
	case e.Source == "":
		return TopUpResult{Conflict: fmt.Sprintf("id %s is already in the ledger, applied by the Wallet's spec.topUps; "+
			"this top-up is not applied", t.ID)}
	case e.Source != t.Source:
		return TopUpResult{Conflict: fmt.Sprintf("id %s is already in the ledger, applied by %s; "+
			"this top-up is not applied", t.ID, e.Source)}
	case err != nil || e.Currency != t.Currency || e.Amount != amount:
		was, err := money.Format(e.Amount, e.Currency)
		if err != nil {
			was = fmt.Sprintf("%d minor units of", e.Amount)
		}
		return TopUpResult{Conflict: fmt.Sprintf("id %s was applied as %s %s by an earlier %s of the same name; "+
			"this one asks %s %s and is not applied", t.ID, was, e.Currency, t.Source, t.Amount, t.Currency)}
	}
	return TopUpResult{Applied: true, AppliedAt: e.CreatedAt}
}
