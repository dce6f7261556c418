package crdvalidation

import (
	"context"
	"fmt"
	"strconv"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/operation"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
)

// Validator admits objects of the kinds its CRDs serve. It is safe for concurrent use.
type Validator struct {
	resources map[schema.GroupVersionKind]*resource
	// groups are the API groups of the CRDs.
	groups map[string]bool
}

// resource is one served version of one CRD, prepared as the API server prepares it.
type resource struct {
	gvk        schema.GroupVersionKind
	namespaced bool
	// statusSubresource: a create cannot set status; the server drops it before validating.
	statusSubresource bool
	structural        *structuralschema.Structural
	schemaValidator   apiservervalidation.SchemaValidator
	// celValidator is nil when the schema has no x-kubernetes-validations rules.
	celValidator *cel.Validator
}

// New prepares a Validator for every served version of crds.
func New(crds []apiextensionsv1.CustomResourceDefinition) (*Validator, error) {
	// The API server stores CRDs defaulted; the schema it serves is the defaulted one.
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("register apiextensions/v1: %w", err)
	}
	v := &Validator{
		resources: map[schema.GroupVersionKind]*resource{},
		groups:    map[string]bool{},
	}
	for i := range crds {
		crd := crds[i].DeepCopy()
		scheme.Default(crd)
		for j := range crd.Spec.Versions {
			version := &crd.Spec.Versions[j]
			if !version.Served {
				continue
			}
			r, err := newResource(crd, version)
			if err != nil {
				return nil, fmt.Errorf("CRD %s version %s: %w", crd.Name, version.Name, err)
			}
			v.resources[r.gvk] = r
			v.groups[r.gvk.Group] = true
		}
	}
	return v, nil
}

func newResource(
	crd *apiextensionsv1.CustomResourceDefinition, version *apiextensionsv1.CustomResourceDefinitionVersion,
) (*resource, error) {
	if version.Schema == nil || version.Schema.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("no openAPIV3Schema")
	}
	if crd.Spec.PreserveUnknownFields {
		return nil, fmt.Errorf("preserveUnknownFields is not supported: the server would not prune")
	}
	// As customresource_handler.go's getOrCreateServingInfoFor: the internal schema, its
	// structural form with defaults pruned, and the OpenAPI validator of the internal schema.
	var internal apiextensions.CustomResourceValidation
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(
		version.Schema, &internal, nil); err != nil {
		return nil, fmt.Errorf("convert schema to internal: %w", err)
	}
	structural, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("schema is not structural: %w", err)
	}
	structural = structural.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(structural); err != nil {
		return nil, fmt.Errorf("prune defaults: %w", err)
	}
	schemaValidator, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("schema validator: %w", err)
	}
	return &resource{
		gvk:               schema.GroupVersionKind{Group: crd.Spec.Group, Version: version.Name, Kind: crd.Spec.Names.Kind},
		namespaced:        crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		statusSubresource: version.Subresources != nil && version.Subresources.Status != nil,
		structural:        structural,
		schemaValidator:   schemaValidator,
		celValidator:      cel.NewValidator(structural, true, celconfig.PerCallLimit),
	}, nil
}

// ServesGroup reports whether any CRD of the Validator is in group: an object of that group the
// Validator does not serve is one the cluster would not know either.
func (v *Validator) ServesGroup(group string) bool {
	return v.groups[group]
}

// Create admits obj as `kubectl create` or `kubectl apply` of a new object would (with kubectl's
// default --validate=strict), and returns it as the server would store it: unknown fields
// rejected, defaults applied, status dropped where status is a subresource, generation 1. obj
// itself is not modified. A namespaced obj must carry its namespace, as the server sets it from
// the request.
//
// The error is what the API server answers: a *apierrors.StatusError (BadRequest for fields the
// schema does not declare or metadata it cannot read, Invalid with one cause per refused value),
// or a *meta.NoKindMatchError for a kind or version no CRD serves.
func (v *Validator) Create(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return v.admit(ctx, nil, obj)
}

