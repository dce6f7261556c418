//go:build soak

package soak

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/tenancy"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// latencyLimit is the slowest answer allowed outside a replica's kill.
const latencyLimit = time.Second

// findings collects failures by kind, keeping a few examples of each.
type findings struct {
	count    map[string]int
	examples map[string][]string
}

func newFindings() *findings {
	return &findings{count: map[string]int{}, examples: map[string][]string{}}
}

func (f *findings) add(kind, format string, args ...any) {
	f.count[kind]++
	if len(f.examples[kind]) < 8 {
		f.examples[kind] = append(f.examples[kind], fmt.Sprintf(format, args...))
	}
}

func (f *findings) report() []string {
	var out []string
	for _, kind := range slices.Sorted(maps.Keys(f.count)) {
		out = append(out, fmt.Sprintf("%s: %d", kind, f.count[kind]))
		for _, e := range f.examples[kind] {
			out = append(out, "    "+e)
		}
	}
	return out
}

// phaseStats are the figures of one phase.
type phaseStats struct {
	duration time.Duration
	// from and to bound the phase's requests.
	from, to     time.Time
	requests     int
	accepted     int // new orders answered 202
	statuses     map[string]int
	latencies    []time.Duration
	fiveXX       int
	killAffected int
	// cpu is the CPU time the codeport processes used in the phase, by command.
	cpu map[string]time.Duration
}

func (s *phaseStats) perSecond() float64 { return float64(s.accepted) / s.duration.Seconds() }

func (s *phaseStats) percentile(p float64) time.Duration {
	if len(s.latencies) == 0 {
		return 0
	}
	return s.latencies[min(len(s.latencies)-1, int(p*float64(len(s.latencies))))]
}

// killAffected reports whether a request was in flight to, or sent to, a replica between its
// SIGKILL and its being ready again.
func killAffected(r *result) bool {
	end := r.start.Add(r.dur)
	for _, w := range r.replica.killWindows() {
		if r.start.Before(w.to) && end.After(w.from) {
			return true
		}
	}
	return false
}

// explained says why a refusal is expected: the churn or the partner's setup caused it. An empty
// reason is a defect.
func (ch *churn) explained(r *result) string {
	msg := r.message
	production := r.env == string(tenancy.Production)
	rateLimited := r.status == http.StatusTooManyRequests && strings.HasPrefix(msg, "Rate limit exceeded.")
	switch {
	case r.status == http.StatusBadRequest && (r.partner == edited || r.partner == editedToo) && production &&
		msg == fmt.Sprintf("Product %s price mismatch: expected %d", plentiful, editedPrice) && ch.editedSince(r.start):
		return "price changed under the partner: ordered at the price it last read"
	case r.status == http.StatusUnauthorized && msg == msgInvalidKey && ch.isChurned(r.key):
		return "key rotated or deleted (old key, or new key before it was registered)"
	case r.status == http.StatusForbidden && msg == msgSuspended && r.partner == suspended:
		return "partner suspended"
	case r.status == http.StatusConflict && msg == "An order with this external order code already exists." &&
		r.op == opConflict:
		return "same externalOrderCode, other payload (sent on purpose)"
	case r.status == http.StatusUnprocessableEntity &&
		msg == "Insufficient funds. Please top up your wallet and try again." && r.partner == poor && production:
		return "small wallet spent until the next top-up"
	case rateLimited && r.partner == limited && production:
		return fmt.Sprintf("partner's own limit (%d/min, shared by the replicas)", limitedPerMin)
	case rateLimited && (ch.isChurned(r.key) || r.partner == suspended):
		return "refused requests count against the client IP's budget (60/min), shared by every partner of this run"
	}
	return ""
}

func (ch *churn) editedSince(t time.Time) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return !ch.editedAt.IsZero() && !t.Before(ch.editedAt.Add(-time.Second))
}

