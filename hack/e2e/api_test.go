//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codeport/codeport/internal/test/contracttest"
	"github.com/codeport/codeport/internal/test/poll"
)

// servedDocuments are the OpenAPI documents the releases' APIs served, parsed once for all of
// them; every partnerAPI fetches its server's own (contracttest).
var servedDocuments = contracttest.NewDocuments()

// partnerAPI calls one environment's API at base (a Service's or a Pod's address) with the
// partner's current key.
type partnerAPI struct {
	base string
	key  *atomic.Pointer[string]
	http *http.Client
}

func newPartnerAPI(t testing.TB, base string, key *atomic.Pointer[string]) *partnerAPI {
	t.Helper()
	// No keep-alive: every request is a new connection through the Service, so that the load
	// spreads over the replicas and a replaced Pod is noticed at once.
	tr := &http.Transport{DisableKeepAlives: true}
	return &partnerAPI{base: base, key: key,
		http: servedDocuments.Contracts().Wrap(t, &http.Client{Transport: tr, Timeout: 30 * time.Second})}
}

type answer struct {
	status int
	body   []byte
}

// do sends one request; status 0 with an error means no HTTP answer (connection refused or
// reset while a Pod is replaced).
func (a *partnerAPI) do(ctx context.Context, key, method, path string, body any) (answer, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return answer{}, fmt.Errorf("marshal: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return answer{}, fmt.Errorf("request: %w", err)
	}
	req.Header.Set("x-api-key", key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{status: resp.StatusCode}, fmt.Errorf("%s %s: read: %w", method, path, err)
	}
	return answer{status: resp.StatusCode, body: b}, nil
}

// firstProduct is a product of the partner's catalog in this environment, and its price.
func (a *partnerAPI) firstProduct(ctx context.Context, want string) (string, int64, error) {
	ans, err := a.do(ctx, *a.key.Load(), http.MethodGet, "/v2/catalog/products?take=50", nil)
	if err != nil {
		return "", 0, err
	}
	if ans.status != http.StatusOK {
		return "", 0, fmt.Errorf("catalog: %d %s", ans.status, ans.body)
	}
	var page struct {
		Products []struct {
			ProductCode string `json:"productCode"`
			Price       *int64 `json:"price"`
		} `json:"products"`
	}
	if err := json.Unmarshal(ans.body, &page); err != nil {
		return "", 0, fmt.Errorf("catalog: %w: %s", err, ans.body)
	}
	for _, p := range page.Products {
		if p.Price != nil && (want == "" || p.ProductCode == want) {
			return p.ProductCode, *p.Price, nil
		}
	}
	return "", 0, fmt.Errorf("catalog has no priced product %q: %s", want, ans.body)
}

