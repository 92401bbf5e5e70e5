package translate

// Backends: an Ingress's references to Service ports, resolved to backend names, and each
// backend built from its Service and EndpointSlices whichever API refers to it.

import (
	"fmt"
	"iter"
	"net"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// backendRef is one backend an object names; tls, for a backend of an Ingress's
// proxy-ssl-* annotations (verifiedSep), is its Backend.tls.
type backendRef struct {
	name, field string
	tls         *configv1.BackendTLS
}

type backendOut struct {
	be    *configv1.Backend
	ready int
}

// resolveBackend resolves an Ingress backend to a backend name ("" when it cannot be
// resolved; the route then has no endpoints and answers 503).
func (t *Translator) resolveBackend(lo *ingressOut, b networkingv1.IngressBackend, field string) string {
	ing := lo.ing
	add := func(field, reason, cause string) {
		lo.findings = append(lo.findings, finding(ing, field, sevError, reason, cause))
	}
	if b.Resource != nil {
		add(field+".resource", "UnsupportedBackend", fmt.Sprintf("resource backends (%s %s) are not supported; the route answers 503", b.Resource.Kind, b.Resource.Name))
		return ""
	}
	if b.Service == nil {
		add(field, "UnsupportedBackend", "no service backend; the route answers 503")
		return ""
	}
	sk := nsName{ing.Namespace, b.Service.Name}
	lo.services = append(lo.services, sk)
	svc, ok := t.services[sk]
	if !ok {
		add(field+".service.name", "ServiceNotFound", fmt.Sprintf("Service %s/%s not found; the route answers 503", ing.Namespace, b.Service.Name))
		return ""
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		add(field+".service.name", "UnsupportedBackend", fmt.Sprintf("Service %s/%s is of type ExternalName, which is not supported; the route answers 503", svc.Namespace, svc.Name))
		return ""
	}
	var port *corev1.ServicePort
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		if (b.Service.Port.Name != "" && sp.Name == b.Service.Port.Name) || (b.Service.Port.Name == "" && sp.Port == b.Service.Port.Number) {
			port = sp
			break
		}
	}
	if port == nil {
		want := strconv.Itoa(int(b.Service.Port.Number))
		if b.Service.Port.Name != "" {
			want = strconv.Quote(b.Service.Port.Name)
		}
		add(field+".service.port", "ServicePortNotFound", fmt.Sprintf("Service %s/%s has no port %s; the route answers 503", svc.Namespace, svc.Name, want))
		return ""
	}
	name := backendName(svc.Namespace, svc.Name, port.Port)
	var bt *configv1.BackendTLS
	switch {
	case lo.nginx.tls:
		name += tlsSuffix
		if bt = lo.nginx.proxySSL.backendTLS(sk); bt != nil {
			name += verifiedSep + ing.Name
		}
	case lo.nginx.h2c && backendProtocol(port.AppProtocol) != configv1.BackendProtocol_BACKEND_PROTOCOL_H2C:
		name += h2cSuffix
	}
	lo.refs = append(lo.refs, backendRef{name: name, field: field + ".service", tls: bt})
	return name
}

// resolveAuth resolves auth-url's Service port to the backend the proxy asks, or says why
// it cannot (a finding; the Ingress is then not served: nothing could say yes).
func (t *Translator) resolveAuth(lo *ingressOut, a *authURL) bool {
	lo.services = append(lo.services, a.svc)
	fail := func(cause string) bool {
		lo.findings = append(lo.findings, finding(lo.ing, a.field, sevError, "ServiceNotFound", cause+"; the Ingress is not served, since nothing could authenticate its requests"))
		return false
	}
	svc, ok := t.services[a.svc]
	switch {
	case !ok:
		return fail(fmt.Sprintf("Service %s/%s of auth-url not found", a.svc.ns, a.svc.name))
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		return fail(fmt.Sprintf("Service %s/%s of auth-url is of type ExternalName, which is not supported", a.svc.ns, a.svc.name))
	}
	if svc.port(a.port) == nil {
		return fail(fmt.Sprintf("Service %s/%s of auth-url has no port %d", a.svc.ns, a.svc.name, a.port))
	}
	name := backendName(a.svc.ns, a.svc.name, a.port)
	if a.tls {
		name += tlsSuffix
	}
	a.ea.Backend = name
	lo.refs = append(lo.refs, backendRef{name: name, field: a.field})
	return true
}

// AppProtocolH2C is the Service port appProtocol (a Kubernetes standard name) of endpoints
// that speak HTTP/2 over cleartext with prior knowledge.
const AppProtocolH2C = "kubernetes.io/h2c"

// backendProtocol is the protocol of a Service port's endpoints by its appProtocol: h2c for
// kubernetes.io/h2c, HTTP/1.1 for anything else (unset, "http", kubernetes.io/ws, which is
// HTTP/1.1 with its upgrade, and names Sluice does not know).
func backendProtocol(appProtocol *string) configv1.BackendProtocol {
	if appProtocol != nil && *appProtocol == AppProtocolH2C {
		return configv1.BackendProtocol_BACKEND_PROTOCOL_H2C
	}
	return configv1.BackendProtocol_BACKEND_PROTOCOL_UNSPECIFIED
}

func backendName(ns, svc string, port int32) string { return fmt.Sprintf("%s/%s:%d", ns, svc, port) }

// h2cSuffix ends the name of a backend that an Ingress's backend-protocol annotation makes
// speak h2c to a Service port whose appProtocol does not say so: a backend of its own, since
// another Ingress may speak HTTP/1.1 to the same port.
const h2cSuffix = "+h2c"

