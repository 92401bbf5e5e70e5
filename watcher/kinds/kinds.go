// Package kinds owns what the watcher watches: the configured kinds (required or optional),
// their resolution through discovery, and the informers that list and watch them. Objects are
// stripped and encoded once, by the informers' transform, into the form the store and the
// wire carry (Stored), so that each object is held once and serialized once.
package kinds

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/refs"
)

// Spec is one configured kind, as given in settings: "group/version/resource" ("v1/services"
// for the core group), optionally followed by "?fieldSelector" (URL-style,
// "v1/secrets?type=kubernetes.io/tls"); alternatives separated by "|" are each listed and
// watched on their own ("v1/secrets?type=kubernetes.io/tls|type=Opaque"), since a field
// selector cannot say "or".
type Spec struct {
	GVR           schema.GroupVersionResource
	FieldSelector string
	Required      bool
	// Fallback are versions to read the kind at, in order, when discovery does not serve
	// GVR.Version (a ReferenceGrant's v1beta1).
	Fallback []string
	// Gateway marks the Gateway API kinds that --gateway-api adds.
	Gateway bool
}

func (s Spec) String() string {
	name := s.GVR.Version + "/" + s.GVR.Resource
	if s.GVR.Group != "" {
		name = s.GVR.Group + "/" + name
	}
	if s.FieldSelector != "" {
		name += "?" + s.FieldSelector
	}
	return name
}

// Selectors are the spec's field selector alternatives, each listed and watched on its own
// ([""] for none).
func (s Spec) Selectors() []string { return strings.Split(s.FieldSelector, "|") }

// DefaultRequired are the kinds the translator needs: Ingress, IngressClass, Service,
// EndpointSlice, and Secrets of type kubernetes.io/tls, and Opaque ones, of which only the
// certificates are kept (Transform): ingress-nginx's proxy-ssl-secret is often an Opaque
// Secret holding a CA.
var DefaultRequired = []string{
	"networking.k8s.io/v1/ingresses",
	"networking.k8s.io/v1/ingressclasses",
	"v1/services",
	"discovery.k8s.io/v1/endpointslices",
	"v1/secrets?type=kubernetes.io/tls|type=Opaque",
}

// ParseSpecs parses the settings' kind lists; a duplicate is an error.
func ParseSpecs(required, optional []string) ([]Spec, error) {
	var out []Spec
	seen := map[schema.GroupVersionResource]bool{}
	for _, list := range []struct {
		names    []string
		required bool
	}{{required, true}, {optional, false}} {
		for _, n := range list.names {
			s, err := ParseSpec(n)
			if err != nil {
				return nil, err
			}
			if seen[s.GVR] {
				return nil, fmt.Errorf("kind %q is listed twice", n)
			}
			seen[s.GVR] = true
			s.Required = list.required
			out = append(out, s)
		}
	}
	return out, nil
}

// ParseSpec parses one "group/version/resource[?fieldSelector]".
func ParseSpec(s string) (Spec, error) {
	name, selector, _ := strings.Cut(strings.TrimSpace(s), "?")
	parts := strings.Split(name, "/")
	var spec Spec
	switch len(parts) {
	case 2:
		spec.GVR = schema.GroupVersionResource{Version: parts[0], Resource: parts[1]}
	case 3:
		spec.GVR = schema.GroupVersionResource{Group: parts[0], Version: parts[1], Resource: parts[2]}
	default:
		return Spec{}, fmt.Errorf("kind %q: want group/version/resource (v1/resource for the core group)", s)
	}
	for _, p := range parts {
		if p == "" || strings.ContainsAny(p, " ,") {
			return Spec{}, fmt.Errorf("kind %q: empty or malformed part", s)
		}
	}
	if selector != "" {
		alts := strings.Split(selector, "|")
		for _, alt := range alts {
			if !strings.Contains(alt, "=") {
				return Spec{}, fmt.Errorf("kind %q: field selector %q wants field=value (alternatives separated by |)", s, alt)
			}
		}
		if len(alts) > 1 {
			// Alternatives are watched apart, so no object may match two of them: each must be
			// one field=value term, all of the same field, with distinct values.
			field0, _, _ := strings.Cut(alts[0], "=")
			seen := map[string]bool{}
			for _, alt := range alts {
				field, value, _ := strings.Cut(alt, "=")
				if field != field0 || strings.ContainsAny(alt, ",!") || strings.Contains(value, "=") || seen[value] {
					return Spec{}, fmt.Errorf("kind %q: field selector alternatives must each be one field=value term, all of one field, with distinct values", s)
				}
				seen[value] = true
			}
		}
	}
	spec.FieldSelector = selector
	return spec, nil
}

