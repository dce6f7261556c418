package devenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/config/crd"
	"github.com/codeport/codeport/internal/crdvalidation"
)

// Manifests are the resources `codeport dev` provisions, as a cluster would hold them.
type Manifests struct {
	Partners   []v1alpha1.Partner
	Catalogs   []v1alpha1.Catalog
	Shards     []v1alpha1.CatalogShard
	APIKeys    []v1alpha1.ApiKey
	Wallets    []v1alpha1.Wallet
	TopUps     []v1alpha1.WalletTopUp
	ConfigMaps []corev1.ConfigMap
	Secrets    []corev1.Secret
	// Skipped lists documents of other kinds, by file.
	Skipped []string
}

// LoadManifests reads every .yaml/.yml/.json file of dir (not recursively), multi-document
// YAML included. Documents without a kind (kustomization.yaml) are ignored; other kinds are
// reported in Skipped.
//
// Documents of the API groups of the CRDs (config/crd) are admitted as the cluster admits them on
// `kubectl apply` (crdvalidation) and kept as it would store them, defaults applied. When the
// cluster would refuse any, the error reports each, as a *DocumentError, in kubectl's words; a
// document without a namespace is in "default", as kubectl without --namespace puts it.
//
// With a stateDir, the admitted objects are kept there (admittedObjects), and a later load admits
// a manifest of one of them as an update, as a cluster holding it would.
func LoadManifests(ctx context.Context, dir, stateDir string) (*Manifests, error) {
	crds, err := crd.Definitions()
	if err != nil {
		return nil, err
	}
	validator, err := crdvalidation.New(crds)
	if err != nil {
		return nil, fmt.Errorf("prepare CRD validation: %w", err)
	}
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
	l := &loader{validator: validator, manifests: &Manifests{}, admitted: map[string]*unstructured.Unstructured{}}
	if stateDir != "" {
		l.earlier = admittedObjects{dir: filepath.Join(stateDir, "admitted")}
	}
	for _, f := range files {
		if err := l.loadFile(ctx, f); err != nil {
			return nil, err
		}
	}
	if len(l.refused) > 0 {
		return nil, fmt.Errorf("the cluster would refuse %d of the manifests in %s:\n%w",
			len(l.refused), dir, errors.Join(l.refused...))
	}
	if err := l.earlier.replace(slices.Collect(maps.Values(l.admitted))); err != nil {
		return nil, err
	}
	return l.manifests, nil
}

// DocumentError is a manifest document the cluster would refuse.
type DocumentError struct {
	// File is the manifest file's path, the directory given to LoadManifests included.
	File string
	// Document is the 1-based position of the document among the file's non-empty documents.
	Document int
	// Err is the API server's answer (see crdvalidation.Validator.Create and Update).
	Err error
	// Stored is the file of the earlier admitted object when the document was refused as an
	// update of it.
	Stored string
}

// Error implements error.
func (e *DocumentError) Error() string {
	msg := fmt.Sprintf("%s (document %d): %s", e.File, e.Document, crdvalidation.KubectlMessage(e.Err))
	if e.Stored != "" {
		msg += "\n  (an update of the object admitted earlier; to create it anew, as after kubectl delete, remove " +
			e.Stored + ")"
	}
	return msg
}

// Unwrap returns the error underneath, for errors.Is and errors.As.
func (e *DocumentError) Unwrap() error { return e.Err }

// loader collects the manifests of LoadManifests and the documents the cluster would refuse.
type loader struct {
	validator *crdvalidation.Validator
	manifests *Manifests
	refused   []error
	// earlier holds what earlier loads admitted; admitted is what this one admits, by the path
	// admittedObjects gives it (a second document of one object updates the first).
	earlier  admittedObjects
	admitted map[string]*unstructured.Unstructured
}

func (l *loader) loadFile(ctx context.Context, path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	index := 0
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		// Blank and comment-only chunks (a leading "---", a file header) are no documents.
		var content any
		if err := yaml.Unmarshal(doc, &content); err != nil {
			return fmt.Errorf("%s (document %d): %w", path, index+1, err)
		}
		if content == nil {
			continue
		}
		index++
		if err := l.add(ctx, path, index, doc); err != nil {
			return err
		}
	}
}

