package apiserver_test

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
)

func ifNoneMatch(tags string) http.Header { return http.Header{"If-None-Match": {tags}} }

// TestConditionalCatalogReads: catalog reads (v2 and v1) carry a strong ETag; a request whose
// If-None-Match matches it, by RFC 9110's weak comparison, gets 304 with no body and the same
// ETag and rate-limit headers; anything else gets the full 200.
func TestConditionalCatalogReads(t *testing.T) {
	s := newStack(t, stackOptions{})
	tn := s.onboard(t, "acme", nil)
	bearer := "Bearer " + tn.keys["bearer:production"]
	tags := map[string]string{}
	for _, c := range []struct{ path, key string }{
		{"/v2/catalog/products", tn.keys["production"]},
		{"/v2/catalog/products?take=2&skip=1", tn.keys["production"]},
		{"/v2/catalog/products/10000000000001", tn.keys["production"]},
		{"/v1/catalog", bearer},
		{"/v1/catalog/products", bearer},
		{"/v1/catalog/product?ean=5901234123457", bearer},
	} {
		full := s.call(t, "production", "GET", c.path, c.key, nil)
		tag := full.header.Get("ETag")
		if full.status != 200 || len(tag) < 3 || tag[0] != '"' || tag[len(tag)-1] != '"' {
			t.Fatalf("%s: %d, ETag %q", c.path, full.status, tag)
		}
		if other, seen := tags[tag]; seen {
			t.Fatalf("%s and %s share the ETag %s", c.path, other, tag)
		}
		tags[tag] = c.path
		for _, match := range []string{tag, "W/" + tag, `"stale", ` + tag, `W/"stale",W/` + tag, "*"} {
			r := s.callWith(t, "production", "GET", c.path, c.key, nil, ifNoneMatch(match))
			if r.status != 304 || len(r.raw) != 0 || r.header.Get("ETag") != tag {
				t.Fatalf("%s If-None-Match %s: %d, ETag %q, %d bytes", c.path, match, r.status, r.header.Get("ETag"), len(r.raw))
			}
			if c.key != bearer && r.header.Get("X-RateLimit-Remaining") == "" {
				t.Fatalf("%s: 304 without rate-limit headers", c.path)
			}
		}
		for _, miss := range []string{`"stale"`, tag[1 : len(tag)-1], `"stale" ` + tag} {
			r := s.callWith(t, "production", "GET", c.path, c.key, nil, ifNoneMatch(miss))
			if r.status != 200 || !bytes.Equal(r.raw, full.raw) || r.header.Get("ETag") != tag {
				t.Fatalf("%s If-None-Match %s: %d, ETag %q", c.path, miss, r.status, r.header.Get("ETag"))
			}
		}
	}
	// An error is not tagged.
	r := s.call(t, "production", "GET", "/v2/catalog/products/10000000000099", tn.keys["production"], nil)
	if r.status != 404 || r.header.Get("ETag") != "" {
		t.Fatalf("404: %d, ETag %q", r.status, r.header.Get("ETag"))
	}
}

// TestETagFollowsCatalogChanges: a catalog change through provisioning gives the changed reads a
// new ETag, so a client's stale tag gets the new body; partners with other prices get other tags.
func TestETagFollowsCatalogChanges(t *testing.T) {
	s := newStack(t, stackOptions{})
	acme, other := s.onboard(t, "acme", nil), s.onboard(t, "other", nil)
	key := acme.keys["production"]
	const product = "/v2/catalog/products/10000000000001"
	listTag := s.call(t, "production", "GET", "/v2/catalog/products", key, nil).header.Get("ETag")
	productTag := s.call(t, "production", "GET", product, key, nil).header.Get("ETag")
	otherList := s.call(t, "production", "GET", "/v2/catalog/products", other.keys["production"], nil)
	if otherList.header.Get("ETag") != listTag {
		t.Fatal("two partners with the same catalog and prices got different tags")
	}

	// The other partner moves to a catalog with a larger discount: other buying prices.
	c, products := testCatalog(acme.namespace)
	c.Name, c.Spec.DefaultDiscountPercentage = "eu-partner", "10"
	res, err := s.prov.ApplyCatalog(t.Context(), c, products)
	if err != nil || len(res.Invalid) > 0 {
		t.Fatalf("catalog: %v %v", err, res.Invalid)
	}
	s.moveToCatalog(t, other, c.Name, res.ID)
	poll.UntilTrue(t, 10*time.Second, "the other partner's prices served", func() bool {
		r := s.call(t, "production", "GET", "/v2/catalog/products", other.keys["production"], nil)
		return r.status == 200 && r.header.Get("ETag") != listTag
	})

	// A price change of one product.
	c, products = testCatalog(acme.namespace)
	products[0].Price = ptr(int64(2100))
	if res, err := s.prov.ApplyCatalog(t.Context(), c, products); err != nil || len(res.Invalid) > 0 {
		t.Fatalf("catalog: %v %v", err, res.Invalid)
	}
	poll.UntilTrue(t, 10*time.Second, "the stale product tag answered in full", func() bool {
		r := s.callWith(t, "production", "GET", product, key, nil, ifNoneMatch(productTag))
		return r.status == 200 && r.header.Get("ETag") != productTag && len(r.raw) > 0
	})
	if r := s.callWith(t, "production", "GET", "/v2/catalog/products", key, nil, ifNoneMatch(listTag)); r.status != 200 {
		t.Fatalf("list with the stale tag: %d", r.status)
	}
}

// moveToCatalog points a tenant at another catalog, as the operator does when a Partner's
// catalogRef changes.
func (s *stack) moveToCatalog(t *testing.T, tn *tenant, name string, id uuid.UUID) {
	t.Helper()
	p := partnerOf(tn.namespace, tn.name, testfixture.WithCatalogRef(name))
	if _, err := s.prov.ApplyPartner(t.Context(), p, &id, nil); err != nil {
		t.Fatal(err)
	}
}
