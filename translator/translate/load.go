package translate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
)

// LoadManifests reads YAML or JSON manifests (several documents, Lists allowed) into an
// Input. Kinds the translator does not read are returned by name in skipped; a document that
// does not decode is an error naming it.
func LoadManifests(name string, data []byte) (in Input, skipped []string, err error) {
	r := utilyaml.NewYAMLReader(bufioReader(data))
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if err == io.EOF {
			return in, skipped, nil
		}
		if err != nil {
			return in, skipped, fmt.Errorf("%s: document %d: %w", name, doc, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
			continue
		}
		obj, _, err := codecs.UniversalDeserializer().Decode(raw, nil, nil)
		if runtime.IsNotRegisteredError(err) {
			skipped = append(skipped, fmt.Sprintf("%s: document %d: %s is not read by the translator", name, doc, kindOf(raw)))
			continue
		}
		if err != nil {
			return in, skipped, fmt.Errorf("%s: document %d: %w", name, doc, err)
		}
		if s := in.add(obj); s != "" {
			skipped = append(skipped, fmt.Sprintf("%s: document %d: %s", name, doc, s))
		}
	}
}

// kindOf names the kind of a manifest (YAML or JSON) as apiVersion and kind.
func kindOf(raw []byte) string {
	var tm metav1.TypeMeta
	if j, err := utilyaml.ToJSON(raw); err == nil {
		_ = json.Unmarshal(j, &tm) // a manifest that decoded this far has them
	}
	return tm.APIVersion + " " + tm.Kind
}

// add adds one decoded object; it returns a description of what it skipped.
func (in *Input) add(obj any) string {
	switch o := obj.(type) {
	case *networkingv1.Ingress:
		in.Ingresses = append(in.Ingresses, o)
	case *networkingv1.IngressClass:
		in.IngressClasses = append(in.IngressClasses, o)
	case *corev1.Service:
		in.Services = append(in.Services, o)
	case *discoveryv1.EndpointSlice:
		in.EndpointSlices = append(in.EndpointSlices, o)
	case *corev1.Secret:
		in.Secrets = append(in.Secrets, o)
	case *gatewayv1.GatewayClass:
		in.GatewayClasses = append(in.GatewayClasses, o)
	case *gatewayv1.Gateway:
		in.Gateways = append(in.Gateways, o)
	case *gatewayv1.HTTPRoute:
		in.HTTPRoutes = append(in.HTTPRoutes, o)
	case *gatewayv1.ReferenceGrant:
		in.ReferenceGrants = append(in.ReferenceGrants, o)
	case *gatewayv1.ListenerSet:
		in.ListenerSets = append(in.ListenerSets, o)
	case *gatewayv1.BackendTLSPolicy:
		in.BackendTLSPolicies = append(in.BackendTLSPolicies, o)
	case *corev1.ConfigMap:
		in.ConfigMaps = append(in.ConfigMaps, o)
	case *gatewayv1beta1.ReferenceGrant:
		in.ReferenceGrants = append(in.ReferenceGrants, (*gatewayv1.ReferenceGrant)(o))
	case *corev1.Namespace:
		in.Namespaces = append(in.Namespaces, o)
	case *corev1.List:
		var skipped []string
		for _, item := range o.Items {
			obj, _, err := codecs.UniversalDeserializer().Decode(item.Raw, nil, nil)
			if runtime.IsNotRegisteredError(err) {
				skipped = append(skipped, kindOf(item.Raw)+" is not read by the translator")
				continue
			}
			if err != nil {
				skipped = append(skipped, err.Error())
				continue
			}
			if s := in.add(obj); s != "" {
				skipped = append(skipped, s)
			}
		}
		if len(skipped) > 0 {
			return fmt.Sprint(skipped)
		}
	default:
		return fmt.Sprintf("%T is not read by the translator", obj)
	}
	return ""
}

// Add adds a decoded object (from the watch stream) to the input; other kinds are ignored.
func (in *Input) Add(obj any) { in.add(obj) }

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }

// objects returns every object of the input.
func (in *Input) objects() []any {
	out := make([]any, 0, len(in.Ingresses)+len(in.IngressClasses)+len(in.Services)+len(in.EndpointSlices)+len(in.Secrets)+
		len(in.GatewayClasses)+len(in.Gateways)+len(in.HTTPRoutes)+len(in.ReferenceGrants)+len(in.ListenerSets)+len(in.Namespaces)+
		len(in.BackendTLSPolicies)+len(in.ConfigMaps))
	for _, o := range in.Namespaces {
		out = append(out, o)
	}
	for _, o := range in.IngressClasses {
		out = append(out, o)
	}
	for _, o := range in.Services {
		out = append(out, o)
	}
	for _, o := range in.EndpointSlices {
		out = append(out, o)
	}
	for _, o := range in.Secrets {
		out = append(out, o)
	}
	for _, o := range in.ConfigMaps {
		out = append(out, o)
	}
	for _, o := range in.BackendTLSPolicies {
		out = append(out, o)
	}
	for _, o := range in.Ingresses {
		out = append(out, o)
	}
	for _, o := range in.GatewayClasses {
		out = append(out, o)
	}
	for _, o := range in.ReferenceGrants {
		out = append(out, o)
	}
	for _, o := range in.Gateways {
		out = append(out, o)
	}
	for _, o := range in.ListenerSets {
		out = append(out, o)
	}
	for _, o := range in.HTTPRoutes {
		out = append(out, o)
	}
	return out
}

// CaseOptions sets over o the options that a manifest's golden case is translated with: the
// fields of NAME.options.json beside NAME.yaml (Options' field names), when there is one. The
// translator's goldens and the data plane tests that replay them read the same file.
func CaseOptions(manifest string, o *Options) error {
	data, err := os.ReadFile(strings.TrimSuffix(manifest, filepath.Ext(manifest)) + ".options.json")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(o); err != nil {
		return fmt.Errorf("%s: options: %w", manifest, err)
	}
	return nil
}
