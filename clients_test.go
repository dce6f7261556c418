package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codeport/codeport/client"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/poll"
)

// The tour's order: two codes of the sandbox product that always succeeds, paid in EUR.
const (
	tourProduct  = "99000000000001"
	tourQuantity = 2
	tourCurrency = "EUR"
)

// TestClientTours runs the README's tour through the partners' generated clients, each against
// the sandbox of one `codeport dev` on the samples, one after the other: each tour reads the
// wallet before its order, so that it can tell its own debit from the other's.
func TestClientTours(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	creds, _, stop := startDev(t, db.URL, t.TempDir())
	defer stop()
	sandbox := creds.Partners["partners/acme"]["sandbox"]
	t.Run("go", func(t *testing.T) { goClientTour(t, sandbox.BaseURL, sandbox.APIKey, "go-tour-1") })
	t.Run("typescript", func(t *testing.T) {
		typescriptClientTour(t, contractProxy(t, sandbox.BaseURL), sandbox.APIKey, "ts-tour-1")
	})
}

// goClientTour is the README's tour through the Go client (package client): ping, a failure
// asked for with the sandbox header, the catalog, the scenarios, an order placed, replayed and
// refused with another body, polled until completed with its codes, the order history, the
// wallet and its statement.
//
//nolint:thelper // a subtest's whole body, not a helper: a failure names its own line
func goClientTour(t *testing.T, baseURL, key, orderCode string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	api, err := client.NewClientWithResponses(baseURL, client.WithAPIKey(key), client.WithHTTPClient(apiClient(t)))
	if err != nil {
		t.Fatal(err)
	}

	ping, err := api.PingWithResponse(ctx, nil)
	if err != nil || ping.StatusCode() != http.StatusOK || ping.JSON200.Status != "ok" ||
		time.Since(ping.JSON200.Timestamp).Abs() > time.Minute {
		t.Fatalf("ping: %s", answer(ping, err))
	}
	scenario := "rate-limited"
	limited, err := api.PingWithResponse(ctx, &client.PingParams{XSandboxScenario: &scenario})
	if err != nil || limited.StatusCode() != http.StatusTooManyRequests || limited.JSON429.StatusCode != 429 ||
		!strings.HasPrefix(limited.JSON429.Message, "Rate limit exceeded.") {
		t.Fatalf("ping asking for %s: %s", scenario, answer(limited, err))
	}

	goCatalogTour(ctx, t, api)

	before := walletEUR(ctx, t, api)
	order := goPlaceTourOrder(ctx, t, api, orderCode)
	if len(*order.Products) != 1 {
		t.Fatalf("completed order's lines: %+v", *order.Products)
	}
	line := (*order.Products)[0]
	if line.ProductCode != tourProduct || line.Quantity != tourQuantity ||
		len(line.Codes) != tourQuantity || line.Codes[0].Code == line.Codes[1].Code {
		t.Fatalf("completed order's lines: %+v", *order.Products)
	}
	for _, c := range line.Codes {
		if !strings.HasPrefix(c.Code, "SANDBOX-") {
			t.Errorf("sandbox code %q lacks the SANDBOX- prefix", c.Code)
		}
	}

	completed := client.ListOrdersParamsStatusCompleted
	history, err := api.ListOrdersWithResponse(ctx,
		&client.ListOrdersParams{Status: &completed, ExternalOrderCode: &orderCode})
	if err != nil || history.StatusCode() != http.StatusOK || len(history.JSON200.Orders) != 1 ||
		history.JSON200.Orders[0].OrderId != order.OrderId || history.JSON200.Orders[0].Delivered != tourQuantity {
		t.Fatalf("order history of %s: %s", orderCode, answer(history, err))
	}

	debit := float64(line.Price*tourQuantity) / 100
	if after := walletEUR(ctx, t, api); math.Abs(before-debit-after) > 0.001 {
		t.Errorf("wallet: %.2f EUR before, %.2f after an order of %.2f", before, after, debit)
	}
	currency := tourCurrency
	statement, err := api.ListWalletTransactionsWithResponse(ctx,
		&client.ListWalletTransactionsParams{Currency: &currency})
	if err != nil || statement.StatusCode() != http.StatusOK || len(statement.JSON200.Entries) == 0 {
		t.Fatalf("statement: %s", answer(statement, err))
	}
	newest := statement.JSON200.Entries[0]
	if newest.Type != "order_debit" || newest.Amount != -line.Price*tourQuantity || newest.OrderId == nil ||
		*newest.OrderId != order.OrderId {
		t.Errorf("statement's newest entry: %+v, want the order's debit of %d", newest, line.Price*tourQuantity)
	}
}

