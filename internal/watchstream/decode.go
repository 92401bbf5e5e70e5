package watchstream

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// Content types of Object.raw.
const (
	ContentTypeProtobuf = "application/vnd.kubernetes.protobuf"
	ContentTypeJSON     = "application/json"
)

// Decode decodes a wire object into a typed object (built-in kinds) or an Unstructured one
// (custom resources).
func Decode(o *watchv1.Object) (runtime.Object, error) {
	switch o.GetContentType() {
	case ContentTypeProtobuf, ContentTypeJSON:
	default:
		return nil, fmt.Errorf("unsupported content type %q", o.GetContentType())
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(o.GetRaw(), nil, nil)
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
