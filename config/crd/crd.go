package crd

import (
	"embed"
	"fmt"
	"io/fs"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed bases/*.yaml
var bases embed.FS

// Definitions parses every CRD of bases/, in file name order.
func Definitions() ([]apiextensionsv1.CustomResourceDefinition, error) {
	files, err := fs.Glob(bases, "bases/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("list embedded CRDs: %w", err)
	}
	crds := make([]apiextensionsv1.CustomResourceDefinition, 0, len(files))
	for _, file := range files {
		raw, err := bases.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("read embedded CRD %s: %w", file, err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
			return nil, fmt.Errorf("parse embedded CRD %s: %w", file, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}
