package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/codeport/codeport/internal/test/poll"
)

// artefactsEnv names a directory for the browser test's screenshots: of every operation at each
// width, of the whole page and of the answer "Test Request" shows. Unset, the test takes one
// screenshot only, of the page as it was when the test failed, into a new temporary directory
// it logs (a PNG encode per operation is a tenth of the test's CPU).
const artefactsEnv = "CODEPORT_TEST_ARTEFACTS"

// docsOperation is an operation of the v2 document as the reference page should show it.
type docsOperation struct{ id, summary string }

// TestDocsPageInBrowser opens /docs of codeport dev in headless Chromium, as a partner would: the
// page shows every operation and webhook of both documents, and none sticks out sideways at
// 390 px (a phone) or 1400 px (a laptop), a sandbox key pasted once lets "Test Request" reach the sandbox and
// show its answer, and the page asks nothing of any server but the one that served it.
func TestDocsPageInBrowser(t *testing.T) {
	t.Parallel()
	browser := chromiumPath(t)
	artefacts := os.Getenv(artefactsEnv)
	dev := startDevProcess(t, t.TempDir())
	sandbox := dev.creds.Partners["partners/acme"]["sandbox"]
	origin := strings.TrimSuffix(sandbox.BaseURL, "/v2")
	ops := append(documentedOperations(t, origin, "v2"), documentedOperations(t, origin, "v1")...)
	scenarios := getJSON(t, sandbox.BaseURL+"/sandbox/scenarios", sandbox.APIKey)["scenarios"].([]any)
	lastCode := scenarios[len(scenarios)-1].(map[string]any)["productCode"].(string)

	var mu sync.Mutex
	var fetched, elsewhere []string
	ctx := newBrowser(t, browser, func(ev any) {
		if req, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			defer mu.Unlock()
			if u := req.Request.URL; strings.HasPrefix(u, origin+"/") {
				fetched = append(fetched, strings.TrimPrefix(u, origin))
			} else if !strings.HasPrefix(u, "data:") {
				elsewhere = append(elsewhere, u)
			}
		}
	})
	screenshotOnFailure(t, ctx)

	for _, width := range []int64{390, 1400} {
		browse(t, ctx, chromedp.EmulateViewport(width, 900))
		for i, op := range ops {
			// A new hash moves within the document shown; another document needs the page anew.
			if version, _, _ := strings.Cut(op.id, "/"); i == 0 || !strings.HasPrefix(ops[i-1].id, version+"/") {
				browse(t, ctx, chromedp.Navigate("about:blank"))
			}
			browse(t, ctx, chromedp.Navigate(origin+"/docs#"+op.id))
			poll.Until(t, 2*time.Minute, fmt.Sprintf("%s shown, fitting in %d px", op.id, width), func() (bool, string) {
				out := evaluate[[]string](t, ctx, fmt.Sprintf(shownScript, jsonOf(t, op.id), jsonOf(t, op.summary)))
				return len(out) == 0, strings.Join(out, "; ")
			})
			name := strings.NewReplacer("/", "-", "{", "", "}", "").Replace(op.id)
			screenshot(t, ctx, chromedp.CaptureScreenshot(), artefacts, fmt.Sprintf("%dpx-%s.png", width, name))
		}
		screenshot(t, ctx, chromedp.FullScreenshot(100), artefacts, fmt.Sprintf("%dpx-whole-page.png", width))
	}

	// A partner pastes the sandbox key once, into the page's authentication, then tries an
	// operation that only the sandbox answers.
	op := "v2/tag/sandbox/GET/sandbox/scenarios"
	browse(t, ctx, chromedp.EmulateViewport(1400, 900), chromedp.Navigate(origin+"/docs"),
		chromedp.WaitVisible(chromedp.CSS("input.scalar-password-input")),
		chromedp.SendKeys(chromedp.CSS("input.scalar-password-input"), sandbox.APIKey),
		chromedp.Navigate(origin+"/docs#"+op),
		chromedp.Click(chromedp.CSS(fmt.Sprintf("[id=%q] button.show-api-client-button", op))))
	poll.UntilTrue(t, time.Minute, "the API client's Send button", func() bool {
		return evaluate[bool](t, ctx, `(() => {
			const send = [...document.querySelectorAll('button')]
				.filter(b => b.textContent.includes('Send get request') && b.offsetParent).pop();
			if (send) send.click();
			return !!send;
		})()`)
	})
	poll.Until(t, time.Minute, "the sandbox's answer shown in the page", func() (bool, string) {
		text := evaluate[string](t, ctx, `(document.querySelector('[role=dialog]') || document.body).innerText`)
		return strings.Contains(text, "200 OK") && strings.Contains(text, lastCode), lastTail(text, 400)
	})
	screenshot(t, ctx, chromedp.CaptureScreenshot(), artefacts, "try-it.png")

	mu.Lock()
	defer mu.Unlock()
	// The requests the page made are seen at all: it fetched the renderer and the documents.
	for _, want := range []string{"/docs/scalar.js", "/v2/openapi.json", "/v1/openapi.json", "/v2/sandbox/scenarios"} {
		if !slices.Contains(fetched, want) {
			t.Errorf("the page did not fetch %s; it fetched %v", want, fetched)
		}
	}
	if len(elsewhere) > 0 {
		t.Errorf("the page fetched from elsewhere than %s: %v", origin, elsewhere)
	}
}