// checkResults asserts what every answer must be and computes the phases' figures.
func (ch *churn) checkResults(
	results []result, orders map[string]*order, durations map[int]time.Duration, f *findings,
) (map[int]*phaseStats, map[string]int) {
	stats := map[int]*phaseStats{}
	for phase, d := range durations {
		stats[phase] = &phaseStats{duration: d, statuses: map[string]int{}}
	}
	reasons := map[string]int{}
	// Requests the limited partner's key was allowed per window, across both replicas.
	allowed := map[int64]int{}
	for i := range results {
		r := &results[i]
		s := stats[r.phase]
		if s == nil {
			continue
		}
		affected := killAffected(r)
		s.record(r, affected)
		if affected {
			continue
		}
		ch.checkResult(r, orders, f, reasons, allowed)
	}
	for reset, n := range allowed {
		if n > limitedPerMin {
			f.add("rate limit not shared by the replicas", "window ending %s: %d requests of %s allowed, limit %d",
				time.Unix(reset, 0).Format("15:04:05"), n, partnerName(limited), limitedPerMin)
		}
	}
	for _, s := range stats {
		slices.Sort(s.latencies)
	}
	return stats, reasons
}

// record counts r in the phase's figures; the latency of a request affected by a kill is left
// out.
func (s *phaseStats) record(r *result, affected bool) {
	s.requests++
	if s.from.IsZero() || r.start.Before(s.from) {
		s.from = r.start
	}
	if end := r.start.Add(r.dur); end.After(s.to) {
		s.to = end
	}
	label := fmt.Sprintf("%d", r.status)
	if r.status == 0 {
		label = "no answer"
	}
	s.statuses[label]++
	if affected {
		s.killAffected++
	} else {
		s.latencies = append(s.latencies, r.dur)
	}
	if r.op == opOrder && r.status == http.StatusAccepted {
		s.accepted++
	}
	if r.status >= 500 {
		s.fiveXX++
	}
}

// checkResult asserts what an answer not affected by a kill must be. It counts the reasons of
// expected refusals in reasons, and the limited partner's allowed requests per window in
// allowed.
func (ch *churn) checkResult(
	r *result, orders map[string]*order, f *findings, reasons map[string]int, allowed map[int64]int,
) {
	where := fmt.Sprintf("%s %s %s on %s at %s",
		r.op, partnerName(r.partner), r.env, r.replica.name, r.start.Format("15:04:05.000"))
	switch {
	case r.status == 0:
		f.add("no answer outside a replica kill", "%s: %s", where, r.err)
		return
	case r.status >= 500:
		f.add(fmt.Sprintf("%d %s", r.status, r.message), "%s (%s)", where, r.code)
	}
	// The bound holds outside the killed replica: once killed, a replica restarts cold
	// (new process, empty caches) and its answers are exempt from the bound, not from the
	// other checks.
	if r.dur > latencyLimit && !r.replica.killedBefore(r.start) {
		f.add("slower than 1 s outside the killed replica",
			"%s: %s, %d (%s after %s started; load average %.1f)", where, r.dur.Round(time.Millisecond), r.status,
			r.replica.age(r.start).Round(100*time.Millisecond), r.replica.name, ch.machine.at(r.start))
	}
	if !r.rateHeaders {
		f.add("answer without X-RateLimit-* headers", "%s: %d %s", where, r.status, r.message)
	}
	if r.partner == limited && r.env == string(tenancy.Production) && r.status != http.StatusTooManyRequests &&
		r.op != opProbe {
		allowed[r.reset]++
	}
	if r.status >= 400 && r.status < 500 {
		why := ch.explained(r)
		if why == "" {
			f.add(fmt.Sprintf("unexplained %d %s", r.status, r.message), "%s (%s)", where, r.code)
			return
		}
		reasons[fmt.Sprintf("%d %s", r.status, why)]++
		return
	}
	ch.checkAnswer(r, orders, where, f)
}