// goCatalogTour lists the catalog of one country, and finds the tour's product among the sandbox
// scenarios as the one that completes.
func goCatalogTour(ctx context.Context, t *testing.T, api *client.ClientWithResponses) {
	t.Helper()
	country, take := "de", 5
	catalog, err := api.ListProductsWithResponse(ctx, &client.ListProductsParams{Country: &country, Take: &take})
	if err != nil || catalog.StatusCode() != http.StatusOK {
		t.Fatalf("catalog: %s", answer(catalog, err))
	}
	page := catalog.JSON200
	if page.Take != take || page.Count == 0 || len(page.Products) == 0 || len(page.Products) > take {
		t.Fatalf("catalog of %s, take %d: count %d, take %d, %d products", country, take, page.Count, page.Take,
			len(page.Products))
	}
	for _, p := range page.Products {
		if p.Name == "" || !strings.EqualFold(p.CountryCode, country) {
			t.Errorf("catalog of %s: product %s named %q, of country %s", country, p.ProductCode, p.Name, p.CountryCode)
		}
	}

	scenarios, err := api.ListSandboxScenariosWithResponse(ctx, nil)
	if err != nil || scenarios.StatusCode() != http.StatusOK {
		t.Fatalf("scenarios: %s", answer(scenarios, err))
	}
	succeeds := false
	for _, s := range scenarios.JSON200.Scenarios {
		succeeds = succeeds || s.ProductCode == tourProduct && s.ExpectedStatus == "completed"
	}
	if !succeeds {
		t.Fatalf("no scenario of product %s completes: %s", tourProduct, scenarios.Body)
	}
}

// goPlaceTourOrder places the tour's order, replays it, sees another body under its code refused,
// and polls it until it is final: it returns the order completed.
func goPlaceTourOrder(ctx context.Context, t *testing.T, api *client.ClientWithResponses, code string) client.Order {
	t.Helper()
	product := tourProduct
	placement := client.PlaceOrder{ExternalOrderCode: code, Currency: tourCurrency,
		OrderProducts: []client.OrderLine{{ProductCode: &product, Quantity: tourQuantity}}}
	placed, err := api.PlaceOrderWithResponse(ctx, nil, placement)
	if err != nil || placed.StatusCode() != http.StatusAccepted || placed.JSON202.ExternalOrderCode != code ||
		placed.JSON202.Status != client.OrderStatusProcessing {
		t.Fatalf("place order: %s", answer(placed, err))
	}
	id := placed.JSON202.OrderId

	replayed, err := api.PlaceOrderWithResponse(ctx, nil, placement)
	if err != nil || replayed.StatusCode() != http.StatusOK || replayed.JSON200.OrderId != id ||
		replayed.Headers200 == nil || replayed.Headers200.IdempotentReplayed == nil ||
		*replayed.Headers200.IdempotentReplayed != "true" {
		t.Fatalf("the same order again: %s", answer(replayed, err))
	}
	other := placement
	other.OrderProducts = []client.OrderLine{{ProductCode: &product, Quantity: 1}}
	conflict, err := api.PlaceOrderWithResponse(ctx, nil, other)
	if err != nil || conflict.StatusCode() != http.StatusConflict || conflict.JSON409.StatusCode != 409 {
		t.Fatalf("another order under %s: %s", code, answer(conflict, err))
	}

	var order client.Order
	poll.Until(t, 30*time.Second, "order "+code+" final", func() (bool, string) {
		got, err := api.GetOrderWithResponse(ctx, code, nil)
		if err != nil || got.StatusCode() != http.StatusOK {
			t.Fatalf("get order %s: %s", code, answer(got, err))
		}
		order = *got.JSON200
		return order.Status != client.OrderStatusProcessing, string(order.Status)
	})
	if order.OrderId != id || order.Status != client.OrderStatusCompleted || order.Products == nil {
		t.Fatalf("order %s: %+v, want it completed", code, order)
	}
	return order
}

