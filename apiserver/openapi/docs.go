package openapi

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"io"
)

// page is the reference page: it loads the embedded renderer and points it at both documents,
// which the server that served the page also serves.
//
//go:embed page.html
var page []byte

// Page returns the HTML of /docs.
func Page() []byte { return append([]byte(nil), page...) }

// RendererPath is where the page expects the renderer's script.
const RendererPath = "/docs/scalar.js"

// renderer is Scalar's standalone API reference bundle, gzip-compressed as browsers take it;
// ui/scalar.lock records which release it is (hack/openapi/scalar.sh keeps both).
//
//go:embed ui/scalar.js.gz
var renderer []byte

// RendererGzip returns the renderer's script, gzip-compressed.
func RendererGzip() []byte { return append([]byte(nil), renderer...) }

// Renderer returns the renderer's script uncompressed, for the rare client that takes no gzip.
func Renderer() ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(renderer))
	if err != nil {
		return nil, fmt.Errorf("open embedded renderer: %w", err)
	}
	defer zr.Close()
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("read embedded renderer: %w", err)
	}
	return raw, nil
}