// checkAnswer asserts the 2xx semantics of each operation.
func (ch *churn) checkAnswer(r *result, orders map[string]*order, where string, f *findings) {
	switch r.op {
	case opOrder:
		if r.status != http.StatusAccepted && (r.status != http.StatusOK || !r.replayed) {
			f.add("order not answered 202 (or 200 replayed on a retry)", "%s: %d", where, r.status)
		}
	case opReplay:
		if o := orders[r.code]; r.status != http.StatusOK || !r.replayed || r.orderID != o.orderID {
			f.add("replay not answered 200 Idempotent-Replayed with the same orderId", "%s: %d replayed=%v orderId %s, want %s",
				where, r.status, r.replayed, r.orderID, o.orderID)
		}
	case opConflict:
		f.add("same externalOrderCode with another payload not refused with 409", "%s: %d", where, r.status)
	case opCatalog, opProbe:
		if r.status != http.StatusOK {
			f.add("read not answered 200", "%s: %d", where, r.status)
		}
	}
}

// orderRow is an order with what the ledger and the delivered codes say of it.
type orderRow struct {
	ID, AccountID, ExternalOrderCode, Status               string
	TotalPrice, DebitedAmount, RefundedAmount              int64
	TotalQuantity, Delivered, CodesDelivered               int
	UndeliveredValue, Debits, DebitSum, Refunds, RefundSum int64
}

const ordersSQL = `
WITH d AS (SELECT order_id, line_no, count(*) AS n FROM delivered_codes GROUP BY order_id, line_no),
u AS (SELECT l.order_id, sum((l.quantity - COALESCE(d.n, 0)) * l.unit_price)::bigint AS value,
             sum(COALESCE(d.n, 0))::int AS delivered
      FROM order_lines l LEFT JOIN d ON d.order_id = l.order_id AND d.line_no = l.line_no GROUP BY l.order_id),
e AS (SELECT account_id, reference, kind, count(*) AS n, sum(amount)::bigint AS amount FROM wallet_entries
      WHERE kind IN ('order_debit', 'refund') GROUP BY account_id, reference, kind)
SELECT o.id::text AS id, o.account_id::text AS account_id, o.external_order_code, o.status, o.total_price,
       o.debited_amount, o.refunded_amount, o.total_quantity, o.delivered, COALESCE(u.delivered, 0) AS codes_delivered,
       COALESCE(u.value, 0) AS undelivered_value, COALESCE(db.n, 0) AS debits, COALESCE(db.amount, 0) AS debit_sum,
       COALESCE(rf.n, 0) AS refunds, COALESCE(rf.amount, 0) AS refund_sum
FROM orders o
LEFT JOIN u ON u.order_id = o.id
LEFT JOIN e db ON db.account_id = o.account_id AND db.reference = o.id::text AND db.kind = 'order_debit'
LEFT JOIN e rf ON rf.account_id = o.account_id AND rf.reference = o.id::text AND rf.kind = 'refund'`

