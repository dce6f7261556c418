package devenv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/codeport/codeport/api/v1alpha1"
)

// Manifests are the resources `codeport dev` provisions, as a cluster would hold them.
type Manifests struct {
	Partners   []v1alpha1.Partner
	Catalogs   []v1alpha1.Catalog
	ApiKeys    []v1alpha1.ApiKey //nolint:revive // the kind is named ApiKey
	Wallets    []v1alpha1.Wallet
	ConfigMaps []corev1.ConfigMap
	Secrets    []corev1.Secret
	// Skipped lists documents of other kinds, by file.
	Skipped []string
}

// LoadManifests reads every .yaml/.yml/.json file of dir (not recursively), multi-document
// YAML included. Documents without a kind (kustomization.yaml) are ignored; other kinds are
// reported in Skipped.
func LoadManifests(dir string) (*Manifests, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read manifests: %w", err)
	}
	var files []string
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if !e.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(files)
	m := &Manifests{}
	for _, f := range files {
		if err := m.loadFile(f); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Manifests) loadFile(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		if err := m.add(path, doc); err != nil {
			return err
		}
	}
}

func (m *Manifests) add(path string, doc []byte) error {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	strict := func(into any) error {
		if err := yaml.UnmarshalStrict(doc, into); err != nil {
			return fmt.Errorf("%s: %s: %w", path, meta.Kind, err)
		}
		return nil
	}
	group := strings.SplitN(meta.APIVersion, "/", 2)[0]
	switch {
	case meta.Kind == "" || group == "kustomize.config.k8s.io":
		// kustomization.yaml sits beside the manifests; it is not a resource.
		return nil
	case group == v1alpha1.GroupVersion.Group && meta.Kind == "Partner":
		var o v1alpha1.Partner
		if err := strict(&o); err != nil {
			return err
		}
		m.Partners = append(m.Partners, o)
	case group == v1alpha1.GroupVersion.Group && meta.Kind == "Catalog":
		var o v1alpha1.Catalog
		if err := strict(&o); err != nil {
			return err
		}
		m.Catalogs = append(m.Catalogs, o)
	case group == v1alpha1.GroupVersion.Group && meta.Kind == "ApiKey":
		var o v1alpha1.ApiKey
		if err := strict(&o); err != nil {
			return err
		}
		m.ApiKeys = append(m.ApiKeys, o)
	case group == v1alpha1.GroupVersion.Group && meta.Kind == "Wallet":
		var o v1alpha1.Wallet
		if err := strict(&o); err != nil {
			return err
		}
		m.Wallets = append(m.Wallets, o)
	case meta.APIVersion == "v1" && meta.Kind == "ConfigMap":
		var o corev1.ConfigMap
		if err := strict(&o); err != nil {
			return err
		}
		m.ConfigMaps = append(m.ConfigMaps, o)
	case meta.APIVersion == "v1" && meta.Kind == "Secret":
		var o corev1.Secret
		if err := strict(&o); err != nil {
			return err
		}
		for k, v := range o.StringData {
			if o.Data == nil {
				o.Data = map[string][]byte{}
			}
			o.Data[k] = []byte(v)
		}
		m.Secrets = append(m.Secrets, o)
	default:
		m.Skipped = append(m.Skipped, fmt.Sprintf("%s: %s %s", filepath.Base(path), meta.APIVersion, meta.Kind))
	}
	return nil
}