// Kind is a configured kind resolved through discovery.
type Kind struct {
	Spec
	GVK        schema.GroupVersionKind
	Namespaced bool
	// Served is false for a required kind the apiserver does not serve (yet).
	Served bool
}

// Wire returns the kind's wire name.
func (k *Kind) Wire() *watchv1.GroupVersionKind {
	return &watchv1.GroupVersionKind{Group: k.GVK.Group, Version: k.GVK.Version, Kind: k.GVK.Kind}
}

// Stored is the form objects take inside the informers' caches and the store: the wire
// object, stripped and encoded once, plus the metadata the informer machinery keys on. It is
// immutable once made.
type Stored struct {
	// Wire is the object as the stream carries it; its namespace, name, uid and
	// resourceVersion are all the informers key on (Stored is a metav1.Object, meta.go).
	Wire *watchv1.Object
	// Refs are the TLS Secrets the object references, or the references a ReferenceGrant
	// allows (nil for every other object): read here, once, so that the controller decides
	// which Secrets the stream may carry without decoding anything again.
	Refs *refs.Refs
	// RefsErr is why the references could not be read: the object then references nothing
	// (its Secrets are withheld, never served by mistake) and the controller says so.
	RefsErr error
	// Withheld objects are held by the informer but never stored nor streamed: a ConfigMap
	// without ca.crt, which nothing downstream reads.
	Withheld bool
}

// GetObjectKind is part of runtime.Object; a Stored object carries its kind in Wire.
func (s *Stored) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject returns s itself: Stored objects are never mutated.
func (s *Stored) DeepCopyObject() runtime.Object { return s }

// LastAppliedAnnotation is stripped from every object: it repeats the whole object.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

var protoSerializer = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)

// Content types of Object.raw.
const (
	ContentTypeProtobuf = watchstream.ContentTypeProtobuf
	ContentTypeJSON     = watchstream.ContentTypeJSON
)

// Transform returns the informer transform for kind k: it strips an object (managedFields,
// the last-applied annotation) and encodes it, protobuf for built-in types and JSON for
// custom resources. It is idempotent, as informers require.
func (k *Kind) Transform() func(any) (any, error) {
	gvk := k.GVK
	wireKind := k.Wire()
	return func(obj any) (any, error) {
		switch obj.(type) {
		case *Stored:
			return obj, nil
		}
		ro, ok := obj.(runtime.Object)
		if !ok {
			return nil, fmt.Errorf("transform %s: unexpected %T", gvk.Kind, obj)
		}
		acc, ok := obj.(metav1.Object)
		if !ok {
			return nil, fmt.Errorf("transform %s: %T has no object metadata", gvk.Kind, obj)
		}
		Strip(acc)
		withheld := false
		switch o := obj.(type) {
		case *corev1.Namespace:
			ro = labelsOnly(o)
		case *corev1.Secret:
			if o.Type != corev1.SecretTypeTLS {
				ro = certificatesOnly(o)
			}
		case *corev1.ConfigMap:
			var ok bool
			ro, ok = caOnly(o)
			withheld = !ok
		}
		// A transform error would stall the informer on this one object; an unreadable
		// reference only withholds its Secrets instead.
		rs, refsErr := refs.Of(gvk.GroupKind(), ro)
		raw, contentType, err := encode(ro, gvk)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s/%s: %w", gvk.Kind, acc.GetNamespace(), acc.GetName(), err)
		}
		return &Stored{
			// One string per namespace, not one per object: every decoded object came
			// with its own copy (docs/design.md, "Cold start").
			Wire: &watchv1.Object{
				Kind: wireKind, Namespace: unique.Make(acc.GetNamespace()).Value(), Name: acc.GetName(), Uid: string(acc.GetUID()),
				ResourceVersion: acc.GetResourceVersion(), ContentType: contentType, Raw: raw,
			},
			Refs: rs, RefsErr: refsErr, Withheld: withheld,
		}, nil
	}
}

// Strip removes what nobody downstream reads and what costs the most memory.
func Strip(o metav1.Object) {
	o.SetManagedFields(nil)
	if a := o.GetAnnotations(); a != nil {
		if _, ok := a[LastAppliedAnnotation]; ok {
			c := make(map[string]string, len(a)-1)
			for k, v := range a {
				if k != LastAppliedAnnotation {
					c[k] = v
				}
			}
			o.SetAnnotations(c)
		}
	}
}

