package devenv

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// admittedObjects are the custom resources an earlier run admitted, as the cluster stores them,
// one JSON file each under <state-dir>/admitted/<namespace>/<Kind>/<name>.json. A run admits a
// manifest of an object found there as the cluster admits `kubectl apply` of a changed object: an
// update, judged by the transition rules (fields that are immutable once created) against what
// was stored. An object no longer among the manifests is gone, as after `kubectl delete`; so is
// one whose file is removed by hand.
type admittedObjects struct {
	// dir is empty when nothing is kept: every manifest is then a create.
	dir string
}

func (a admittedObjects) path(obj *unstructured.Unstructured) string {
	return filepath.Join(a.dir, obj.GetNamespace(), obj.GetKind(), obj.GetName()+".json")
}

// stored returns the earlier admitted version of obj, or nil when there is none.
func (a admittedObjects) stored(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if a.dir == "" {
		return nil, nil
	}
	raw, err := os.ReadFile(a.path(obj))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the admitted %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	old := &unstructured.Unstructured{}
	if err := old.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("%s: %w (remove it to admit the object anew)", a.path(obj), err)
	}
	return old, nil
}

// replace makes objs the admitted objects: each is written, every other file removed.
func (a admittedObjects) replace(objs []*unstructured.Unstructured) error {
	if a.dir == "" {
		return nil
	}
	keep := map[string]bool{}
	for _, obj := range objs {
		raw, err := obj.MarshalJSON()
		if err != nil {
			return fmt.Errorf("encode %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
		path := a.path(obj)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return fmt.Errorf("keep admitted objects: %w", err)
		}
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			return fmt.Errorf("keep admitted objects: %w", err)
		}
		keep[path] = true
	}
	if err := os.MkdirAll(a.dir, 0o700); err != nil {
		return fmt.Errorf("keep admitted objects: %w", err)
	}
	root, err := os.OpenRoot(a.dir)
	if err != nil {
		return fmt.Errorf("forget deleted objects: %w", err)
	}
	defer root.Close()
	err = fs.WalkDir(root.FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || keep[filepath.Join(a.dir, path)] {
			return err
		}
		return root.Remove(path)
	})
	if err != nil {
		return fmt.Errorf("forget deleted objects: %w", err)
	}
	return nil
}
