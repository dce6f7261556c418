package doccheck

import (
	"bufio"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// readmeLimit keeps README.md a front door: what codeport is, how to run and test it, a tour
// and links. Reference material belongs in docs/.
const readmeLimit = 15_000

// upstreams are the places outside the repository that its documents may link to, as a host
// and an optional path prefix: projects codeport builds on, and the local API of `codeport dev`.
// A whole code-hosting site is never an upstream, only a project on it.
var upstreams = []string{"127.0.0.1", "localhost", "cloudnative-pg.io", "github.com/scalar/scalar"}

var (
	inlineLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	autoLink   = regexp.MustCompile(`<(https?://[^>\s]+)>`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
)

// markdownFiles are README.md, CONTRIBUTING.md and every Markdown file under docs/.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files := []string{filepath.Join(repoRoot, "README.md"), filepath.Join(repoRoot, "CONTRIBUTING.md")}
	err := filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatalf("list docs: %v", err)
	}
	return files
}

// document is what the link check needs of a Markdown file: its links and its anchors.
type document struct {
	links   []string
	anchors []string
}

// parse reads a Markdown file's links (outside code) and the anchors its headings get, as
// GitHub names them.
func parse(path string) (document, error) {
	f, err := os.Open(path)
	if err != nil {
		return document{}, err
	}
	defer func() { _ = f.Close() }()
	var doc document
	seen := map[string]int{}
	fenced := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if heading, ok := headingText(line); ok {
			anchor := slug(heading)
			if n := seen[anchor]; n > 0 {
				doc.anchors = append(doc.anchors, fmt.Sprintf("%s-%d", anchor, n))
			} else {
				doc.anchors = append(doc.anchors, anchor)
			}
			seen[anchor]++
		}
		text := codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
			doc.links = append(doc.links, m[1])
		}
		for _, m := range autoLink.FindAllStringSubmatch(text, -1) {
			doc.links = append(doc.links, m[1])
		}
	}
	return doc, sc.Err()
}

// headingText is the text of an ATX heading line.
func headingText(line string) (string, bool) {
	trimmed := strings.TrimLeft(line, "#")
	level := len(line) - len(trimmed)
	if level == 0 || level > 6 || !strings.HasPrefix(trimmed, " ") {
		return "", false
	}
	return strings.TrimSpace(trimmed), true
}

// slug is GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// TestLinksResolve: every link of README.md, CONTRIBUTING.md and docs/ reaches a file or directory of the
// repository (and, for a Markdown file, a heading when it names one), or an upstream site.
func TestLinksResolve(t *testing.T) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	parsed := map[string]document{}
	read := func(path string) document {
		if doc, ok := parsed[path]; ok {
			return doc
		}
		doc, err := parse(path)
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		parsed[path] = doc
		return doc
	}
	checked := 0
	for _, file := range markdownFiles(t) {
		from, err := filepath.Abs(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, from)
		for _, link := range read(from).links {
			checked++
			if problem := checkLink(root, from, link, read); problem != "" {
				t.Errorf("%s: link %s %s", rel, link, problem)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d links found: the parser missed them", checked)
	}
}

// checkLink says what is wrong with a link of the file from, or "".
func checkLink(root, from, link string, read func(string) document) string {
	u, err := url.Parse(link)
	if err != nil {
		return "is not a URL"
	}
	if u.Scheme != "" {
		if !slices.ContainsFunc(upstreams, func(up string) bool { return isUnder(u, up) }) {
			return "leaves the repository for a site that is not an upstream project of codeport"
		}
		return ""
	}
	target := from
	if u.Path != "" {
		target = filepath.Join(filepath.Dir(from), filepath.FromSlash(u.Path))
	}
	if inside, err := filepath.Rel(root, target); err != nil || strings.HasPrefix(inside, "..") {
		return "points outside the repository"
	}
	info, err := os.Stat(target)
	if err != nil {
		return "names no file of the repository"
	}
	if u.Fragment == "" {
		return ""
	}
	if info.IsDir() || !strings.HasSuffix(target, ".md") {
		return "has an anchor on something that is not a Markdown file"
	}
	if !slices.Contains(read(target).anchors, u.Fragment) {
		return "names no heading of " + filepath.Base(target)
	}
	return ""
}

// TestReadmeIsAFrontDoor bounds README.md's size.
func TestReadmeIsAFrontDoor(t *testing.T) {
	info, err := os.Stat(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Size() > readmeLimit {
		t.Errorf("README.md is %d bytes, more than %d: move reference material into docs/ and link it",
			info.Size(), readmeLimit)
	}
}

// isUnder reports whether u is the upstream up (a host, or a host and a path prefix) or below it.
func isUnder(u *url.URL, up string) bool {
	host, prefix, _ := strings.Cut(up, "/")
	if u.Hostname() != host {
		return false
	}
	path := strings.Trim(u.Path, "/")
	return prefix == "" || path == prefix || strings.HasPrefix(path, prefix+"/")
}