type orderView struct {
	OrderID string `json:"orderId"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
}

// placeOrder places an order and, after no answer, sends the same order again (its
// externalOrderCode makes that safe, as the contract tells partners). A 5xx is returned as an
// error, never retried: the test counts it.
func (a *partnerAPI) placeOrder(ctx context.Context, code, product string, price int64) (orderView, int, error) {
	body := map[string]any{"externalOrderCode": code, "currency": "EUR",
		"orderProducts": []map[string]any{{"productCode": product, "quantity": 1, "price": price}}}
	var lastErr error
	for attempt := 0; attempt < 20; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return orderView{}, 0, ctx.Err()
			case <-time.After(250 * time.Millisecond):
			}
		}
		ans, err := a.do(ctx, *a.key.Load(), http.MethodPost, "/v2/orders", body)
		if err != nil && ans.status == 0 {
			lastErr = err
			continue
		}
		// The limit is a minute's window: a partner waits and sends the same order again.
		if ans.status == http.StatusTooManyRequests {
			lastErr = fmt.Errorf("order %s: 429 %s", code, ans.body)
			continue
		}
		if ans.status >= 500 {
			return orderView{}, ans.status, fmt.Errorf("order %s: %d %s", code, ans.status, ans.body)
		}
		if ans.status != http.StatusAccepted && ans.status != http.StatusOK {
			return orderView{}, ans.status, fmt.Errorf("order %s refused: %d %s", code, ans.status, ans.body)
		}
		var v orderView
		if err := json.Unmarshal(ans.body, &v); err != nil {
			return orderView{}, ans.status, fmt.Errorf("order %s: %w: %s", code, err, ans.body)
		}
		return v, ans.status, nil
	}
	return orderView{}, 0, fmt.Errorf("order %s: no answer: %w", code, lastErr)
}

// waitCompleted polls the order until it is completed; failed or a 5xx ends the wait.
func (a *partnerAPI) waitCompleted(ctx context.Context, ref string) error {
	last := ""
	return poll.Wait(ctx, pollPause, 3*time.Minute, "order "+ref+" completed", func() (bool, string) {
		ans, err := a.do(ctx, *a.key.Load(), http.MethodGet, "/v2/orders/"+ref, nil)
		if err != nil {
			return false, err.Error()
		}
		if ans.status != http.StatusOK {
			return false, fmt.Sprintf("%d %s", ans.status, ans.body)
		}
		var v orderView
		if err := json.Unmarshal(ans.body, &v); err != nil {
			return false, err.Error()
		}
		last = v.Status
		return v.Status == "completed", "status " + last + " " + v.Reason
	})
}

// load places orders through both Services from a few workers until stopped, and keeps every
// acknowledged order and every 5xx.
type load struct {
	mu        sync.Mutex
	acked     map[*partnerAPI][]string
	failures  []string
	serverErr int
	placed    atomic.Int64
	wg        sync.WaitGroup
	cancel    context.CancelFunc
}

type target struct {
	api     *partnerAPI
	product string
	price   int64
}

// loadPace is the pause between one worker's orders: it keeps the orders a phase places, and so
// the funds and stock the test provides, the same on a fast machine as on a slow one.
const loadPace = 50 * time.Millisecond

func startLoad(ctx context.Context, prefix string, workers int, targets ...target) *load {
	ctx, cancel := context.WithCancel(ctx)
	l := &load{acked: map[*partnerAPI][]string{}, cancel: cancel}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			pace := time.NewTicker(loadPace)
			defer pace.Stop()
			for n := 0; ctx.Err() == nil; n++ {
				if n > 0 {
					select {
					case <-ctx.Done():
						return
					case <-pace.C:
					}
				}
				tg := targets[(w+n)%len(targets)]
				code := fmt.Sprintf("%s-%d-%d", prefix, w, n)
				status, answered, err := placeResending(ctx, tg, code)
				if !answered {
					return
				}
				l.mu.Lock()
				switch {
				case err == nil:
					l.acked[tg.api] = append(l.acked[tg.api], code)
					l.placed.Add(1)
				case status >= 500:
					l.serverErr++
					l.failures = append(l.failures, err.Error())
				default:
					l.failures = append(l.failures, err.Error())
				}
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// placeResending places one order, resending it (idempotent) while its refusal (401) is a key
// rotation on its way: a rotation refuses the old key at once, and the new key reaches every API
// replica a moment after its Secret holds it; a partner whose order met either resends it with
// the key its Secret holds. answered is false when the load ended before an answer.
func placeResending(ctx context.Context, tg target, code string) (status int, answered bool, err error) {
	var refused time.Time // when the order was first refused its key
	for {
		used := tg.api.key.Load()
		_, status, err = tg.api.placeOrder(ctx, code, tg.product, tg.price)
		if ctx.Err() != nil {
			return 0, false, fmt.Errorf("order %s: %w", code, ctx.Err())
		}
		if status != http.StatusUnauthorized {
			return status, true, err
		}
		if awaitKey(ctx, tg.api.key, used, &refused) {
			continue
		}
		if ctx.Err() != nil {
			// The load ended while the order waited for its key: one last try, so that a key
			// that never works still fails the test.
			last, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, status, err = tg.api.placeOrder(last, code, tg.product, tg.price)
			cancel()
		}
		return status, true, err
	}
}

// awaitKey reports whether to resend an order refused (401) with the key used: once the key
// changes (the test stores a rotated key when the ApiKey's Secret holds it, a moment after the
// API refuses the old one), or after a short pause while the refusal is younger than a
// rotation's time (a replica that has not yet learnt the key its Secret already holds).
// refused is when the order was first refused.
func awaitKey(ctx context.Context, key *atomic.Pointer[string], used *string, refused *time.Time) bool {
	if refused.IsZero() {
		*refused = time.Now()
	}
	pause := time.Now().Add(250 * time.Millisecond)
	for time.Now().Before(pause) && ctx.Err() == nil {
		if key.Load() != used {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return ctx.Err() == nil && time.Since(*refused) < time.Minute
}

// stop ends the load and checks that every acknowledged order completed and nothing failed.
func (l *load) stop(ctx context.Context) error {
	l.cancel()
	l.wg.Wait()
	var errs []error
	if l.serverErr > 0 {
		errs = append(errs, fmt.Errorf("%d answers were 5xx", l.serverErr))
	}
	for i, f := range l.failures {
		if i == 10 {
			errs = append(errs, fmt.Errorf("… %d failures in all", len(l.failures)))
			break
		}
		errs = append(errs, errors.New(f))
	}
	for api, codes := range l.acked {
		for _, code := range codes {
			if err := api.waitCompleted(ctx, code); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
