package apiserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

func get(t *testing.T, url string) (int, string, string) {
	t.Helper()
	resp, err := client.Get(url) //nolint:noctx // test request
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
}

// operations lists "METHOD /vN/path" of a served document.
func operations(t *testing.T, base, prefix string) []string {
	t.Helper()
	status, _, body := get(t, base+prefix+"/openapi.json")
	if status != 200 {
		t.Fatalf("%s/openapi.json: %d", prefix, status)
	}
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Fatalf("%s/openapi.json: %v %q", prefix, err, doc.OpenAPI)
	}
	var ops []string
	for path, methods := range doc.Paths {
		for m := range methods {
			ops = append(ops, strings.ToUpper(m)+" "+prefix+path)
		}
	}
	return ops
}

// TestDocsServedWithoutKey: both documents and the reference page are public, and the page shows
// every operation of both documents.
func TestDocsServedWithoutKey(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	base := s.baseURL["production"]
	ops := append(operations(t, base, "/v2"), operations(t, base, "/v1")...)
	// The contract's ten operations, history and statement, webhook events and replay.
	if len(ops) != 14 {
		t.Fatalf("operations: %v", ops)
	}
	status, contentType, page := get(t, base+"/docs")
	if status != 200 || !strings.HasPrefix(contentType, "text/html") {
		t.Fatalf("/docs: %d %s", status, contentType)
	}
	text := regexp.MustCompile(`<[^>]+>`).ReplaceAllString(page, "")
	for _, op := range ops {
		if !strings.Contains(text, op) {
			t.Errorf("/docs does not show %s", op)
		}
	}
	for _, external := range []string{"<script", "src=\"http", "href=\"http"} {
		if strings.Contains(page, external) {
			t.Errorf("/docs uses an external asset or script: %s", external)
		}
	}
}

// TestDocsPageInBrowser loads /docs in headless Chromium: the page renders every operation and
// logs nothing to the console.
func TestDocsPageInBrowser(t *testing.T) {
	browser := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		t.Fatal("Chromium is not installed (Debian: apt-get install chromium; .ci/run installs it)")
	}
	s := newStack(t, stackOptions{noWorker: true})
	base := s.baseURL["production"]
	ops := append(operations(t, base, "/v2"), operations(t, base, "/v1")...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	profile := t.TempDir()
	cmd := exec.CommandContext(ctx, browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir="+profile, "--enable-logging=stderr", "--v=0", "--virtual-time-budget=3000",
		"--dump-dom", base+"/docs")
	cmd.Env = append(os.Environ(), "HOME="+profile)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	text := regexp.MustCompile(`<[^>]+>`).ReplaceAllString(string(dom), "")
	for _, op := range ops {
		if !strings.Contains(text, op) {
			t.Errorf("the rendered page does not show %s", op)
		}
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, "CONSOLE") || strings.Contains(line, "Uncaught") {
			t.Errorf("console output: %s", line)
		}
	}
	if code, _, _ := get(t, base+"/docs"); code != http.StatusOK {
		t.Fatal(code)
	}
}