// waitTerminal waits until no order is processing.
func (c *cluster) waitTerminal(ctx context.Context, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	err := poll.Wait(ctx, pollPause, limit, "every order terminal", func() (bool, string) {
		var n int64
		err := c.db.Pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE status = 'processing'`).Scan(&n)
		if err != nil {
			return false, err.Error()
		}
		return n == 0, fmt.Sprintf("%d orders processing", n)
	})
	return time.Since(start), err
}

// checkOrders asserts that every acknowledged order exists once with its id, and that every
// order is terminal and was debited once, refunded exactly its undelivered value, and delivered
// the codes it says.
func (c *cluster) checkOrders(
	ctx context.Context, partners []*partner, sent map[string]*order, f *findings,
) (map[string]int, error) {
	read, err := c.db.Pool.Query(ctx, ordersSQL)
	if err != nil {
		return nil, fmt.Errorf("read orders: %w", err)
	}
	rows, err := pgx.CollectRows(read, pgx.RowToStructByName[orderRow])
	if err != nil {
		return nil, fmt.Errorf("read orders: %w", err)
	}
	owner := map[string]string{}
	for _, p := range partners {
		for env, id := range p.accounts {
			owner[id.String()] = p.name + " " + env
		}
	}
	byStatus := map[string]int{}
	inDB := map[string]orderRow{}
	for _, o := range rows {
		byStatus[o.Status]++
		inDB[owner[o.AccountID]+" "+o.ExternalOrderCode] = o
		checkOrderRow(o, fmt.Sprintf("order %s (%s, %s)", o.ExternalOrderCode, owner[o.AccountID], o.ID), f)
	}
	checkAcknowledged(sent, inDB, f)
	if err := c.checkEntriesAndCodes(ctx, f); err != nil {
		return nil, err
	}
	return byStatus, nil
}

// checkOrderRow asserts that an order is terminal, was debited once, refunded exactly its
// undelivered value, and has the status its delivered codes give it.
func checkOrderRow(o orderRow, where string, f *findings) {
	if o.Status == store.OrderProcessing {
		f.add("order not terminal", "%s", where)
		return
	}
	if o.DebitedAmount != o.TotalPrice || o.Debits != 1 || o.DebitSum != -o.DebitedAmount {
		f.add("order not debited exactly once", "%s: total %d, debited %d, %d debit entries summing to %d",
			where, o.TotalPrice, o.DebitedAmount, o.Debits, o.DebitSum)
	}
	wantRefund := min(o.UndeliveredValue, o.DebitedAmount)
	wantRefunds := int64(0)
	if wantRefund > 0 {
		wantRefunds = 1
	}
	if o.RefundedAmount != wantRefund || o.Refunds != wantRefunds || o.RefundSum != wantRefund {
		f.add("undelivered units not refunded exactly once",
			"%s: undelivered value %d, refunded %d, %d refund entries summing to %d",
			where, o.UndeliveredValue, o.RefundedAmount, o.Refunds, o.RefundSum)
	}
	wantStatus := store.OrderPartiallyCompleted
	switch o.CodesDelivered {
	case o.TotalQuantity:
		wantStatus = store.OrderCompleted
	case 0:
		wantStatus = store.OrderFailed
	}
	if o.Delivered != o.CodesDelivered || o.Status != wantStatus {
		f.add("order status disagrees with its codes", "%s: %s, delivered %d, %d codes of %d units",
			where, o.Status, o.Delivered, o.CodesDelivered, o.TotalQuantity)
	}
}

// checkAcknowledged asserts that every order answered with an id is stored with that id, and
// that no order never acknowledged was stored. inDB holds the stored orders by
// "partner environment externalOrderCode".
func checkAcknowledged(sent map[string]*order, inDB map[string]orderRow, f *findings) {
	for code, o := range sent {
		row, ok := inDB[partnerName(o.partner)+" "+o.env+" "+code]
		switch {
		case o.orderID != "" && !ok:
			f.add("acknowledged order missing", "%s (%s %s)", code, partnerName(o.partner), o.env)
		case o.orderID != "" && row.ID != o.orderID:
			f.add("acknowledged order has another id", "%s: answered %s, stored %s", code, o.orderID, row.ID)
		case o.orderID == "" && ok:
			// Placed without an acknowledgement: only a request that got no answer, or a 5xx, may
			// leave that behind, and a retry would have been answered 200 replayed.
			f.add("order placed although never acknowledged", "%s (%s %s): answers %v",
				code, partnerName(o.partner), o.env, o.answers)
		}
	}
}

// checkEntriesAndCodes asserts that every debit and refund belongs to an order, and that no code
// was delivered twice.
func (c *cluster) checkEntriesAndCodes(ctx context.Context, f *findings) error {
	read, err := c.db.Pool.Query(ctx, `SELECT e.kind, e.reference FROM wallet_entries e
		WHERE e.kind IN ('order_debit', 'refund')
		AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.id::text = e.reference AND o.account_id = e.account_id)`)
	if err != nil {
		return fmt.Errorf("read orphan entries: %w", err)
	}
	orphans, err := pgx.CollectRows(read, pgx.RowToStructByPos[struct{ Kind, Reference string }])
	if err != nil {
		return fmt.Errorf("read orphan entries: %w", err)
	}
	for _, o := range orphans {
		f.add("ledger entry without its order", "%s %s", o.Kind, o.Reference)
	}
	var codes struct{ Total, Distinct, Reused int64 }
	err = c.db.Pool.QueryRow(ctx, `SELECT count(*) AS total, count(DISTINCT digest) AS distinct,
		(SELECT count(*) FROM (SELECT stock_id FROM delivered_codes WHERE stock_id IS NOT NULL
			GROUP BY stock_id HAVING count(*) > 1) s) AS reused
		FROM delivered_codes`).Scan(&codes.Total, &codes.Distinct, &codes.Reused)
	if err != nil {
		return fmt.Errorf("read delivered codes: %w", err)
	}
	if codes.Total != codes.Distinct || codes.Reused != 0 {
		f.add("code delivered twice", "%d codes delivered, %d distinct, %d stock rows delivered more than once",
			codes.Total, codes.Distinct, codes.Reused)
	}
	return nil
}

// checkLedger asserts, for every wallet, that the ledger sums to the balance and that every
// top-up in the Wallet's spec was applied exactly once.
func (c *cluster) checkLedger(ctx context.Context, partners []*partner, topUps int, f *findings) error {
	db := c.db.Pool
	for _, p := range partners {
		for env, id := range p.accounts {
			sums, err := store.LedgerSum(ctx, db, id)
			if err != nil {
				return err
			}
			balances, err := store.Balances(ctx, db, id)
			if err != nil {
				return err
			}
			got := map[string]int64{}
			for _, b := range balances {
				got[b.Currency] = b.Balance
			}
			if !maps.Equal(got, sums) {
				f.add("ledger does not sum to the balance", "%s %s: balances %v, ledger %v", p.name, env, got, sums)
			}
			var applied int64
			if err := db.QueryRow(ctx, `SELECT count(*) FROM wallet_entries WHERE account_id = $1 AND kind = 'top_up'`, id).
				Scan(&applied); err != nil {
				return fmt.Errorf("count top-ups: %w", err)
			}
			if applied != int64(1+topUps) {
				f.add("top-ups not applied exactly once", "%s %s: %d top-up entries for %d top-ups", p.name, env, applied, 1+topUps)
			}
		}
	}
	return nil
}

// walletConvergence waits until every Wallet's status.balances equals its balances in the
// database. A wallet must converge within 5 s of the later of the load stopping and its own
// last ledger entry (refunds of orders finishing after the load still move it). It returns the
// slowest convergence, measured from the load stopping.
func (c *cluster) walletConvergence(
	ctx context.Context, partners []*partner, stopped time.Time, f *findings,
) (time.Duration, error) {
	prov, err := testfixture.NewProvisioner(c.db, nil)
	if err != nil {
		return 0, err
	}
	type wallet struct {
		p   *partner
		env string
	}
	pending := map[wallet]string{}
	for _, p := range partners {
		for _, env := range environments {
			pending[wallet{p, env}] = ""
		}
	}
	var slowest time.Duration
	deadline := time.Now().Add(3 * time.Minute)
	for len(pending) > 0 {
		for w := range pending {
			var obj v1alpha1.Wallet
			if err := c.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: keyName(w.p.idx, w.env)}, &obj); err != nil {
				return slowest, fmt.Errorf("get wallet: %w", err)
			}
			state, err := prov.WalletState(ctx, namespace, w.p.name, w.env)
			if err != nil {
				return slowest, fmt.Errorf("wallet state: %w", err)
			}
			if maps.Equal(obj.Status.Balances, state.Balances) {
				slowest = max(slowest, time.Since(stopped))
				delete(pending, w)
				continue
			}
			var last time.Time
			if err := c.db.Pool.QueryRow(ctx, `SELECT COALESCE(max(created_at), now()) FROM wallet_entries
				WHERE account_id = $1`, w.p.accounts[w.env]).Scan(&last); err != nil {
				return slowest, fmt.Errorf("last ledger entry: %w", err)
			}
			limit := stopped
			if last.After(limit) {
				limit = last
			}
			if time.Since(limit) > 5*time.Second {
				f.add("Wallet status not converged within 5 s", "%s %s: status %v, database %v",
					w.p.name, w.env, obj.Status.Balances, state.Balances)
				delete(pending, w)
			}
		}
		if time.Now().After(deadline) {
			return slowest, fmt.Errorf("%d wallets still changing after 3 minutes", len(pending))
		}
		sleep(ctx, 100*time.Millisecond)
	}
	return slowest, nil
}
