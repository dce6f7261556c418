//go:build soak

package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codeport/codeport/internal/catalog"
	"github.com/codeport/codeport/internal/tenancy"
	"github.com/codeport/codeport/internal/test/contracttest"
)

// Operations of the load.
const (
	opOrder    = "order"    // a new order (and its retries after a 5xx or a connection error)
	opReplay   = "replay"   // the same order again: 200, Idempotent-Replayed, the same orderId
	opConflict = "conflict" // the same externalOrderCode with another quantity: 409
	opCatalog  = "catalog"  // the catalog list, from which the partner learns its prices
	opProbe    = "probe"    // the churn's checks of keys and suspension
)

// result is one HTTP request and its answer.
type result struct {
	phase    int
	partner  int
	env      string
	replica  *replica
	op       string
	key      string
	start    time.Time
	dur      time.Duration
	status   int    // 0 when the request got no answer
	message  string // the error body's message
	err      string // the transport error
	code     string // externalOrderCode of order, replay and conflict
	orderID  string
	replayed bool
	// rateHeaders says the X-RateLimit-* headers were on the answer; reset is X-RateLimit-Reset.
	rateHeaders bool
	reset       int64
}

// order is what the load knows of one externalOrderCode it sent.
type order struct {
	partner int
	env     string
	body    []byte
	// orderID is set once an answer (202, or 200 replayed) acknowledged the order.
	orderID string
	// answers are the statuses of its placement attempts (0: no answer).
	answers []int
}

// load drives partner traffic against the API replicas with a fixed number of workers.
type load struct {
	partners   []*partner
	production []*replica
	sandbox    *replica
	client     *http.Client
	phase      atomic.Int32
	serial     atomic.Int64
	// began is when the current phase started.
	began   atomicTime
	workers []*worker
}

type worker struct {
	l       *load
	rng     *rand.Rand
	results []result
	orders  map[string]*order
	// acked are the codes of this worker's acknowledged orders, for replays and conflicts.
	acked []string
}

func newLoad(t *testing.T, partners []*partner, production []*replica, sandbox *replica, workers int) *load {
	t.Helper()
	tr := &http.Transport{MaxIdleConns: 4 * workers, MaxIdleConnsPerHost: 2 * workers, IdleConnTimeout: 30 * time.Second,
		DisableCompression: true}
	l := &load{partners: partners, production: production, sandbox: sandbox,
		client: contracttest.Wrap(t, &http.Client{Transport: tr, Timeout: 5 * time.Second})}
	for i := range workers {
		rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
		l.workers = append(l.workers, &worker{l: l, rng: rng, orders: map[string]*order{}})
	}
	return l
}

// run sends traffic with every worker, as phase, until loop ends. Requests run under ctx: the
// end of a phase lets the requests in flight, and an order's retries, finish.
func (l *load) run(loop, ctx context.Context, phase int) {
	l.phase.Store(int32(phase))
	var wg sync.WaitGroup
	for _, w := range l.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for loop.Err() == nil {
				w.step(loop, ctx)
			}
		}()
	}
	wg.Wait()
}

// step picks a partner that is not being refused and sends one request (or one order with its
// retries). The mix: 60% new production orders, 8% replays, 1.5% conflicting replays, 15%
// production catalog reads, 10% sandbox traffic.
func (w *worker) step(loop, ctx context.Context) {
	p := w.pickPartner()
	if p == nil {
		sleep(loop, 10*time.Millisecond)
		return
	}
	x := w.rng.Float64()
	prodKey := p.key(string(tenancy.Production)) != ""
	switch {
	case x < 0.10 || !prodKey:
		if w.rng.IntN(3) == 0 {
			w.readCatalog(ctx, p, string(tenancy.Sandbox))
			return
		}
		product, quantity := catalog.TestSuccessFixed, 1
		if w.rng.IntN(4) == 0 {
			product, quantity = catalog.TestPartial, 2
		}
		w.place(ctx, p, string(tenancy.Sandbox), product, quantity, 1000)
	case x < 0.25:
		w.readCatalog(ctx, p, string(tenancy.Production))
	case x < 0.33 && len(w.acked) > 0:
		w.replay(ctx, false)
	case x < 0.345 && len(w.acked) > 0:
		w.replay(ctx, true)
	default:
		product, quantity, price := plentiful, 1+w.rng.IntN(2), p.price.Load()
		if w.rng.IntN(5) == 0 {
			product, quantity, price = scarce, 1+w.rng.IntN(3), scarcePrice
		}
		w.place(ctx, p, string(tenancy.Production), product, quantity, price)
	}
}

