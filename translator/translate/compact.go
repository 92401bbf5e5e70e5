package translate

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// The compact forms the translator keeps of the two most numerous kinds, Services and
// EndpointSlices (two of every three objects of a cluster of Ingresses): what translation
// reads of them and nothing else, so that the decoded Kubernetes object is garbage once
// Set has read it (docs/design.md, "Cold start"). Their fields carry the Kubernetes names,
// so that the code reading them reads as it would the whole object.

// service is what translation reads of a Service: its identity, its type, its ports, and
// what a published Service's status and external IPs say of the addresses.
type service struct {
	Namespace, Name string
	UID             types.UID
	Spec            serviceSpec
	Status          serviceStatus
}

type serviceSpec struct {
	Type        corev1.ServiceType
	Ports       []corev1.ServicePort
	ExternalIPs []string
}

type serviceStatus struct {
	LoadBalancer corev1.LoadBalancerStatus
}

// port is the Service's port numbered n, nil when it has none.
func (s *service) port(n int32) *corev1.ServicePort {
	for i := range s.Spec.Ports {
		if s.Spec.Ports[i].Port == n {
			return &s.Spec.Ports[i]
		}
	}
	return nil
}

func compactService(s *corev1.Service) *service {
	return &service{Namespace: s.Namespace, Name: s.Name, UID: s.UID,
		Spec:   serviceSpec{Type: s.Spec.Type, Ports: s.Spec.Ports, ExternalIPs: s.Spec.ExternalIPs},
		Status: serviceStatus{LoadBalancer: s.Status.LoadBalancer}}
}

// endpointSlice is what translation reads of an EndpointSlice: the Service it belongs to
// (its kubernetes.io/service-name label), its address type, its ports' names and numbers,
// and each endpoint's addresses and conditions, with the API's defaults for absent ones
// already applied (ready when unset; serving as ready when unset; not terminating).
type endpointSlice struct {
	Namespace, Name string
	service         string
	AddressType     discoveryv1.AddressType
	Ports           []slicePort
	Endpoints       []sliceEndpoint
}

type slicePort struct {
	Name string // "" when unset
	Port int32
	Set  bool // false: the port has no number
}

type sliceEndpoint struct {
	Addresses                   []string
	Ready, Serving, Terminating bool
}

func compactSlice(s *discoveryv1.EndpointSlice) *endpointSlice {
	out := &endpointSlice{Namespace: s.Namespace, Name: s.Name, service: s.Labels[discoveryv1.LabelServiceName],
		AddressType: s.AddressType, Ports: make([]slicePort, 0, len(s.Ports)), Endpoints: make([]sliceEndpoint, 0, len(s.Endpoints))}
	for _, p := range s.Ports {
		sp := slicePort{}
		if p.Name != nil {
			sp.Name = *p.Name
		}
		if p.Port != nil {
			sp.Port, sp.Set = *p.Port, true
		}
		out.Ports = append(out.Ports, sp)
	}
	for _, e := range s.Endpoints {
		ready := e.Conditions.Ready == nil || *e.Conditions.Ready
		serving := ready
		if e.Conditions.Serving != nil {
			serving = *e.Conditions.Serving
		}
		out.Endpoints = append(out.Endpoints, sliceEndpoint{Addresses: e.Addresses, Ready: ready, Serving: serving,
			Terminating: e.Conditions.Terminating != nil && *e.Conditions.Terminating})
	}
	return out
}

// An Ingress is kept in its encoded form, as the watch stream carried it (210 bytes against
// 704 decoded, for one of one rule and one path), and decoded again each time it is
// translated again: translation reads all of its spec and annotations, so no smaller form
// would do, and an Ingress is translated again only when it or something it names changes.
// Until its first translation the object decoded on arrival is kept beside, so that a cold
// start decodes each Ingress once. Set without its encoding (a test, Translate), the
// decoded object is kept instead.
type storedIngress struct {
	Namespace, Name string
	raw             []byte
	json            bool
	decoded         *networkingv1.Ingress
}

// Encoded is an object as it came on the watch stream: decoded, and the message it was
// decoded from. Set keeps of an Ingress the message's encoding instead of the object.
type Encoded struct {
	Object runtime.Object
	Wire   *watchv1.Object
}

func newStoredIngress(ing *networkingv1.Ingress, wire *watchv1.Object) *storedIngress {
	s := &storedIngress{Namespace: ing.Namespace, Name: ing.Name, decoded: ing}
	if wire != nil && len(wire.GetRaw()) > 0 {
		s.raw, s.json = wire.GetRaw(), wire.GetContentType() == watchstream.ContentTypeJSON
	}
	return s
}

// take returns the Ingress to translate: the object decoded on arrival the first time, then
// a new decoding of its encoded form. Only an Ingress set without its encoding keeps the
// decoded object after that.
func (s *storedIngress) take() (*networkingv1.Ingress, error) {
	if ing := s.decoded; ing != nil {
		if s.raw != nil {
			s.decoded = nil
		}
		return ing, nil
	}
	ct := watchstream.ContentTypeProtobuf
	if s.json {
		ct = watchstream.ContentTypeJSON
	}
	obj, err := watchstream.Decode(&watchv1.Object{ContentType: ct, Raw: s.raw})
	if err != nil {
		return nil, err
	}
	ing, ok := obj.(*networkingv1.Ingress)
	if !ok {
		return nil, fmt.Errorf("decoded a %T", obj)
	}
	return ing, nil
}

// ingressMeta is what is read of a translated Ingress after its translation (resolving the
// hosts it shares, its findings and status): its identity and age.
type ingressMeta struct {
	Namespace, Name   string
	UID               types.UID
	CreationTimestamp metav1.Time
}

func metaOf(ing *networkingv1.Ingress) ingressMeta {
	return ingressMeta{Namespace: ing.Namespace, Name: ing.Name, UID: ing.UID, CreationTimestamp: ing.CreationTimestamp}
}

func (m ingressMeta) GetNamespace() string              { return m.Namespace }
func (m ingressMeta) GetName() string                   { return m.Name }
func (m ingressMeta) GetCreationTimestamp() metav1.Time { return m.CreationTimestamp }