func (l *loader) add(ctx context.Context, path string, index int, doc []byte) error {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		return fmt.Errorf("%s (document %d): %w", path, index, err)
	}
	group := strings.SplitN(meta.APIVersion, "/", 2)[0]
	if meta.Kind == "" || group == "kustomize.config.k8s.io" {
		// kustomization.yaml sits beside the manifests; it is not a resource.
		return nil
	}
	stored, err := l.admit(ctx, doc)
	var refused *DocumentError
	if errors.As(err, &refused) {
		refused.File, refused.Document = path, index
		l.refused = append(l.refused, refused)
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s (document %d): %w", path, index, err)
	}
	return l.manifests.keep(path, index, meta.APIVersion, meta.Kind, stored)
}

// keep adds an admitted document (JSON) to the manifests of its kind.
func (m *Manifests) keep(path string, index int, apiVersion, kind string, stored []byte) error {
	group := strings.SplitN(apiVersion, "/", 2)[0]
	strict := func(into any) error {
		if err := yaml.UnmarshalStrict(stored, into); err != nil {
			return fmt.Errorf("%s (document %d): %s: %w", path, index, kind, err)
		}
		return nil
	}
	switch {
	case group == v1alpha1.GroupVersion.Group && kind == "Partner":
		return decodeInto(strict, &m.Partners)
	case group == v1alpha1.GroupVersion.Group && kind == "Catalog":
		return decodeInto(strict, &m.Catalogs)
	case group == v1alpha1.GroupVersion.Group && kind == "CatalogShard":
		return decodeInto(strict, &m.Shards)
	case group == v1alpha1.GroupVersion.Group && kind == "ApiKey":
		return decodeInto(strict, &m.APIKeys)
	case group == v1alpha1.GroupVersion.Group && kind == "Wallet":
		return decodeInto(strict, &m.Wallets)
	case group == v1alpha1.GroupVersion.Group && kind == "WalletTopUp":
		return decodeInto(strict, &m.TopUps)
	case apiVersion == "v1" && kind == "ConfigMap":
		return decodeInto(strict, &m.ConfigMaps)
	case apiVersion == "v1" && kind == "Secret":
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
		m.Skipped = append(m.Skipped, fmt.Sprintf("%s: %s %s", filepath.Base(path), apiVersion, kind))
	}
	return nil
}

// admit returns doc, as JSON, the way the cluster would store it: in namespace "default" when it
// names none and, for the kinds of the CRDs, admitted by the validator (as an update of the same
// object admitted before, by an earlier document or load), which refuses it with a
// *DocumentError.
func (l *loader) admit(ctx context.Context, doc []byte) ([]byte, error) {
	// Strict: a key given twice is refused rather than silently overridden by the last.
	raw, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	if obj.GetNamespace() == "" {
		obj.SetNamespace(metav1.NamespaceDefault)
	}
	if l.validator.ServesGroup(obj.GroupVersionKind().Group) {
		key := l.earlier.path(obj)
		old := l.admitted[key]
		if old == nil {
			if old, err = l.earlier.stored(obj); err != nil {
				return nil, err
			}
		}
		if old == nil {
			obj, err = l.validator.Create(ctx, obj)
		} else {
			obj, err = l.validator.Update(ctx, old, obj)
		}
		if err != nil {
			refused := &DocumentError{Err: err}
			if old != nil {
				refused.Stored = l.earlier.path(old)
			}
			return nil, refused
		}
		l.admitted[key] = obj
	} else if stored, handled, err := crdvalidation.CreateCore(obj); handled {
		if err != nil {
			return nil, &DocumentError{Err: err}
		}
		obj = stored
	}
	return obj.MarshalJSON()
}

// decodeInto decodes a document strictly and appends it to list.
func decodeInto[T any](strict func(into any) error, list *[]T) error {
	var o T
	if err := strict(&o); err != nil {
		return err
	}
	*list = append(*list, o)
	return nil
}
