package apiserver

import (
	"bytes"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/codeport/codeport/apiserver/apierror"
)

// refuseEncodedBody answers 415 to a request whose Content-Encoding names any coding but
// identity. Fiber's Ctx.Body decodes gzip, deflate and br (stacked, too) on the fly, with no
// bound on the decoded size: the body limit counts the bytes on the wire, so a few hundred bytes
// could inflate to megabytes in memory before any check. No client of the API needs to compress
// its small JSON bodies, so none are decoded: limits then hold on what is processed. It runs
// before any handler reads the body, and in the API after the key check, so that a request
// without a valid key is refused for that first.
func refuseEncodedBody(c *fiber.Ctx) error {
	header := &c.Request().Header
	values := header.PeekAll(fiber.HeaderContentEncoding)
	if len(values) == 0 {
		return c.Next()
	}
	for _, value := range values {
		if coding, ok := contentCoding(value); !ok {
			return apierror.UnsupportedContentEncoding(coding)
		}
	}
	// Only identity is left, which means no coding: without the header, Ctx.Body returns the
	// body as sent (given "identity, identity", it would return none).
	header.Del(fiber.HeaderContentEncoding)
	return c.Next()
}

// maxNamedCoding is the longest coding an answer repeats; longer ones are not named.
const maxNamedCoding = 32

// contentCoding reads one Content-Encoding header value (a comma-separated list of codings). ok
// is true when every coding is identity (or the list is empty); otherwise coding is the first
// other one, or "" when it is not an HTTP token short enough to repeat in the answer.
func contentCoding(value []byte) (coding string, ok bool) {
	for len(value) > 0 {
		var item []byte
		item, value, _ = bytes.Cut(value, []byte(","))
		item = bytes.TrimSpace(item)
		if len(item) == 0 || bytes.EqualFold(item, []byte("identity")) {
			continue
		}
		if len(item) > maxNamedCoding || !isToken(item) {
			return "", false
		}
		return string(item), false
	}
	return "", true
}

// isToken says whether b is an HTTP token (RFC 9110, section 5.6.2): what a coding's name is,
// and safe to show as it is.
func isToken(b []byte) bool {
	for _, c := range b {
		alphanumeric := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alphanumeric && strings.IndexByte("!#$%&'*+-.^_`|~", c) < 0 {
			return false
		}
	}
	return true
}