func (w *worker) pickPartner() *partner {
	now := time.Now()
	for range 4 {
		p := w.l.partners[w.rng.IntN(len(w.l.partners))]
		if !p.refusedUntil.after(now) {
			return p
		}
	}
	return nil
}

func (l *load) replicaFor(environment string, rng *rand.Rand, not *replica) *replica {
	if environment == string(tenancy.Sandbox) {
		return l.sandbox
	}
	now := time.Now()
	r := l.production[rng.IntN(len(l.production))]
	if r == not || r.downUntil.after(now) {
		for _, other := range l.production {
			if other != r && other != not {
				return other
			}
		}
	}
	return r
}

func orderBody(code, product string, quantity int, price int64) []byte {
	b, _ := json.Marshal(map[string]any{"externalOrderCode": code, "currency": "EUR",
		"orderProducts": []map[string]any{{"productCode": product, "quantity": quantity, "price": price}}})
	return b
}

// place sends a new order and, after a 5xx or no answer, the same order again on another
// replica (at most three attempts): the externalOrderCode makes that safe, and a partner is told
// to retry 502s.
func (w *worker) place(ctx context.Context, p *partner, environment, product string, quantity int, price int64) {
	code := fmt.Sprintf("soak-%d-%s-%s-%d", w.l.phase.Load(), p.name, environment[:1], w.l.serial.Add(1))
	o := &order{partner: p.idx, env: environment, body: orderBody(code, product, quantity, price)}
	w.orders[code] = o
	var last *replica
	for attempt := range 3 {
		if attempt > 0 {
			sleep(ctx, 100*time.Millisecond)
		}
		r := w.l.replicaFor(environment, w.rng, last)
		res := w.send(ctx, p, environment, r, opOrder, http.MethodPost, "/v2/orders", o.body)
		res.code = code
		w.results = append(w.results, res)
		o.answers = append(o.answers, res.status)
		if (res.status == http.StatusAccepted || (res.status == http.StatusOK && res.replayed)) && res.orderID != "" {
			o.orderID = res.orderID
			w.acked = append(w.acked, code)
			return
		}
		if res.status != 0 && res.status < 500 {
			return
		}
		last = r
	}
}

// replay re-sends an acknowledged order, or with conflict another quantity under its code.
func (w *worker) replay(ctx context.Context, conflict bool) {
	code := w.acked[w.rng.IntN(len(w.acked))]
	o := w.orders[code]
	p := w.l.partners[o.partner]
	if p.key(o.env) == "" {
		return
	}
	body, op := o.body, opReplay
	if conflict {
		var req map[string]any
		_ = json.Unmarshal(o.body, &req)
		line := req["orderProducts"].([]any)[0].(map[string]any)
		line["quantity"] = line["quantity"].(float64) + 1
		body, _ = json.Marshal(req)
		op = opConflict
	}
	res := w.send(ctx, p, o.env, w.l.replicaFor(o.env, w.rng, nil), op, http.MethodPost, "/v2/orders", body)
	res.code = code
	w.results = append(w.results, res)
}

func (w *worker) readCatalog(ctx context.Context, p *partner, environment string) {
	r := w.l.replicaFor(environment, w.rng, nil)
	res := w.send(ctx, p, environment, r, opCatalog, http.MethodGet, "/v2/catalog/products?take=20", nil)
	w.results = append(w.results, res)
}