// Update admits obj as `kubectl apply` of a changed object would, old being the object as the
// server stores it (as Create or an earlier Update returned it), and returns the object as the
// server would store it. Besides Create's checks it runs the transition rules (CEL rules reading
// oldSelf, such as immutable fields) and ratchets as the server does: a value left unchanged is
// not refused for failing a rule added since it was stored. Status is kept from old where it is a
// subresource, and the generation grows when anything but metadata changed.
func (v *Validator) Update(
	ctx context.Context, old, obj *unstructured.Unstructured,
) (*unstructured.Unstructured, error) {
	if old.GroupVersionKind() != obj.GroupVersionKind() || old.GetNamespace() != obj.GetNamespace() ||
		old.GetName() != obj.GetName() {
		return nil, fmt.Errorf("update of %s %s/%s from %s %s/%s: not the same object", obj.GetKind(),
			obj.GetNamespace(), obj.GetName(), old.GetKind(), old.GetNamespace(), old.GetName())
	}
	return v.admit(ctx, old, obj)
}

// admit is the server's create (old nil) or update handling of obj after authorization: decode,
// default, prepare (customResourceStrategy.PrepareForCreate/PrepareForUpdate), validate.
func (v *Validator) admit(
	ctx context.Context, old, obj *unstructured.Unstructured,
) (*unstructured.Unstructured, error) {
	gvk := obj.GroupVersionKind()
	r, ok := v.resources[gvk]
	if !ok {
		return nil, &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
	}
	stored := obj.DeepCopy()
	if err := r.decode(stored); err != nil {
		return nil, err
	}
	// The decoder's defaulter (customresource_handler.go's unstructuredDefaulter).
	structuraldefaulting.Default(stored.Object, r.structural)
	if r.statusSubresource {
		delete(stored.Object, "status")
	}
	if old == nil {
		stored.SetGeneration(1)
	} else {
		if status, ok := old.Object["status"]; ok && r.statusSubresource {
			stored.Object["status"] = status
		}
		// kubectl apply patches the stored object, so the change carries its resourceVersion.
		stored.SetResourceVersion(old.GetResourceVersion())
		stored.SetGeneration(old.GetGeneration())
		if !apiequality.Semantic.DeepEqual(withoutMetadata(stored.Object), withoutMetadata(old.Object)) {
			stored.SetGeneration(old.GetGeneration() + 1)
		}
	}
	if errs := r.validate(ctx, stored, old); len(errs) > 0 {
		return nil, apierrors.NewInvalid(gvk.GroupKind(), stored.GetName(), errs)
	}
	// Storage gives every write a new resourceVersion; its value means nothing to clients.
	version, _ := strconv.ParseUint(stored.GetResourceVersion(), 10, 64)
	stored.SetResourceVersion(strconv.FormatUint(version+1, 10))
	return stored, nil
}

func withoutMetadata(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "metadata" {
			out[k] = v
		}
	}
	return out
}

// decode does what the server's schema-coercing decoder does to a strictly decoded request body
// (customresource_handler.go's unstructuredSchemaCoercer.apply with returnUnknownFieldPaths):
// read metadata, prune what the schema does not declare and null values it does not allow, and
// answer fields it pruned as the handler answers a strict decoding error.
func (r *resource) decode(u *unstructured.Unstructured) error {
	kind, apiVersion := u.GetKind(), u.GetAPIVersion()
	objectMeta, foundObjectMeta, unknownFields, err := schemaobjectmeta.GetObjectMetaWithOptions(u.Object,
		schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	if err != nil {
		return r.badRequest(err)
	}
	unknownFields = append(unknownFields, structuralpruning.PruneWithOptions(u.Object, r.structural, true,
		structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, r.structural)
	fieldErr, metaUnknownFields := schemaobjectmeta.CoerceWithOptions(nil, u.Object, r.structural, false,
		schemaobjectmeta.CoerceOptions{ReturnUnknownFieldPaths: true})
	if fieldErr != nil {
		return r.badRequest(fieldErr)
	}
	unknownFields = append(unknownFields, metaUnknownFields...)
	u.SetKind(kind)
	u.SetAPIVersion(apiVersion)
	if foundObjectMeta {
		if err := schemaobjectmeta.SetObjectMeta(u.Object, objectMeta); err != nil {
			return r.badRequest(err)
		}
	}
	if len(unknownFields) > 0 {
		strictErrs := make([]error, len(unknownFields))
		for i, path := range unknownFields {
			strictErrs[i] = fmt.Errorf(`unknown field "%s"`, path)
		}
		return r.badRequest(runtime.NewStrictDecodingError(strictErrs))
	}
	return nil
}

// badRequest words a decoding error as the create handler does (handlers/rest.go's
// transformDecodeError).
func (r *resource) badRequest(err error) error {
	return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v",
		r.gvk.Kind, r.gvk.Version, r.gvk.Kind, err))
}

