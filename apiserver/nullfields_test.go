package apiserver_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// nullField is one field of the order body sent as JSON null, and the answer.
type nullField struct {
	// field names it as the document's schemas do: "orderProducts[].quantity", "metadata.{key}".
	field   string
	body    string
	message string
}

// nullFieldMessage is the refusal of null in a field that is not required.
func nullFieldMessage(field string) string {
	return field + " must not be null; omit the field to leave it unset"
}

// orderWith is a valid order body of the test catalog with one member set to raw JSON: a member
// of the order or, with line, of its line; raw "" leaves it out, a key it does not have is added.
func orderWith(line bool, key, raw string) string {
	order := []string{`"externalOrderCode":"null-check"`, `"currency":"EUR"`, `"price":2000`,
		`"orderProducts":[LINE]`, `"metadata":{"key":"v"}`}
	item := []string{`"productCode":"10000000000001"`, `"quantity":1`, `"price":2000`, `"currency":"EUR"`,
		`"sku":"DE-EN-10000000000001"`}
	if line {
		item = withMember(item, key, raw)
	} else {
		order = withMember(order, key, raw)
	}
	return strings.Replace("{"+strings.Join(order, ",")+"}", "LINE", "{"+strings.Join(item, ",")+"}", 1)
}

func withMember(members []string, key, raw string) []string {
	for i, m := range members {
		if strings.HasPrefix(m, `"`+key+`":`) {
			if raw == "" {
				return slices.Delete(members, i, i+1)
			}
			members[i] = `"` + key + `":` + raw
			return members
		}
	}
	if raw == "" {
		return members
	}
	return append(members, `"`+key+`":`+raw)
}

// nullFields is every field of the order body sent as null. A required field's null is the field
// missing; any other field's null is refused too, with its own message where the contract has
// one (metadata) and otherwise by name.
var nullFields = []nullField{
	{"externalOrderCode", orderWith(false, "externalOrderCode", "null"), "externalOrderCode is required"},
	{"currency", orderWith(false, "currency", "null"), "currency is required"},
	{"price", orderWith(false, "price", "null"), nullFieldMessage("price")},
	{"orderProducts", orderWith(false, "orderProducts", "null"), "orderProducts must not be empty"},
	{"orderProducts[]", orderWith(false, "orderProducts", "[null]"), invalidLineMessage},
	{"metadata", orderWith(false, "metadata", "null"), "metadata must be an object of string keys and string values"},
	{"metadata.{key}", orderWith(false, "metadata", `{"key":null}`), `metadata value of key "key" must be a string`},
	{"orderProducts[].productCode", orderWith(true, "productCode", "null"), invalidLineMessage},
	{"orderProducts[].productCode", strings.Replace(orderWith(true, "productCode", "null"), `"quantity"`,
		`"productId":"10000000000001","quantity"`, 1), invalidLineMessage},
	{"orderProducts[].productId", orderWith(true, "productId", "null"), invalidLineMessage},
	{"orderProducts[].quantity", orderWith(true, "quantity", "null"), invalidLineMessage},
	{"orderProducts[].price", orderWith(true, "price", "null"), nullFieldMessage("orderProducts[0].price")},
	{"orderProducts[].currency", orderWith(true, "currency", "null"), nullFieldMessage("orderProducts[0].currency")},
	{"orderProducts[].sku", orderWith(true, "sku", "null"), nullFieldMessage("orderProducts[0].sku")},
}

const invalidLineMessage = "Each line requires a productCode and a quantity of at least 1"

// TestNullOrderFields sends every field of the order body as null, in both environments, and
// checks the refusal.
func TestNullOrderFields(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	tn := s.onboard(t, "acme", nil)
	// The body as it stands is an order: each refusal is the null's.
	for _, env := range []string{"sandbox", "production"} {
		if r := s.call(t, env, "POST", "/v2/orders", tn.keys[env], orderWith(false, "", "")); r.status != 422 {
			t.Fatalf("%s: the valid body answered %d, want 422 (an empty wallet): %s", env, r.status, r.raw)
		}
		for _, tc := range nullFields {
			t.Run(env+" "+tc.field, func(t *testing.T) {
				expectError(t, s.call(t, env, "POST", "/v2/orders", tn.keys[env], tc.body), 400, tc.message)
			})
		}
	}
}

// TestEveryOrderFieldIsSentNull keeps nullFields complete: every field of the order body the
// document describes is sent null there. The document agrees that none takes null: no field's
// schema admits it.
func TestEveryOrderFieldIsSentNull(t *testing.T) {
	schemas := map[string]*openapi3.Schema{}
	order := documents(t)["/v2"].Components.Schemas["PlaceOrder"].Value
	for name, prop := range order.Properties {
		schemas[name] = prop.Value
		switch name {
		case "metadata":
			schemas["metadata.{key}"] = prop.Value.AdditionalProperties.Schema.Value
		case "orderProducts":
			schemas["orderProducts[]"] = prop.Value.Items.Value
			for line, lineProp := range prop.Value.Items.Value.Properties {
				schemas["orderProducts[]."+line] = lineProp.Value
			}
		}
	}
	documented := map[string]bool{}
	for field, schema := range schemas {
		documented[field] = true
		if err := schema.VisitJSON(nil); err == nil {
			t.Errorf("the document's schema of %s admits null, which the server refuses", field)
		}
	}
	tested := map[string]bool{}
	for _, tc := range nullFields {
		tested[tc.field] = true
	}
	compare(t, "order body field", documented, tested)
}
