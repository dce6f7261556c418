package apiserver

import (
	"testing"

	"github.com/gofiber/fiber/v2"
)

func TestMethodTable(t *testing.T) {
	routes := []fiber.Route{
		{Method: fiber.MethodHead, Path: "/v2/orders/:reference"},
		{Method: fiber.MethodGet, Path: "/v2/orders/:reference"},
		{Method: fiber.MethodPost, Path: "/v2/orders"},
		{Method: fiber.MethodGet, Path: "/v2/catalog/products"},
		{Method: fiber.MethodGet, Path: "/v2/catalog/products"},
		{Method: fiber.MethodGet, Path: "/v2/catalog/products/:productCode"},
	}
	table := newMethodTable(routes, fiber.DefaultMethods)
	cases := []struct{ path, want string }{
		{"/v2/orders/abc", "GET, HEAD"},
		{"/v2/orders/abc/", "GET, HEAD"},
		{"/V2/ORDERS/abc", "GET, HEAD"},
		{"/v2/orders", "POST"},
		{"/v2/orders/", "POST"},
		{"/v2/catalog/products", "GET"},
		{"/v2/catalog/products/123", "GET"},
		{"/v2/orders/abc/def", ""},
		{"/v2", ""},
		{"/", ""},
		{"", ""},
		{"/v3/orders", ""},
	}
	for _, tc := range cases {
		if got := table.allow(tc.path); got != tc.want {
			t.Errorf("allow(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}