// shownScript lists what is wrong with the section of an operation (id and summary, %s and %s,
// JSON): not shown (yet), or elements of it reaching past the right edge of the viewport unless
// a box of their own that fits scrolls or clips them (a wide code sample scrolls in its card),
// or the page itself scrolling sideways.
const shownScript = `(() => {
	const width = document.documentElement.clientWidth, out = [];
	const section = document.getElementById(%s), summary = %s;
	if (!section) return ['not shown'];
	if (!section.innerText.includes(summary)) return ['shown without its summary ' + summary];
	const scrolls = document.documentElement.scrollWidth > width + 1;
	if (scrolls) out.push('the page scrolls sideways: ' + document.documentElement.scrollWidth + ' px wide');
	for (const el of scrolls ? document.body.querySelectorAll('*') : [section, ...section.querySelectorAll('*')]) {
		const r = el.getBoundingClientRect();
		if (r.width === 0 || r.height === 0 || r.right <= width + 1) continue;
		let held = false;
		for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
			if (getComputedStyle(p).overflowX !== 'visible' && p.getBoundingClientRect().right <= width + 1) {
				held = true;
				break;
			}
		}
		if (!held) out.push(el.tagName.toLowerCase() + '.' + String(el.className).split(' ')[0] +
			' ends at ' + Math.round(r.right) + ' px: ' + (el.innerText || '').slice(0, 40));
	}
	return out.slice(0, 6);
})()`

// chromiumPath is the Chromium to run; hack/deps.sh installs it, so its absence fails the test.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("Chromium is not installed: run hack/deps.sh (Debian: apt-get install chromium)")
	return ""
}

// screenshotOnFailure keeps what the page showed when the test failed, in a new temporary
// directory that outlives the test, and logs its path.
func screenshotOnFailure(t *testing.T, ctx context.Context) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		dir, err := os.MkdirTemp("", "codeport-docs-") //nolint:usetesting // it outlives the failed test
		if err != nil {
			t.Logf("no screenshot of the failure: %v", err)
			return
		}
		stepCtx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		png, err := chromedp.Run(stepCtx, chromedp.CaptureScreenshot())
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "failure.png"), png, 0o644)
		}
		if err != nil {
			t.Logf("no screenshot of the failure: %v", err)
			return
		}
		t.Logf("the page when the test failed: %s (set %s to keep every step's)",
			filepath.Join(dir, "failure.png"), artefactsEnv)
	})
}

// newBrowser starts a headless Chromium on a fresh profile, with every flag that keeps it from
// looking anything up on a machine without a network; listen receives the page's events.
func newBrowser(t *testing.T, path string, listen func(ev any)) context.Context {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true))
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithListener(listen))
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The browser starts with the first action on ctx itself: a step's deadline, derived from
	// ctx, would close it when the step ends.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

// browse runs actions in the page, each within a generous deadline for a busy machine.
func browse(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	for _, a := range actions {
		stepCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := chromedp.Do(stepCtx, a)
		cancel()
		if err != nil {
			t.Fatalf("browser: %v", err)
		}
	}
}

func evaluate[T any](t *testing.T, ctx context.Context, script string) T {
	t.Helper()
	stepCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	v, err := chromedp.Run(stepCtx, chromedp.Evaluate[T](script))
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	return v
}

// screenshot saves what shot captures as name in dir, when a directory is asked for.
func screenshot(t *testing.T, ctx context.Context, shot chromedp.Action[[]byte], dir, name string) {
	t.Helper()
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	png, err := chromedp.Run(ctx, shot)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatalf("screenshot: %v", err)
	}
}

// documentedOperations are the operations and webhooks of a document the server serves (v2,
// v1), with the ids the reference page gives their sections (under their first tag).
func documentedOperations(t *testing.T, origin, version string) []docsOperation {
	t.Helper()
	doc := getJSON(t, origin+"/"+version+"/openapi.json", "")
	var ops []docsOperation
	for _, group := range []struct{ key, kind string }{{"paths", ""}, {"webhooks", "webhook/"}} {
		items, _ := doc[group.key].(map[string]any)
		for path, item := range items {
			for method, raw := range item.(map[string]any) {
				op := raw.(map[string]any)
				tags, _ := op["tags"].([]any)
				summary, _ := op["summary"].(string)
				if len(tags) == 0 || summary == "" {
					t.Fatalf("%s %s: no tag or summary", method, path)
				}
				if group.kind != "" {
					// The page makes a slug of a webhook's name.
					path = strings.ReplaceAll(path, "_", "-")
				}
				id := fmt.Sprintf("%s/tag/%s/%s%s/%s", version, strings.ToLower(tags[0].(string)), group.kind,
					strings.ToUpper(method), strings.TrimPrefix(path, "/"))
				if group.kind == "" {
					id = fmt.Sprintf("%s/tag/%s/%s%s", version, strings.ToLower(tags[0].(string)), strings.ToUpper(method), path)
				}
				ops = append(ops, docsOperation{id: id, summary: summary})
			}
		}
	}
	if len(ops) == 0 {
		t.Fatalf("the %s document has no operations", version)
	}
	slices.SortFunc(ops, func(a, b docsOperation) int { return strings.Compare(a.id, b.id) })
	return ops
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func lastTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