// labelsOnly is what the translator reads of a Namespace: its name and labels (a Gateway
// listener selects the namespaces it admits routes from by label). Its spec, status and
// annotations change nothing downstream and are not carried.
func labelsOnly(ns *corev1.Namespace) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name, UID: ns.UID, ResourceVersion: ns.ResourceVersion,
		Generation: ns.Generation, CreationTimestamp: ns.CreationTimestamp, Labels: ns.Labels}}
}

// Keys of a Secret that hold certificates, never keys: all the watcher keeps of a Secret
// that is not of type kubernetes.io/tls.
var certificateKeys = []string{contract.CAKey, corev1.TLSCertKey}

// certificatesOnly is what the translator reads of a Secret of another type than
// kubernetes.io/tls (an Opaque one): its trusted certificates (ca.crt, for ingress-nginx's
// proxy-ssl-secret) and a certificate beside them (tls.crt, so that the translator can say
// its key is not read). Nothing secret is kept, and the rest of an application's Secrets
// costs the watcher only their names.
func certificatesOnly(s *corev1.Secret) *corev1.Secret {
	out := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion,
		Generation: s.Generation, CreationTimestamp: s.CreationTimestamp}, Type: s.Type}
	for _, k := range certificateKeys {
		if v, ok := s.Data[k]; ok {
			if out.Data == nil {
				out.Data = map[string][]byte{}
			}
			out.Data[k] = v
		}
	}
	return out
}

// caOnly is what the translator reads of a ConfigMap: its ca.crt (a BackendTLSPolicy's CA
// certificates), and false when it has none.
func caOnly(cm *corev1.ConfigMap) (*corev1.ConfigMap, bool) {
	out := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm.Name, Namespace: cm.Namespace, UID: cm.UID, ResourceVersion: cm.ResourceVersion,
		Generation: cm.Generation, CreationTimestamp: cm.CreationTimestamp}}
	ca, ok := cm.Data[contract.CAKey]
	if !ok {
		return out, false
	}
	out.Data = map[string]string{contract.CAKey: ca}
	return out, true
}

func encode(obj runtime.Object, gvk schema.GroupVersionKind) ([]byte, string, error) {
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	if u, ok := obj.(*unstructured.Unstructured); ok {
		b, err := json.Marshal(u.Object)
		return b, ContentTypeJSON, err
	}
	var w keepWriter
	if err := protoSerializer.EncodeWithAllocator(obj, &w, &runtime.SimpleAllocator{}); err != nil {
		return nil, "", err
	}
	return w.b, ContentTypeProtobuf, nil
}

// keepWriter keeps the one slice the protobuf serializer writes: the serializer sizes the
// object first and allocates that much, so the wire form the watcher keeps of every object
// is that allocation, not a copy of it into a buffer (a cold start of 100k Ingresses
// encodes 310k objects).
type keepWriter struct{ b []byte }

func (w *keepWriter) Write(p []byte) (int, error) {
	if w.b != nil {
		w.b = append(w.b, p...) // not the serializer's way, but correct whatever it does
		return len(p), nil
	}
	w.b = p[:len(p):len(p)]
	return len(p), nil
}

// ErrNotServed marks a kind the apiserver does not serve.
var ErrNotServed = errors.New("not served by the apiserver")

// Stage is where a kind's objects come in a stream: what other objects refer to first (stage
// 0: classes, Namespaces, the Secrets, and kinds Sluice does not translate; 1: Services,
// EndpointSlices, ReferenceGrants; 2: Gateways; 3: ListenerSets), the route objects that
// refer to them last (4: Ingresses, HTTPRoutes). A receiver that translates as the stream
// arrives then translates a route once, against its referents, not once without them and
// again when they come (docs/design.md, "Cold start"). A Secret comes right before the
// change that references it, whatever its kind's stage.
func (k *Kind) Stage() int {
	switch k.GVK.Kind {
	case "Service", "EndpointSlice", "ReferenceGrant":
		return 1
	case "Gateway", "BackendTLSPolicy":
		return 2
	case "ListenerSet", "XListenerSet":
		return 3
	case "Ingress", "HTTPRoute":
		return 4
	}
	return 0
}

// SortKinds orders kinds by stage, then by their wire name: the order of every stream's
// snapshot and inventory.
func SortKinds(ks []*Kind) {
	sort.SliceStable(ks, func(i, j int) bool {
		if si, sj := ks[i].Stage(), ks[j].Stage(); si != sj {
			return si < sj
		}
		a, b := ks[i].GVK, ks[j].GVK
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.Kind < b.Kind
	})
}
