package watchstream

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// Content types of Object.raw.
const (
	ContentTypeProtobuf = "application/vnd.kubernetes.protobuf"
	ContentTypeJSON     = "application/json"
)

// builtins are the built-in kinds Sluice reads: core/v1 (Services, Secrets, Namespaces,
// ConfigMaps), discovery/v1 (EndpointSlices) and networking/v1 (Ingresses, IngressClasses).
// Not client-go's scheme of every API group: linked and registered at start, its groups
// were most of a translator's binary and of its resident size when idle.
var builtins = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := AddBuiltins(s); err != nil {
		panic(err) // the schemes are compiled in: this cannot fail at run time
	}
	return s
}()

// AddBuiltins adds the built-in kinds Sluice reads to s.
func AddBuiltins(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, discoveryv1.AddToScheme, networkingv1.AddToScheme} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}

var codecs = serializer.NewCodecFactory(builtins)

// Decodes says whether Decode gives o its Go type: a built-in kind Sluice reads.
func Decodes(o *watchv1.Object) bool {
	k := o.GetKind()
	return builtins.Recognizes(schema.GroupVersionKind{Group: k.GetGroup(), Version: k.GetVersion(), Kind: k.GetKind()})
}

// Decode decodes a wire object into a typed object (the built-in kinds Sluice reads, codecs)
// or an Unstructured one (custom resources, sent as JSON). Another built-in kind sent as
// protobuf is an error.
func Decode(o *watchv1.Object) (runtime.Object, error) {
	switch o.GetContentType() {
	case ContentTypeProtobuf, ContentTypeJSON:
	default:
		return nil, fmt.Errorf("unsupported content type %q", o.GetContentType())
	}
	obj, _, err := codecs.UniversalDeserializer().Decode(o.GetRaw(), nil, nil)
	if err == nil {
		return obj, nil
	}
	if o.GetContentType() == ContentTypeJSON {
		u := &unstructured.Unstructured{}
		if uerr := u.UnmarshalJSON(o.GetRaw()); uerr == nil {
			return u, nil
		}
	}
	return nil, err
}

// secretKeep are the Secret data keys a reader without the right to private keys still gets:
// certificates are public.
var secretKeep = map[string]bool{corev1.TLSCertKey: true, corev1.ServiceAccountRootCAKey: true}

// Redact returns o without private material, for a reader that may not have it (the operator
// role): a Secret keeps only its certificates (tls.crt, ca.crt), and loses the
// last-applied-configuration annotation, which kubectl fills with the whole Secret. Other
// objects are returned as they are. The result is JSON.
func Redact(o *watchv1.Object) (*watchv1.Object, error) {
	if o.GetKind().GetGroup() != "" || o.GetKind().GetKind() != "Secret" {
		return o, nil
	}
	obj, err := Decode(o)
	if err != nil {
		return nil, fmt.Errorf("redact secret %s/%s: %w", o.GetNamespace(), o.GetName(), err)
	}
	sec, ok := obj.(*corev1.Secret)
	if !ok {
		return nil, fmt.Errorf("redact secret %s/%s: decoded as %T", o.GetNamespace(), o.GetName(), obj)
	}
	// sec is this call's own, decoded from o's bytes: change it in place.
	for k := range sec.Data {
		if !secretKeep[k] {
			sec.Data[k] = nil
		}
	}
	sec.StringData = nil
	delete(sec.Annotations, corev1.LastAppliedConfigAnnotation)
	sec.ManagedFields = nil
	sec.APIVersion, sec.Kind = "v1", "Secret"
	raw, err := json.Marshal(sec)
	if err != nil {
		return nil, fmt.Errorf("redact secret %s/%s: %w", o.GetNamespace(), o.GetName(), err)
	}
	out := proto.Clone(o).(*watchv1.Object)
	out.ContentType, out.Raw = ContentTypeJSON, raw
	return out, nil
}
