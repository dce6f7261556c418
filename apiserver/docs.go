package apiserver

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/codeport/codeport/apiserver/openapi"
)

// docsRoutes serves the OpenAPI documents and the reference page that renders them, with no key.
// Each environment serves its own variant of the documents: what its server does, no more.
func (s *Server) docsRoutes() {
	app := s.app
	for _, d := range []struct {
		prefix string
		kept   []byte
	}{{"/v2", openapi.V2()}, {"/v1", openapi.V1()}} {
		doc, docErr := openapi.ForEnvironment(d.kept, s.cfg.Environment)
		app.Get(d.prefix+"/openapi.json", refuseEncodedBody, func(c *fiber.Ctx) error {
			if docErr != nil {
				return fmt.Errorf("OpenAPI document of %s: %w", d.prefix, docErr)
			}
			served, err := openapi.WithServers(doc, []openapi.Server{{
				URL:         s.publicBaseURL(c) + d.prefix,
				Description: "This server: the " + s.cfg.Environment + " environment",
			}})
			if err != nil {
				return err
			}
			c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
			return c.Send(served)
		})
	}
	page := openapi.Page()
	app.Get("/docs", refuseEncodedBody, func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
		return c.Send(page)
	})
	// Browsers take the renderer compressed, as it is embedded (1.2 MB instead of 4.3 MB).
	compressed := openapi.RendererGzip()
	app.Get(openapi.RendererPath, refuseEncodedBody, func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderContentType, fiber.MIMETextJavaScriptCharsetUTF8)
		c.Vary(fiber.HeaderAcceptEncoding)
		if acceptsGzip(c.Get(fiber.HeaderAcceptEncoding)) {
			c.Set(fiber.HeaderContentEncoding, "gzip")
			return c.Send(compressed)
		}
		raw, err := openapi.Renderer()
		if err != nil {
			return err
		}
		return c.Send(raw)
	})
}

// acceptsGzip tells whether an Accept-Encoding value admits gzip (named, or *, without q=0).
func acceptsGzip(accept string) bool {
	for coding := range strings.SplitSeq(accept, ",") {
		name, params, _ := strings.Cut(coding, ";")
		name = strings.ToLower(strings.TrimSpace(name))
		if name != "gzip" && name != "x-gzip" && name != "*" {
			continue
		}
		q, found := strings.CutPrefix(strings.ReplaceAll(strings.ToLower(params), " ", ""), "q=")
		weight, err := strconv.ParseFloat(q, 64)
		return !found || err != nil || weight > 0
	}
	return false
}

// publicBaseURL is the scheme and host partners reach this server at: the configured one, else
// the request's, as a configured trusted proxy forwards it (X-Forwarded-Proto, -Host) or as the
// request itself arrived. fiber's own Protocol and Hostname would believe any client's headers.
func (s *Server) publicBaseURL(c *fiber.Ctx) string {
	if s.cfg.PublicBaseURL != "" {
		return strings.TrimSuffix(s.cfg.PublicBaseURL, "/")
	}
	scheme, host := "http", string(c.Request().Host())
	if c.Context().IsTLS() {
		scheme = "https"
	}
	peer, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	if s.trustedProxy(peer.Unmap()) {
		if proto := strings.ToLower(c.Get(fiber.HeaderXForwardedProto)); proto == "http" || proto == "https" {
			scheme = proto
		}
		// The first host a chain of proxies names is the one the client asked for.
		if fwd, _, _ := strings.Cut(c.Get(fiber.HeaderXForwardedHost), ","); strings.TrimSpace(fwd) != "" {
			host = strings.TrimSpace(fwd)
		}
	}
	if host == "" || strings.ContainsAny(host, "/?#@ \\") {
		host = "localhost"
	}
	return scheme + "://" + host
}

// CheckPublicBaseURL refuses a Config.PublicBaseURL that is not a bare http(s) scheme and host.
func CheckPublicBaseURL(base string) error {
	if base == "" {
		return nil
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("want a scheme and host such as https://api.example.com, not %q", base)
	}
	return nil
}

func (s *Server) trustedProxy(peer netip.Addr) bool {
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(peer) {
			return true
		}
	}
	return false
}