// walletEUR reads the wallet's EUR balance.
func walletEUR(ctx context.Context, t *testing.T, api *client.ClientWithResponses) float64 {
	t.Helper()
	wallet, err := api.GetWalletWithResponse(ctx, nil)
	if err != nil || wallet.StatusCode() != http.StatusOK {
		t.Fatalf("wallet: %s", answer(wallet, err))
	}
	balance, ok := wallet.JSON200.Balances[tourCurrency]
	if !ok {
		t.Fatalf("wallet has no %s balance: %s", tourCurrency, wallet.Body)
	}
	return balance
}

// typescriptClient is the TypeScript client's package: its generated types, its entry point and
// the tour, with the tools that build them pinned by its package-lock.json.
const typescriptClient = "client/typescript"

// typescriptClientTour compiles the TypeScript client and its tour (tour/tour.ts) with tsc --strict
// and runs the tour with node: every step asserts itself, and its last line sums up the order and
// the wallet, which are checked here again. The tools are installed with npm ci when missing or
// not those package.json names, as make openapi-lint installs Spectral.
//
//nolint:thelper // a subtest's whole body, not a helper: a failure names its own line
func typescriptClientTour(t *testing.T, baseURL, key, orderCode string) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: the TypeScript client's test needs it (hack/deps.sh installs it): %v", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := func(dir string, env []string, name string, args ...string) []byte {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return out
	}
	installed := exec.CommandContext(ctx, "npm", "ls", "--silent")
	installed.Dir = typescriptClient
	if _, err := os.Stat(filepath.Join(typescriptClient, "node_modules", ".bin", "tsc")); err != nil ||
		installed.Run() != nil {
		run(typescriptClient, nil, "npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	}

	// The output goes outside the tree; node finds the modules through a link beside it, and reads
	// it as ES modules, as the package is.
	out := t.TempDir()
	modules, err := filepath.Abs(filepath.Join(typescriptClient, "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(modules, filepath.Join(out, "node_modules")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "package.json"), []byte(`{"type": "module"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(typescriptClient, nil, filepath.Join("node_modules", ".bin", "tsc"), "--strict", "-p", ".", "--outDir", out)
	lines := strings.Split(strings.TrimSpace(string(run(out, []string{"CODEPORT_BASE_URL=" + baseURL,
		"CODEPORT_API_KEY=" + key, "CODEPORT_ORDER_CODE=" + orderCode}, "node", filepath.Join("tour", "tour.js")))), "\n")
	var summary struct {
		Ping, OrderID, Status     string
		Codes                     []string
		WalletBefore, WalletAfter float64
		Debit                     int
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &summary); err != nil {
		t.Fatalf("the tour's summary: %v\n%s", err, strings.Join(lines, "\n"))
	}
	if summary.Ping != "ok" || summary.OrderID == "" || summary.Status != "completed" ||
		len(summary.Codes) != tourQuantity || summary.Debit <= 0 ||
		math.Abs(summary.WalletBefore-float64(summary.Debit)/100-summary.WalletAfter) > 0.001 {
		t.Fatalf("the tour's summary: %+v", summary)
	}
	for _, c := range summary.Codes {
		if !strings.HasPrefix(c, "SANDBOX-") {
			t.Errorf("sandbox code %q lacks the SANDBOX- prefix", c)
		}
	}
}

// responder is what every response of the generated client has.
type responder interface {
	StatusCode() int
	GetBody() []byte
}

// answer is what a request through the generated client got, for a failure's message: the error,
// or the status and body.
func answer[R responder](resp *R, err error) string {
	if err != nil || resp == nil {
		return fmt.Sprintf("no answer: %v", err)
	}
	return fmt.Sprintf("%d %s", (*resp).StatusCode(), (*resp).GetBody())
}