// send makes one request with the partner's current key and records it; it keeps the load off a
// replica that did not answer and off a partner that was refused.
func (w *worker) send(
	ctx context.Context, p *partner, environment string, r *replica, op, method, path string, body []byte,
) result {
	key := p.key(environment)
	res := w.l.do(ctx, r, key, method, path, body)
	res.phase, res.partner, res.env, res.op = int(w.l.phase.Load()), p.idx, environment, op
	switch {
	case res.status == 0:
		r.downUntil.set(time.Now().Add(300 * time.Millisecond))
	case res.status == http.StatusUnauthorized || res.status == http.StatusForbidden:
		p.refusedUntil.set(time.Now().Add(time.Second))
	case res.status == http.StatusTooManyRequests:
		p.refusedUntil.set(time.Now().Add(500 * time.Millisecond))
	case op == opCatalog && res.status == http.StatusOK && environment == string(tenancy.Production) && res.price > 0:
		p.price.Store(res.price)
	}
	return res.result
}

// answer is a result plus what the load learns from the body.
type answer struct {
	result
	// price is plentiful's price in a catalog list.
	price int64
}

// do sends one request to replica r with key and reads the whole answer.
func (l *load) do(ctx context.Context, r *replica, key, method, path string, body []byte) answer {
	a := answer{result: result{replica: r, key: key, start: time.Now()}}
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, reader)
	if err != nil {
		a.err = err.Error()
		return a
	}
	req.Header.Set("x-api-key", key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := l.client.Do(req)
	if err != nil {
		a.dur, a.err = time.Since(a.start), err.Error()
		return a
	}
	data, err := readAll(resp)
	resp.Body.Close()
	a.dur = time.Since(a.start)
	if err != nil {
		a.err = err.Error()
		return a
	}
	a.status = resp.StatusCode
	a.replayed = resp.Header.Get("Idempotent-Replayed") == "true"
	a.rateHeaders = resp.Header.Get("X-RateLimit-Limit") != "" && resp.Header.Get("X-RateLimit-Remaining") != ""
	a.reset, _ = strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64)
	var parsed struct {
		OrderID     string `json:"orderId"`
		Message     string `json:"message"`
		ProductCode string `json:"productCode"`
		Price       int64  `json:"price"`
		Products    []struct {
			ProductCode string `json:"productCode"`
			Price       int64  `json:"price"`
		} `json:"products"`
	}
	if json.Unmarshal(data, &parsed) == nil {
		a.orderID, a.message = parsed.OrderID, parsed.Message
		if parsed.ProductCode == plentiful {
			a.price = parsed.Price
		}
		for _, pr := range parsed.Products {
			if pr.ProductCode == plentiful {
				a.price = pr.Price
			}
		}
	}
	if a.status >= 300 && a.message == "" {
		a.message = string(data)
	}
	return a
}

// readAll reads a response body of at most 4 MiB.
func readAll(resp *http.Response) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return data, fmt.Errorf("read body: %w", err)
	}
	return data, nil
}

// merged returns every worker's results and orders.
func (l *load) merged() ([]result, map[string]*order) {
	var results []result
	orders := map[string]*order{}
	for _, w := range l.workers {
		results = append(results, w.results...)
		for code, o := range w.orders {
			orders[code] = o
		}
	}
	return results, orders
}

// atomicTime is a time that several goroutines read and set.
type atomicTime struct{ ns atomic.Int64 }

func (a *atomicTime) set(t time.Time)            { a.ns.Store(t.UnixNano()) }
func (a *atomicTime) after(t time.Time) bool     { return a.ns.Load() > t.UnixNano() }
func (a *atomicTime) get() (time.Time, bool)     { n := a.ns.Load(); return time.Unix(0, n), n != 0 }
func sleep(ctx context.Context, d time.Duration) { _ = sleepErr(ctx, d) }

func sleepErr(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return fmt.Errorf("interrupted: %w", ctx.Err())
	case <-time.After(d):
		return nil
	}
}
