package provisioning

import (
	"context"
	"errors"

	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/tenancy"
)

// IsNotFound reports whether err says that what was looked up is not in the database.
func IsNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }

// IsDatabaseError reports whether err came from the database: an error the server returned, or a
// failed connection to it.
func IsDatabaseError(err error) bool { return store.IsDatabaseError(err) }

// LedgerHead is the id of the newest ledger entry, 0 for an empty ledger. The operator follows
// the ledger from there to refresh the Wallets whose balances moved.
func (p *Provisioner) LedgerHead(ctx context.Context) (int64, error) {
	return store.LedgerHead(ctx, p.db.Pool)
}

// LedgerAccountsAfter returns the accounts with ledger entries above id after, each with its
// newest such entry's id.
func (p *Provisioner) LedgerAccountsAfter(ctx context.Context, after int64) (map[string]int64, error) {
	return store.LedgerAccountsAfter(ctx, p.db.Pool, after)
}

// AccountOwner is who owns the account; an unknown account is an IsNotFound error.
func (p *Provisioner) AccountOwner(ctx context.Context, account string) (tenancy.Owner, error) {
	return store.AccountOwner(ctx, p.db.Pool, account)
}
