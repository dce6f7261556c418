package apiserver

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
)

// Lifecycle is what the legacy v1 interface announces about its retirement on every answer.
type Lifecycle struct {
	// Deprecation is when v1 was (or will be) deprecated; zero sends no Deprecation header.
	Deprecation time.Time
	// Sunset is when v1 stops answering; zero sends no Sunset header.
	Sunset time.Time
	// Docs is the URL (absolute, or relative to the request) of the migration notes the Link
	// header points at.
	Docs string
}

// DefaultV1Deprecation is the announced deprecation date of v1: v2 is the current interface.
var DefaultV1Deprecation = time.Date(2026, time.December, 1, 0, 0, 0, 0, time.UTC)

// DefaultLifecycleDocs is the v1 section of the API reference the server serves at /docs.
const DefaultLifecycleDocs = "/docs#1.0.0"

// headers renders the announcement once: Deprecation as an RFC 9745 structured-field date
// (@ and Unix seconds), Sunset as an RFC 8594 HTTP-date, and a Link to the docs with the
// relation of each header sent.
func (l Lifecycle) headers() [][2]string {
	var out [][2]string
	var rels []string
	if !l.Deprecation.IsZero() {
		out = append(out, [2]string{"Deprecation", "@" + strconv.FormatInt(l.Deprecation.Unix(), 10)})
		rels = append(rels, "deprecation")
	}
	if !l.Sunset.IsZero() {
		out = append(out, [2]string{"Sunset", l.Sunset.UTC().Format(http.TimeFormat)})
		rels = append(rels, "sunset")
	}
	if len(rels) > 0 && l.Docs != "" {
		links := make([]string, len(rels))
		for i, rel := range rels {
			links[i] = "<" + l.Docs + `>; rel="` + rel + `"; type="text/html"`
		}
		out = append(out, [2]string{fiber.HeaderLink, strings.Join(links, ", ")})
	}
	return out
}

// announceLifecycle sets the lifecycle headers on every answer of the group it guards, errors
// included: set before the rest of the chain runs, they survive whatever answer follows.
func announceLifecycle(l Lifecycle) fiber.Handler {
	headers := l.headers()
	return func(c *fiber.Ctx) error {
		for _, h := range headers {
			c.Set(h[0], h[1])
		}
		return c.Next()
	}
}