// validate is customResourceStrategy.Validate (old nil, a create) and ValidateUpdate, which
// ratchets (GA since 1.33): a value an update leaves unchanged is not refused for failing a rule.
func (r *resource) validate(ctx context.Context, u, old *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, r.validateObjectMeta(ctx, u, old)...)
	var oldObject any
	var celOptions []cel.Option
	if old == nil {
		errs = append(errs, apiservervalidation.ValidateCustomResource(nil, u.UnstructuredContent(), r.schemaValidator)...)
	} else {
		oldObject = old.Object
		correlated := common.NewCorrelatedObject(u.Object, old.Object, &model.Structural{Structural: r.structural})
		celOptions = append(celOptions, cel.WithRatcheting(correlated))
		errs = append(errs, apiservervalidation.ValidateCustomResourceUpdate(nil, u.UnstructuredContent(),
			old.UnstructuredContent(), r.schemaValidator, apiservervalidation.WithRatcheting(correlated))...)
	}
	// Embedded resources (x-kubernetes-embedded-resource) carry metadata of their own.
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, u.Object, r.structural, false)...)
	// x-kubernetes-list-type set and map: no duplicate items or keys (checked on an update only
	// when the stored object passed).
	if old == nil || len(structurallisttype.ValidateListSetsAndMaps(nil, r.structural, old.Object)) == 0 {
		errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, r.structural, u.Object)...)
	}
	if r.celValidator != nil {
		if blocking := blockingError(errs); blocking != nil {
			errs = append(errs, blocking)
		} else {
			celErrs, _ := r.celValidator.Validate(ctx, nil, r.structural, u.Object, oldObject,
				celconfig.RuntimeCELCostBudget, celOptions...)
			errs = append(errs, celErrs...)
		}
	}
	return errs
}

// validateObjectMeta is customResourceValidator.validateObjectMetaDeclaratively (old nil, a
// create) and validateObjectMetaUpdateDeclaratively: names are DNS subdomains, a namespaced object
// needs its namespace, labels and annotations are well formed, and an update keeps what is
// immutable.
func (r *resource) validateObjectMeta(ctx context.Context, u, old *unstructured.Unstructured) field.ErrorList {
	objectMeta, errs := objectMetaOf(u)
	if len(errs) > 0 {
		return errs
	}
	if old == nil {
		return metavalidation.ValidateObjectMetaDeclaratively(ctx, operation.Create, objectMeta, nil, r.namespaced,
			metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"),
			utilfeature.DefaultFeatureGate.Enabled(features.DeclarativeValidationBeta))
	}
	oldMeta, errs := objectMetaOf(old)
	if len(errs) > 0 {
		return errs
	}
	return metavalidation.ValidateObjectMetaDeclaratively(ctx, operation.Update, objectMeta, oldMeta, r.namespaced,
		nil, field.NewPath("metadata"), utilfeature.DefaultFeatureGate.Enabled(features.DeclarativeValidationBeta))
}

func objectMetaOf(u *unstructured.Unstructured) (*metav1.ObjectMeta, field.ErrorList) {
	objectMeta := &metav1.ObjectMeta{}
	if raw, ok := u.Object["metadata"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, objectMeta); err != nil {
			return nil, field.ErrorList{field.Invalid(field.NewPath("metadata"), raw, err.Error())}
		}
	}
	return objectMeta, nil
}

// blockingError is registry/customresource's hasBlockingErr: CEL rules are not evaluated when
// the OpenAPI validation found the object's shape wrong (a rule could not rely on it).
func blockingError(errs field.ErrorList) *field.Error {
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong,
			field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return field.Invalid(nil, nil,
				"some validation rules were not checked because the object was invalid; "+
					"correct the existing errors to complete validation")
		}
	}
	return nil
}
