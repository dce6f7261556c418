package kubectlplugin

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
)

// readBundle reads a bundle WriteReport wrote: each file's content by its name in the archive.
func readBundle(r io.Reader) (map[string][]byte, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	tr := tar.NewReader(gz)
	files := map[string][]byte{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("bundle: %w", err)
		}
		if files[hdr.Name], err = io.ReadAll(tr); err != nil {
			return nil, fmt.Errorf("bundle %s: %w", hdr.Name, err)
		}
	}
}
