package controllers

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/recovery"
	"github.com/codeport/codeport/internal/tenancy"
)

// walletRefreshInterval is how often the ledger is read for new entries: entries of one interval
// are coalesced into one refresh per Wallet.
const walletRefreshInterval = time.Second

// walletRefreshMaxWait is how long a Wallet whose account keeps taking entries waits between
// refreshes. A Wallet is refreshed on its account's first entry and as soon as an interval
// passes without new ones, so its status shows the balance within about an interval of the
// last order; in between, while orders keep landing, its status is rewritten at most this often.
// Each status write costs the Kubernetes API server a write to etcd and an event to every
// watcher, so this bounds the control plane's cost by the number of busy Wallets, not by the
// orders they take.
const walletRefreshMaxWait = 5 * time.Second

// ledgerCommitLag is how many intervals back each read starts. Entry ids are taken at insert and
// transactions commit out of order, so an entry can become visible after a higher id was read;
// reading again from the head of ledgerCommitLag intervals ago sees every entry committed within
// that time of its insert. Placements commit within milliseconds of their insert.
const ledgerCommitLag = 2

// ledgerFollower turns new ledger entries into reconciles of the Wallets of their accounts, so
// balances in status follow orders within seconds. It reads wallet_entries by id rather than
// listening for a NOTIFY per entry: a notifying commit takes a database-wide lock, which would
// serialise the commits of every placement.
type ledgerFollower struct {
	prov   *provisioning.Provisioner
	client client.Client
	events chan<- event.GenericEvent
	now    func() time.Time
	// namespaces, when set, are the only ones watched (namespaced mode): accounts of partners
	// elsewhere are another operator's, and the cache could not list their Wallets anyway.
	namespaces map[string]bool

	// heads are the ledger heads read by the last reads, oldest first; the next read starts
	// after heads[0].
	heads []int64
	// owners caches who owns an account: an account never changes owner.
	owners map[string]tenancy.Owner
	// due are the accounts with entries not yet reflected by a refresh; sent is when each
	// account's Wallets were last refreshed, for those refreshed within walletRefreshMaxWait.
	due  map[string]bool
	sent map[string]time.Time
}

func newLedgerFollower(
	prov *provisioning.Provisioner, c client.Client, events chan<- event.GenericEvent,
) *ledgerFollower {
	return &ledgerFollower{
		prov:   prov,
		client: c,
		events: events,
		now:    time.Now,
		owners: map[string]tenancy.Owner{},
		due:    map[string]bool{},
		sent:   map[string]time.Time{},
	}
}

// watchOnly limits the follower to the Wallets of namespaces (none: every namespace).
func (l *ledgerFollower) watchOnly(namespaces []string) *ledgerFollower {
	if len(namespaces) > 0 {
		l.namespaces = make(map[string]bool, len(namespaces))
		for _, ns := range namespaces {
			l.namespaces[ns] = true
		}
	}
	return l
}

// NeedLeaderElection: only the leader reconciles, so only the leader needs the events.
func (l *ledgerFollower) NeedLeaderElection() bool { return true }

// Start refreshes every Wallet once (entries before it are not known to be reflected), then the
// Wallets of the accounts with new entries at every interval.
func (l *ledgerFollower) Start(ctx context.Context) error {
	tick := time.NewTicker(walletRefreshInterval)
	defer tick.Stop()
	for {
		// A panic in one refresh is that refresh's failure: the manager's goroutine runs this
		// loop unrecovered, and its end would be the whole operator's.
		var err error
		if p := recovery.Do(ctx, nil, "ledger refresh", func() { err = l.read(ctx) }); p != nil {
			err = p
		}
		if err != nil {
			slog.WarnContext(ctx, "ledger refresh", slog.Any("err", err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// read notes the accounts with entries after the oldest remembered head and refreshes the
// Wallets of those that are due: an account that took no entry since the last read (its orders
// stopped, or an entry committed late), one not refreshed for walletRefreshMaxWait, and one
// taking its first entries.
func (l *ledgerFollower) read(ctx context.Context) error {
	if len(l.heads) == 0 {
		head, err := l.prov.LedgerHead(ctx)
		if err != nil {
			return err
		}
		var list v1alpha1.WalletList
		if err := l.client.List(ctx, &list); err != nil {
			return fmt.Errorf("list wallets: %w", err)
		}
		l.send(ctx, list.Items, func(*v1alpha1.Wallet) bool { return true })
		l.heads = []int64{head}
		return nil
	}
	accounts, err := l.prov.LedgerAccountsAfter(ctx, l.heads[0])
	if err != nil {
		return err
	}
	previous := l.heads[len(l.heads)-1]
	head := previous
	for account, last := range accounts {
		l.due[account] = true
		head = max(head, last)
	}
	l.heads = append(l.heads, head)
	if len(l.heads) > ledgerCommitLag {
		l.heads = l.heads[len(l.heads)-ledgerCommitLag:]
	}
	now := l.now()
	var refresh []string
	for account := range l.due {
		busy := accounts[account] > previous
		if sent, ok := l.sent[account]; busy && ok && now.Sub(sent) < walletRefreshMaxWait {
			continue
		}
		refresh = append(refresh, account)
		delete(l.due, account)
		l.sent[account] = now
	}
	// A refresh older than walletRefreshMaxWait holds nothing back: forget it, so that sent
	// holds only the recently busy accounts.
	for account, sent := range l.sent {
		if now.Sub(sent) >= walletRefreshMaxWait {
			delete(l.sent, account)
		}
	}
	l.refresh(ctx, refresh)
	return nil
}

// refresh enqueues the Wallets of accounts, once each.
func (l *ledgerFollower) refresh(ctx context.Context, accounts []string) {
	for _, account := range accounts {
		owner, err := l.owner(ctx, account)
		if err != nil {
			if !provisioning.IsNotFound(err) {
				slog.WarnContext(ctx, "ledger refresh: account owner", slog.Any("err", err))
			}
			continue
		}
		if l.namespaces != nil && !l.namespaces[owner.Namespace] {
			continue
		}
		var list v1alpha1.WalletList
		err = l.client.List(ctx, &list, client.InNamespace(owner.Namespace),
			client.MatchingFields{walletPartnerIndex: owner.Partner})
		if err != nil {
			slog.WarnContext(ctx, "ledger refresh: list wallets", slog.Any("err", err))
			continue
		}
		l.send(ctx, list.Items, func(w *v1alpha1.Wallet) bool {
			return tenancy.Environment(w.Spec.Environment) == owner.Environment
		})
	}
}

func (l *ledgerFollower) send(ctx context.Context, wallets []v1alpha1.Wallet, match func(*v1alpha1.Wallet) bool) {
	for i := range wallets {
		if !match(&wallets[i]) {
			continue
		}
		select {
		case l.events <- event.GenericEvent{Object: &wallets[i]}:
		case <-ctx.Done():
			return
		}
	}
}

func (l *ledgerFollower) owner(ctx context.Context, account string) (tenancy.Owner, error) {
	if owner, ok := l.owners[account]; ok {
		return owner, nil
	}
	owner, err := l.prov.AccountOwner(ctx, account)
	if err != nil {
		return tenancy.Owner{}, err
	}
	l.owners[account] = owner
	return owner, nil
}
