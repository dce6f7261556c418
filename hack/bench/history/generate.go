package history

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/fulfilment"
	"github.com/codeport/codeport/internal/orders"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/tenancy"
)

// Config says how much history to write and where in time.
type Config struct {
	// Orders is the number of orders to add.
	Orders int
	// Until is the newest order's time; the orders spread evenly over Span before it.
	Until time.Time
	Span  time.Duration
	// Prefix starts every external order code, top-up reference and code of this run, so that
	// runs on one database never collide.
	Prefix string
	// Workers write at once, each with accounts of its own; Batch orders go in each COPY.
	Workers, Batch int
	// Seed makes the run repeatable (but for ids, nonces and the keys' randomness).
	Seed uint64
	// Cipher seals the delivered codes, as `codes import` seals stock: the database's keyring.
	Cipher *codes.Cipher
	// Processing orders are left in flight at the end of the history, each with its
	// fulfilment job, as a placement leaves them.
	Processing int
}

// Result counts what a run wrote.
type Result struct {
	Orders, Lines, Entries, Codes int64
	Elapsed                       time.Duration
}

func (r *Result) add(o Result) {
	r.Orders, r.Lines, r.Entries, r.Codes = r.Orders+o.Orders, r.Lines+o.Lines, r.Entries+o.Entries, r.Codes+o.Codes
}

// wallet is one balance of a production account with its products of that currency: the
// orders of the history are placed against it.
type wallet struct {
	account  uuid.UUID
	currency string
	products []product
	// balance runs along the worker's writes; weight is the wallet's share of the orders.
	balance int64
	weight  float64
	topUps  int
}

type product struct {
	code  string
	price int64
}

// Status mix of finished orders: what fulfilment leaves behind on a well-stocked platform.
const (
	partialPerMille = 10
	failedPerMille  = 20
	// topUp is what a partner adds when its balance runs short: a round sum, in minor units.
	topUp = 10_000_000_00
)

