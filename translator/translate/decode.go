package translate

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// codecs decode every kind the translator reads: the built-in ones (watchstream's) and the
// Gateway API's (v1, and v1beta1 for ReferenceGrant where that is the version served). No
// other API group is linked in (watchstream.Decodes).
var codecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{watchstream.AddBuiltins, gatewayv1.Install, gatewayv1beta1.Install} {
		if err := add(s); err != nil {
			panic(err) // the schemes are compiled in: this cannot fail at run time
		}
	}
	return serializer.NewCodecFactory(s)
}()

// Decode decodes a watch-stream object into the typed object the Translator reads. The
// watcher sends custom resources as JSON with their group, version and kind; the Gateway
// API's are decoded into their Go types (a v1beta1 ReferenceGrant into the v1 type, the same
// schema). Other custom resources stay Unstructured (watchstream.Decode). A built-in kind the
// translator does not read (a watcher may carry more kinds for other clients of its stream)
// is not decoded at all: nil, and no error.
func Decode(o *watchv1.Object) (runtime.Object, error) {
	if o.GetKind().GetGroup() != GatewayGroup {
		if o.GetContentType() == watchstream.ContentTypeProtobuf && !watchstream.Decodes(o) {
			return nil, nil
		}
		return watchstream.Decode(o)
	}
	if o.GetContentType() != watchstream.ContentTypeJSON {
		return nil, fmt.Errorf("%s %s/%s: content type %q, want %s", o.GetKind().GetKind(), o.GetNamespace(), o.GetName(), o.GetContentType(), watchstream.ContentTypeJSON)
	}
	obj, _, err := codecs.UniversalDeserializer().Decode(o.GetRaw(), nil, nil)
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", o.GetKind().GetKind(), o.GetNamespace(), o.GetName(), err)
	}
	if rg, ok := obj.(*gatewayv1beta1.ReferenceGrant); ok {
		return (*gatewayv1.ReferenceGrant)(rg), nil
	}
	return obj, nil
}
