// Package client is the Go client of codeport's partner API (/v2). client.gen.go is generated
// by oapi-codegen from the API's OpenAPI document (apiserver/openapi/v2.json, served at
// /v2/openapi.json) with the configuration in oapi-codegen.yaml: `make generate` regenerates it,
// and it is not edited by hand. This file is not generated.
//
// A client takes the base URL of one environment, which ends in /v2, and that environment's key:
//
//	c, err := client.NewClientWithResponses("https://sandbox.example/v2", client.WithAPIKey(key))
//	if err != nil { ... }
//	resp, err := c.GetOrderWithResponse(ctx, "po-1001", nil)
//	if err != nil { ... }                 // the request did not get an answer
//	switch resp.StatusCode() {
//	case http.StatusOK:                   // resp.JSON200 is the order
//	case http.StatusNotFound:             // resp.JSON404 is the error body
//	}
//
// docs/clients.md says more, and what of the document the generator does not render.
package client

import (
	"context"
	"net/http"
)

// WithAPIKey sends key in the x-api-key header of every request, as the API authenticates
// partners: a sandbox key (cp_test_) on the sandbox base URL, a production key (cp_live_) on
// production's.
func WithAPIKey(key string) ClientOption {
	return WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.Header.Set("x-api-key", key)
		return nil
	})
}
