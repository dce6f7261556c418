package crdvalidation

import (
	stdjson "encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// maxDataSize is core.MaxSecretSize, the bound of a ConfigMap's and a Secret's data.
const maxDataSize = 1 << 20

// CreateCore admits a ConfigMap or Secret (the core kinds that manifests for codeport carry:
// product feeds, webhook secrets) as the API server admits its create: the request body decoded
// strictly, then pkg/apis/core/validation's ValidateConfigMap or ValidateSecret, whose rules are
// repeated here since that package is not a library. It returns the object as stored (a Secret's
// stringData merged into data, as the conversion to the internal type does), or handled false for
// any other kind, which it leaves alone.
func CreateCore(obj *unstructured.Unstructured) (stored *unstructured.Unstructured, handled bool, err error) {
	gvk := obj.GroupVersionKind()
	if gvk.Group != "" || gvk.Version != "v1" || (gvk.Kind != "ConfigMap" && gvk.Kind != "Secret") {
		return nil, false, nil
	}
	raw, err := obj.MarshalJSON()
	if err != nil {
		return nil, true, fmt.Errorf("encode %s: %w", gvk.Kind, err)
	}
	decoder := json.NewSerializerWithOptions(json.DefaultMetaFactory, clientgoscheme.Scheme, clientgoscheme.Scheme,
		json.SerializerOptions{Strict: true})
	typed, _, err := decoder.Decode(raw, &gvk, nil)
	if err != nil {
		return nil, true, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v",
			gvk.Kind, gvk.Version, gvk.Kind, err))
	}
	var errs field.ErrorList
	switch o := typed.(type) {
	case *corev1.ConfigMap:
		errs = validateConfigMap(o)
	case *corev1.Secret:
		for k, v := range o.StringData {
			if o.Data == nil {
				o.Data = map[string][]byte{}
			}
			o.Data[k] = []byte(v)
		}
		o.StringData = nil
		errs = validateSecret(o)
	}
	if len(errs) > 0 {
		return nil, true, apierrors.NewInvalid(schema.GroupKind{Kind: gvk.Kind}, obj.GetName(), errs)
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	if err != nil {
		return nil, true, fmt.Errorf("convert %s: %w", gvk.Kind, err)
	}
	return &unstructured.Unstructured{Object: content}, true, nil
}

// validateConfigMap is ValidateConfigMap.
func validateConfigMap(cm *corev1.ConfigMap) field.ErrorList {
	errs := metavalidation.ValidateObjectMeta(&cm.ObjectMeta, true, metavalidation.NameIsDNSSubdomain,
		field.NewPath("metadata"))
	size := 0
	for key, value := range cm.Data {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(key), key, msg))
		}
		if _, dup := cm.BinaryData[key]; dup {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(key), key, "duplicate of key present in binaryData"))
		}
		size += len(value)
	}
	for key, value := range cm.BinaryData {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(field.NewPath("binaryData").Key(key), key, msg))
		}
		size += len(value)
	}
	if size > maxDataSize {
		errs = append(errs, field.TooLong(field.NewPath(""), "", maxDataSize))
	}
	return errs
}

// validateSecret is ValidateSecret: keys, size, and the keys each built-in type requires.
func validateSecret(s *corev1.Secret) field.ErrorList {
	errs := metavalidation.ValidateObjectMeta(&s.ObjectMeta, true, metavalidation.NameIsDNSSubdomain,
		field.NewPath("metadata"))
	data := field.NewPath("data")
	size := 0
	for key, value := range s.Data {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(data.Key(key), key, msg))
		}
		size += len(value)
	}
	if size > maxDataSize {
		errs = append(errs, field.TooLong(data, "", maxDataSize))
	}
	required := func(keys ...string) {
		for _, k := range keys {
			if _, ok := s.Data[k]; !ok {
				errs = append(errs, field.Required(data.Key(k), ""))
			}
		}
	}
	switch s.Type {
	case corev1.SecretTypeServiceAccountToken:
		if s.Annotations[corev1.ServiceAccountNameKey] == "" {
			errs = append(errs, field.Required(field.NewPath("metadata", "annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	case corev1.SecretTypeDockercfg:
		errs = append(errs, wellFormedJSON(data, s.Data, corev1.DockerConfigKey)...)
	case corev1.SecretTypeDockerConfigJson:
		errs = append(errs, wellFormedJSON(data, s.Data, corev1.DockerConfigJsonKey)...)
	case corev1.SecretTypeBasicAuth:
		_, user := s.Data[corev1.BasicAuthUsernameKey]
		_, password := s.Data[corev1.BasicAuthPasswordKey]
		if !user && !password {
			required(corev1.BasicAuthUsernameKey, corev1.BasicAuthPasswordKey)
		}
	case corev1.SecretTypeSSHAuth:
		if len(s.Data[corev1.SSHAuthPrivateKey]) == 0 {
			errs = append(errs, field.Required(data.Key(corev1.SSHAuthPrivateKey), ""))
		}
	case corev1.SecretTypeTLS:
		required(corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
	}
	return errs
}

// wellFormedJSON: the docker config types need their key, holding a JSON object.
func wellFormedJSON(data *field.Path, values map[string][]byte, key string) field.ErrorList {
	value, ok := values[key]
	if !ok {
		return field.ErrorList{field.Required(data.Key(key), "")}
	}
	if err := stdjson.Unmarshal(value, &map[string]any{}); err != nil {
		return field.ErrorList{field.Invalid(data.Key(key), "<secret contents redacted>", err.Error())}
	}
	return nil
}
