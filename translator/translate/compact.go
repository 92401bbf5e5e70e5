package translate

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
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
