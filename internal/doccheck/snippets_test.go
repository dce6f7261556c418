package doccheck

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codeport/codeport/internal/notify"
)

// repoRoot is the repository's top directory, seen from this package.
const repoRoot = "../.."

// codeBlocks returns the fenced code blocks of a Markdown file by their info string.
func codeBlocks(t *testing.T, path string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	blocks := map[string][]string{}
	var lang string
	var body strings.Builder
	inside := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		fence, isFence := strings.CutPrefix(strings.TrimSpace(line), "```")
		switch {
		case isFence && !inside:
			inside, lang = true, strings.TrimSpace(fence)
			body.Reset()
		case isFence && inside:
			inside = false
			blocks[lang] = append(blocks[lang], body.String())
		case inside:
			body.WriteString(line)
			body.WriteString("\n")
		}
	}
	return blocks
}

// snippet is how to run one language's verification snippet from docs/guide.md: a harness
// passes it the request from the environment (WEBHOOK_SECRET, WEBHOOK_ID, WEBHOOK_TIMESTAMP,
// WEBHOOK_SIGNATURE) and the body on stdin, and prints "accepted" or "rejected".
type snippet struct {
	lang, tool string
	// prepare writes the snippet and its harness into dir and returns the command that runs it.
	prepare func(t *testing.T, ctx context.Context, tool, dir, code string) []string
}

var snippets = []snippet{
	{lang: "go", tool: "go", prepare: prepareGo},
	{lang: "python", tool: "python3", prepare: func(t *testing.T, _ context.Context, tool, dir, code string) []string {
		t.Helper()
		return []string{tool, write(t, dir, "verify.py", code+`

import os, sys
headers = {n: os.environ[n.upper().replace("-", "_")] for n in ("webhook-id", "webhook-timestamp", "webhook-signature")}
print("accepted" if verify_webhook(os.environ["WEBHOOK_SECRET"], headers, sys.stdin.buffer.read()) else "rejected")
`)}
	}},
	{lang: "javascript", tool: "node", prepare: func(t *testing.T, _ context.Context, tool, dir, code string) []string {
		t.Helper()
		return []string{tool, write(t, dir, "verify.js", code+`
const headers = {};
for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
  headers[name] = process.env[name.toUpperCase().replaceAll("-", "_")];
}
const body = require("node:fs").readFileSync(0);
console.log(verifyWebhook(process.env.WEBHOOK_SECRET, headers, body) ? "accepted" : "rejected");
`)}
	}},
}

// prepareGo builds the Go snippet with a main package around it, once, and runs the binary.
func prepareGo(t *testing.T, ctx context.Context, tool, dir, code string) []string {
	t.Helper()
	write(t, dir, "go.mod", "module webhooksnippet\n\ngo 1.22\n")
	write(t, dir, "verify.go", "package main\n\n"+code)
	write(t, dir, "main.go", `package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	body, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Println("read body:", err)
		os.Exit(2)
	}
	header := http.Header{}
	for _, name := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
		header.Set(name, os.Getenv(strings.ToUpper(strings.ReplaceAll(name, "-", "_"))))
	}
	if VerifyWebhook(os.Getenv("WEBHOOK_SECRET"), header, body, time.Now()) {
		fmt.Println("accepted")
	} else {
		fmt.Println("rejected")
	}
}
`)
	bin := filepath.Join(dir, "verify")
	cmd := exec.CommandContext(ctx, tool, "build", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the guide's Go snippet does not build: %v\n%s", err, out)
	}
	return []string{bin}
}

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestWebhookSnippetsVerifyCodeportSignatures runs the guide's Go, Python and Node snippets on
// requests signed by notify.Sign, the signing code of the deliveries: they must accept a
// genuine request and reject a tampered, stale or wrongly keyed one. The interpreters are
// required, not optional: a snippet nobody ran is a snippet that may not work.
func TestWebhookSnippetsVerifyCodeportSignatures(t *testing.T) {
	blocks := codeBlocks(t, filepath.Join(repoRoot, "docs", "guide.md"))
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	secret := "whsec_" + base64.StdEncoding.EncodeToString(raw)
	body := []byte(`{"id":"evt_1","type":"order.completed","environment":"sandbox",` +
		`"createdAt":"2026-11-25T08:00:00.000Z","data":{"orderId":"0193","externalOrderCode":"shop-1","status":"completed"}}`)
	now := time.Now().Unix()
	sign := func(id string, at int64, payload []byte) string { return notify.Sign([]byte(secret), id, at, payload) }
	tampered := bytes.Replace(body, []byte("completed"), []byte("failed"), 1)
	otherSecret := "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 24))

	type request struct {
		name, secret, id string
		timestamp        int64
		signature        string
		body             []byte
		want             string
	}
	requests := []request{
		{"genuine", secret, "msg_1", now, sign("msg_1", now, body), body, "accepted"},
		{"one of several signatures", secret, "msg_1", now, "v1,AAAA " + sign("msg_1", now, body), body, "accepted"},
		{"body changed", secret, "msg_1", now, sign("msg_1", now, body), tampered, "rejected"},
		{"id changed", secret, "msg_2", now, sign("msg_1", now, body), body, "rejected"},
		{"signed with another secret", otherSecret, "msg_1", now, sign("msg_1", now, body), body, "rejected"},
		{"ten minutes old", secret, "msg_1", now - 600, sign("msg_1", now-600, body), body, "rejected"},
	}
	for _, s := range snippets {
		t.Run(s.lang, func(t *testing.T) {
			code := blocks[s.lang]
			if len(code) != 1 {
				t.Fatalf("docs/guide.md has %d %s code blocks; want the one verification snippet", len(code), s.lang)
			}
			tool, err := exec.LookPath(s.tool)
			if err != nil {
				t.Fatalf("%s is not installed: the guide's %s snippet cannot be checked without it (hack/deps.sh installs it): %v",
					s.tool, s.lang, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			argv := s.prepare(t, ctx, tool, t.TempDir(), code[0])
			for _, r := range requests {
				cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
				cmd.Stdin = bytes.NewReader(r.body)
				cmd.Env = append(os.Environ(), "WEBHOOK_SECRET="+r.secret, "WEBHOOK_ID="+r.id,
					"WEBHOOK_TIMESTAMP="+strconv.FormatInt(r.timestamp, 10), "WEBHOOK_SIGNATURE="+r.signature)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if got := strings.TrimSpace(string(out)); err != nil || got != r.want {
					t.Errorf("%s request: the snippet said %q (err %v), want %q\n%s", r.name, got, err, r.want,
						stderr.String())
				}
			}
		})
	}
}
