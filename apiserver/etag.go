package apiserver

import (
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
	"github.com/gofiber/fiber/v2"
)

// withETag makes a read conditional: its 200 answer carries a strong ETag computed from the exact
// body bytes, so the tag changes whenever the body would (a catalog change, another partner's
// prices, another page or filter), and a request whose If-None-Match matches the tag gets 304
// with no body, its headers (rate limits, ETag) as the 200 would have them.
func withETag(h fiber.Handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if err := h(c); err != nil {
			return err
		}
		resp := c.Response()
		if resp.StatusCode() != fiber.StatusOK {
			return nil
		}
		var buf [etagSize]byte
		tag := appendETag(buf[:0], resp.Body())
		resp.Header.SetBytesV(fiber.HeaderETag, tag)
		if noneMatch := c.Get(fiber.HeaderIfNoneMatch); noneMatch != "" && ifNoneMatchMatches(noneMatch, string(tag)) {
			resp.SetStatusCode(fiber.StatusNotModified)
			resp.ResetBody()
		}
		return nil
	}
}

// etagSize is the longest tag appendETag writes: a 64-bit hash in base 36 (13 digits), quoted.
const etagSize = 15

// appendETag appends the strong entity tag of body to dst: a 64-bit hash is ample to tell a
// partner's successive versions of one resource apart, and costs microseconds on a catalog
// page. Every read answer is tagged, so the tag is built where the caller says, not on the heap.
func appendETag(dst, body []byte) []byte {
	dst = append(dst, '"')
	dst = strconv.AppendUint(dst, xxhash.Sum64(body), 36)
	return append(dst, '"')
}

// ifNoneMatchMatches says whether an If-None-Match field value matches the current
// representation's strong tag, by RFC 9110 §13.1.2: "*" matches any current representation;
// otherwise a comma-separated list of entity tags matches when one of them, compared weakly
// (a W/ prefix on either side ignored), equals the tag. A malformed value matches nothing, so
// the client gets the full answer.
func ifNoneMatchMatches(value, tag string) bool {
	value = strings.TrimSpace(value)
	if value == "*" {
		return true
	}
	opaque := strings.TrimPrefix(tag, "W/")
	for value != "" {
		value = strings.TrimLeft(value, " \t,")
		if value == "" {
			break
		}
		candidate := strings.TrimPrefix(value, "W/")
		if !strings.HasPrefix(candidate, `"`) {
			return false
		}
		end := strings.IndexByte(candidate[1:], '"')
		if end < 0 {
			return false
		}
		rest := strings.TrimLeft(candidate[end+2:], " \t")
		if rest != "" && rest[0] != ',' {
			return false
		}
		if candidate[:end+2] == opaque {
			return true
		}
		value = rest
	}
	return false
}