// tlsSuffix ends the name of a backend that an Ingress's backend-protocol HTTPS or GRPCS
// makes speak TLS to its Service port (BACKEND_PROTOCOL_TLS): a backend of its own, as h2c.
const tlsSuffix = "+tls"

// verifiedSep joins tlsSuffix and the name of the Ingress whose proxy-ssl-* annotations make
// the backend's TLS settings (Backend.tls): a backend of its own per Ingress, since another
// Ingress may speak to the same port with other settings, or unverified.
const verifiedSep = "@"

// protocolSuffix is the suffix that says a backend name's protocol (h2cSuffix, tlsSuffix),
// "" for none. Names of Services and namespaces have no "+", so the first one starts it.
func protocolSuffix(name string) string {
	i := strings.IndexByte(name, '+')
	if i < 0 {
		return ""
	}
	suffix, _, _ := strings.Cut(name[i:], verifiedSep)
	return suffix
}

func parseBackendName(name string) (nsName, int32) {
	name, _, _ = strings.Cut(name, "+")
	ns, rest, _ := strings.Cut(name, "/")
	svc, port, _ := strings.Cut(rest, ":")
	p, _ := strconv.Atoi(port)
	return nsName{ns, svc}, int32(p)
}

// slicesOf yields the EndpointSlices of Service sk.
func (t *Translator) slicesOf(sk nsName) iter.Seq[*endpointSlice] {
	return func(yield func(*endpointSlice) bool) {
		for k := range t.bySvc.all(sk) {
			if !yield(t.slices[k]) {
				return
			}
		}
	}
}

// rebuildBackend builds backend name from its Service and EndpointSlices. A change in
// whether it has ready endpoints changes the findings of every object referring to it.
func (t *Translator) rebuildBackend(name string) {
	if _, ok := t.rebuilt[name]; ok {
		return
	}
	t.rebuilt.add(name)
	sk, port := parseBackendName(name)
	old := t.backends[name]
	nb := buildBackend(t.services[sk], port, t.slicesOf(sk))
	switch protocolSuffix(name) {
	case h2cSuffix:
		if nb.be.GetName() != "" {
			nb.be.Name, nb.be.Protocol = name, configv1.BackendProtocol_BACKEND_PROTOCOL_H2C
		}
	case tlsSuffix:
		if nb.be.GetName() != "" {
			nb.be.Name, nb.be.Protocol, nb.be.Tls = name, configv1.BackendProtocol_BACKEND_PROTOCOL_TLS, t.backendTLS[name]
		}
	}
	t.backends[name] = nb
	t.svcBackends.add(sk, name)
	if old == nil || (old.ready == 0) != (nb.ready == 0) {
		for key := range t.backendUsers.all(name) {
			t.dirtyFindings.add(key)
		}
	}
	t.dirtyBackends.add(name)
}

// setBackendTLS records bt (nil: none) as the TLS settings of backend name, which every
// object referring to the name gives alike (they come from the name's Ingress or policy);
// a backend built already is built again when they changed.
func (t *Translator) setBackendTLS(name string, bt *configv1.BackendTLS) {
	if bt == nil {
		return
	}
	if old, ok := t.backendTLS[name]; ok && proto.Equal(old, bt) {
		return
	}
	t.backendTLS[name] = bt
	if t.backendUsers.has(name) {
		delete(t.rebuilt, name)
		t.rebuildBackend(name)
	}
}

func (t *Translator) dropBackend(name string) {
	sk, _ := parseBackendName(name)
	delete(t.backends, name)
	delete(t.backendTLS, name)
	delete(t.rebuilt, name) // a backend dropped and needed again within one Build is built again
	t.svcBackends.remove(sk, name)
	t.dirtyBackends.add(name)
}

func buildBackend(svc *service, portNum int32, slices iter.Seq[*endpointSlice]) *backendOut {
	if svc == nil {
		return &backendOut{be: &configv1.Backend{}}
	}
	port := svc.port(portNum)
	be := &configv1.Backend{Name: backendName(svc.Namespace, svc.Name, portNum), ServicePort: portNum,
		Service: &configv1.ObjectRef{Kind: "Service", Namespace: svc.Namespace, Name: svc.Name, Uid: string(svc.UID)}}
	if port == nil {
		return &backendOut{be: be}
	}
	// The Service port says what its endpoints speak; the backend is the port's whichever API
	// refers to it, so an Ingress's backend on such a port speaks it too.
	be.Protocol = backendProtocol(port.AppProtocol)
	seen := map[string]*configv1.Endpoint{}
	for s := range slices {
		if s.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		var target int32 = -1
		for _, p := range s.Ports {
			if p.Name == port.Name && p.Set {
				target = p.Port
			}
		}
		if target < 0 {
			continue
		}
		for _, e := range s.Endpoints {
			ready, serving, terminating := e.Ready, e.Serving, e.Terminating
			for _, a := range e.Addresses {
				ip := net.ParseIP(a)
				if ip == nil {
					continue
				}
				ep := &configv1.Endpoint{Address: ip.String(), Port: uint32(target), Ready: ready, Serving: serving, Terminating: terminating}
				k := net.JoinHostPort(ep.Address, strconv.Itoa(int(target)))
				if cur, ok := seen[k]; ok && (cur.Ready || !ep.Ready) {
					continue // the same address in two slices: keep the readier
				}
				seen[k] = ep
			}
		}
	}
	out := &backendOut{be: be}
	for _, ep := range seen {
		be.Endpoints = append(be.Endpoints, ep)
		if ep.Ready {
			out.ready++
		}
	}
	sort.Slice(be.Endpoints, func(i, j int) bool {
		a, b := be.Endpoints[i], be.Endpoints[j]
		if a.Address != b.Address {
			return a.Address < b.Address
		}
		return a.Port < b.Port
	})
	return out
}