// Generate writes cfg.Orders orders with their lines, ledger entries and delivered codes into
// the production accounts that have a balance and a catalog, in batches of COPY, one
// transaction per batch that also moves the balances: every balance equals its ledger after
// each commit. Wallets get orders by a Zipf-like share (the first wallet the most), so one
// partner's history is deep.
func Generate(ctx context.Context, pool *pgxpool.Pool, cfg Config) (Result, error) {
	started := time.Now()
	if cfg.Cipher == nil || cfg.Orders < 0 || cfg.Workers < 1 || cfg.Batch < 1 || cfg.Span <= 0 {
		return Result{}, errors.New("history: a cipher, orders >= 0, workers and batch >= 1, a span are needed")
	}
	wallets, err := readWallets(ctx, pool)
	if err != nil {
		return Result{}, err
	}
	if len(wallets) == 0 {
		return Result{}, errors.New("history: no production account has a balance and products in its currency")
	}
	var total float64
	for i, w := range wallets {
		w.weight = 1 / float64(i+1)
		total += w.weight
	}
	shares := make([][]*wallet, cfg.Workers)
	for i, w := range wallets {
		shares[i%cfg.Workers] = append(shares[i%cfg.Workers], w)
	}
	var (
		mu     sync.Mutex
		result Result
		errs   []error
		wg     sync.WaitGroup
		left   = cfg.Orders
	)
	for n, share := range shares {
		var weight float64
		for _, w := range share {
			weight += w.weight
		}
		count := int(math.Round(float64(cfg.Orders) * weight / total))
		if n == len(shares)-1 {
			count = left
		}
		count = min(count, left)
		left -= count
		processing := 0
		if n == 0 {
			processing = min(cfg.Processing, count)
		}
		g := &worker{cfg: cfg, pool: pool, wallets: share, n: n, orders: count, processing: processing,
			rnd: mrand.New(mrand.NewPCG(cfg.Seed, uint64(n)))}
		wg.Go(func() {
			res, err := g.run(ctx)
			mu.Lock()
			defer mu.Unlock()
			result.add(res)
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	result.Elapsed = time.Since(started)
	return result, errors.Join(errs...)
}

// readWallets reads the production balances whose accounts' catalogs sell fixed-price products
// in their currency, in a stable order, with their balances as they stand.
func readWallets(ctx context.Context, pool *pgxpool.Pool) ([]*wallet, error) {
	rows, err := pool.Query(ctx, `
		SELECT b.account_id, b.currency, b.balance, cp.product_code, cp.buying_price
		FROM wallet_balances b
		JOIN accounts a ON a.id = b.account_id AND a.environment = $1
		JOIN partners p ON p.id = a.partner_id
		JOIN catalog_products cp ON cp.catalog_id = p.catalog_id AND cp.currency_code = b.currency
			AND cp.denomination_type = 'fixed' AND cp.status = 'active' AND cp.buying_price > 0
		ORDER BY p.namespace, p.name, b.currency, cp.product_code`, string(tenancy.Production))
	if err != nil {
		return nil, fmt.Errorf("history: read wallets: %w", err)
	}
	var out []*wallet
	var account uuid.UUID
	var currency, code string
	var balance, price int64
	_, err = pgx.ForEachRow(rows, []any{&account, &currency, &balance, &code, &price}, func() error {
		if len(out) == 0 || out[len(out)-1].account != account || out[len(out)-1].currency != currency {
			out = append(out, &wallet{account: account, currency: currency, balance: balance})
		}
		w := out[len(out)-1]
		w.products = append(w.products, product{code: code, price: price})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("history: read wallets: %w", err)
	}
	return out, nil
}

// worker writes the orders of its wallets in time order.
type worker struct {
	cfg                   Config
	pool                  *pgxpool.Pool
	wallets               []*wallet
	n, orders, processing int
	rnd                   *mrand.Rand
	cumulative            []float64
}

// batch is the rows of one COPY transaction.
type batch struct {
	orders, lines, entries, delivered, jobs [][]any
	// stockIDs counts the codes delivered, whose stock ids write draws.
	stockIDs int
	balances map[*wallet]bool
}

func (g *worker) run(ctx context.Context) (Result, error) {
	var res Result
	var sum float64
	for _, w := range g.wallets {
		sum += w.weight
		g.cumulative = append(g.cumulative, sum)
	}
	start := g.cfg.Until.Add(-g.cfg.Span)
	for done := 0; done < g.orders; {
		n := min(g.cfg.Batch, g.orders-done)
		b := &batch{balances: map[*wallet]bool{}}
		for i := done; i < done+n; i++ {
			at := start.Add(time.Duration(float64(g.cfg.Span) * float64(i) / float64(max(g.orders, 1))))
			inFlight := i >= g.orders-g.processing
			if inFlight {
				// Orders still in flight were placed in the last moments before Until.
				at = g.cfg.Until.Add(-time.Duration(g.orders-i) * 10 * time.Millisecond)
			}
			if err := g.order(b, i, at, inFlight); err != nil {
				return res, err
			}
		}
		written, err := g.write(ctx, b)
		if err != nil {
			return res, err
		}
		res.add(written)
		done += n
	}
	return res, nil
}

// pick chooses a wallet by weight.
func (g *worker) pick() *wallet {
	x := g.rnd.Float64() * g.cumulative[len(g.cumulative)-1]
	i, _ := slices.BinarySearch(g.cumulative, x)
	return g.wallets[min(i, len(g.wallets)-1)]
}

// order adds the i-th order of the worker, placed at at, to b: the order as placement records
// it (the payload hash of its request, its debit) and, unless it is still in flight, as
// fulfilment leaves it (its codes from the stock, its status, its refund).
func (g *worker) order(b *batch, i int, at time.Time, inFlight bool) error {
	w := g.pick()
	req := orders.Request{ExternalOrderCode: fmt.Sprintf("%s-%d-%09d", g.cfg.Prefix, g.n, i), Currency: w.currency}
	if g.rnd.IntN(10) == 0 {
		req.Metadata = map[string]string{"channel": "web", "store": fmt.Sprintf("s%d", g.rnd.IntN(50))}
	}
	lines := 1
	if g.rnd.IntN(100) < 15 {
		lines = 2
	}
	o := &store.Order{
		ID: orderID(at), AccountID: w.account, ExternalOrderCode: req.ExternalOrderCode, Currency: w.currency,
		Status: store.OrderProcessing, EstimatedReadyAt: at.Add(2 * time.Second), CreatedAt: at, Metadata: req.Metadata,
	}
	// Every line of an order shares one unit price, so a partial delivery's refund is what the
	// money audit recomputes from the order's totals.
	first := w.products[g.rnd.IntN(len(w.products))]
	for l := range lines {
		p := first
		if l > 0 {
			p = w.products[g.rnd.IntN(len(w.products))]
			p.price = first.price
		}
		q := []int64{1, 1, 1, 1, 1, 1, 1, 2, 2, 5}[g.rnd.IntN(10)]
		req.Lines = append(req.Lines, orders.LineRequest{ProductCode: p.code, Quantity: q})
		o.Lines = append(o.Lines, store.OrderLine{OrderID: o.ID, LineNo: l, ProductCode: p.code, UnitPrice: p.price,
			Quantity: int(q), Currency: w.currency})
		o.TotalPrice += p.price * q
		o.TotalQuantity += int(q)
	}
	o.PayloadHash = req.Hash()
	o.DebitedAmount = o.TotalPrice
	if w.balance < o.TotalPrice {
		w.topUps++
		g.entry(b, w, store.EntryTopUp, fmt.Sprintf("%s-top-up-%s-%d", g.cfg.Prefix, w.currency, w.topUps), topUp,
			"history top-up", at.Add(-time.Minute))
	}
	g.entry(b, w, store.EntryOrderDebit, o.ID.String(), -o.TotalPrice, "", at)
	if inFlight {
		job, err := fulfilment.Job(o.ID, string(tenancy.Production))
		if err != nil {
			return err
		}
		b.jobs = append(b.jobs, []any{job.Kind, job.Queue, job.Args, int16(job.MaxAttempts), at})
		b.orders = append(b.orders, orderRow(o))
		b.lines = append(b.lines, lineRows(o)...)
		return nil
	}
	finished := at.Add(time.Duration(300+g.rnd.IntN(1500)) * time.Millisecond)
	o.FinishedAt = &finished
	delivered := map[int]int{}
	shortfall := ""
	switch roll := g.rnd.IntN(1000); {
	case roll < failedPerMille:
		shortfall = "Product out of stock"
	case roll < failedPerMille+partialPerMille && o.TotalQuantity > 1:
		// The last line falls short by one unit or more.
		for _, l := range o.Lines {
			delivered[l.LineNo] = l.Quantity
		}
		last := o.Lines[len(o.Lines)-1]
		delivered[last.LineNo] = g.rnd.IntN(last.Quantity)
		shortfall = "Product out of stock"
	default:
		for _, l := range o.Lines {
			delivered[l.LineNo] = l.Quantity
		}
	}
	o.Status, o.Delivered, o.RefundedAmount, o.Reason = fulfilment.Outcome(o, delivered, shortfall)
	b.orders = append(b.orders, orderRow(o))
	b.lines = append(b.lines, lineRows(o)...)
	for _, l := range o.Lines {
		for u := range delivered[l.LineNo] {
			if err := g.code(b, o, l, u, finished); err != nil {
				return err
			}
		}
	}
	if o.RefundedAmount > 0 {
		g.entry(b, w, store.EntryRefund, o.ID.String(), o.RefundedAmount,
			"undelivered units of order "+o.ExternalOrderCode, finished)
	}
	return nil
}

// code adds a unit's code: its delivered_codes row, sealed as `codes import` seals it, with the
// id of the stock row it was delivered from, which the delivery deleted.
func (g *worker) code(b *batch, o *store.Order, l store.OrderLine, unit int, at time.Time) error {
	plain := fmt.Sprintf("%s-%s-%d-%d", g.cfg.Prefix, o.ID, l.LineNo, unit)
	ciphertext, digest, err := g.cfg.Cipher.Seal(plain)
	if err != nil {
		return fmt.Errorf("history: seal: %w", err)
	}
	key := int16(g.cfg.Cipher.Key())
	slot := b.stockIDs
	b.stockIDs++
	b.delivered = append(b.delivered, []any{pgID(o.ID), int32(l.LineNo), int32(unit), slot, key, ciphertext, digest, at})
	return nil
}

func (g *worker) entry(b *batch, w *wallet, kind, reference string, amount int64, note string, at time.Time) {
	w.balance += amount
	b.balances[w] = true
	b.entries = append(b.entries, []any{pgID(w.account), w.currency, kind, reference, amount, w.balance, note, at})
}

// orderID is a version 7 UUID of the time the order was placed, as placement makes one then.
func orderID(at time.Time) uuid.UUID {
	var id uuid.UUID
	ms := uint64(at.UnixMilli())
	binary.BigEndian.PutUint64(id[:8], ms<<16)
	_, _ = rand.Read(id[6:])
	id[6] = id[6]&0x0f | 0x70
	id[8] = id[8]&0x3f | 0x80
	return id
}

func pgID(id uuid.UUID) pgtype.UUID { return pgtype.UUID{Bytes: id, Valid: true} }

func orderRow(o *store.Order) []any {
	metadata := "{}"
	if len(o.Metadata) > 0 {
		metadata = fmt.Sprintf(`{"channel": %q, "store": %q}`, o.Metadata["channel"], o.Metadata["store"])
	}
	return []any{pgID(o.ID), pgID(o.AccountID), o.ExternalOrderCode, o.PayloadHash, o.Currency, o.TotalPrice,
		int32(o.TotalQuantity), o.DebitedAmount, o.RefundedAmount, o.Status, int32(o.Delivered), o.Reason,
		o.EstimatedReadyAt, o.CreatedAt, o.FinishedAt, metadata}
}

func lineRows(o *store.Order) [][]any {
	out := make([][]any, len(o.Lines))
	for i, l := range o.Lines {
		out[i] = []any{pgID(o.ID), int32(l.LineNo), l.ProductCode, l.UnitPrice, int32(l.Quantity), l.Currency, l.SKU}
	}
	return out
}

var (
	orderColumns = []string{"id", "account_id", "external_order_code", "payload_hash", "currency", "total_price",
		"total_quantity", "debited_amount", "refunded_amount", "status", "delivered", "reason", "estimated_ready_at",
		"created_at", "finished_at", "metadata"}
	lineColumns  = []string{"order_id", "line_no", "product_code", "unit_price", "quantity", "currency", "sku"}
	entryColumns = []string{"account_id", "currency", "kind", "reference", "amount", "balance_after", "note",
		"created_at"}
	deliveredColumns = []string{"order_id", "line_no", "unit_no", "stock_id", "key_ref", "ciphertext", "digest",
		"delivered_at"}
	jobColumns = []string{"kind", "queue", "args", "max_attempts", "created_at"}
)

// write commits a batch: the stock ids of its codes are drawn from code_stock's sequence in the
// transaction, then every table is copied and the balances set to where the batch's entries
// leave them.
func (g *worker) write(ctx context.Context, b *batch) (Result, error) {
	res := Result{Orders: int64(len(b.orders)), Lines: int64(len(b.lines)), Entries: int64(len(b.entries)),
		Codes: int64(len(b.delivered))}
	err := pgx.BeginFunc(ctx, g.pool, func(tx pgx.Tx) error {
		if b.stockIDs > 0 {
			// nextval per row through generate_series keeps the sequence the owner of the ids,
			// whoever else draws from it meanwhile.
			rows, err := tx.Query(ctx, `SELECT nextval('code_stock_id_seq') FROM generate_series(1, $1)`, b.stockIDs)
			if err != nil {
				return fmt.Errorf("history: stock ids: %w", err)
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				return fmt.Errorf("history: stock ids: %w", err)
			}
			for i := range b.delivered {
				b.delivered[i][3] = ids[b.delivered[i][3].(int)]
			}
		}
		for _, c := range []struct {
			table   string
			columns []string
			rows    [][]any
		}{
			{"orders", orderColumns, b.orders}, {"order_lines", lineColumns, b.lines},
			{"wallet_entries", entryColumns, b.entries},
			{"delivered_codes", deliveredColumns, b.delivered}, {"river_job", jobColumns, b.jobs},
		} {
			if len(c.rows) == 0 {
				continue
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{c.table}, c.columns, pgx.CopyFromRows(c.rows)); err != nil {
				return fmt.Errorf("history: copy %s: %w", c.table, err)
			}
		}
		accounts, currencies, balances := []pgtype.UUID{}, []string{}, []int64{}
		for w := range b.balances {
			accounts, currencies, balances = append(accounts, pgID(w.account)), append(currencies, w.currency),
				append(balances, w.balance)
		}
		if _, err := tx.Exec(ctx, `UPDATE wallet_balances b SET balance = n.balance, updated_at = now()
			FROM unnest($1::uuid[], $2::text[], $3::bigint[]) AS n (account_id, currency, balance)
			WHERE b.account_id = n.account_id AND b.currency = n.currency`, accounts, currencies, balances); err != nil {
			return fmt.Errorf("history: balances: %w", err)
		}
		return nil
	})
	return res, err
}
