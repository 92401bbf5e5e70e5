// Package translate turns a set of Kubernetes objects into one data-plane-neutral proxy
// config. It is pure: objects in, config out, no I/O, and the same objects always give the
// same bytes. Every problem is a Finding on the object at fault; no finding removes a route
// that does not depend on that object.
//
// Translation is incremental (Translator): it keeps what it built and an index from every
// source object to what depends on it, so a change re-translates only that. Translate is the
// same machinery with everything to build; a property test holds the two byte-identical.
//
// Semantics, as users of other controllers expect them (docs/translation.md has the table):
//   - an Ingress is served when spec.ingressClassName names an IngressClass whose controller
//     is Options.ControllerName (or names Options.IngressClass itself), when the legacy
//     kubernetes.io/ingress.class annotation names Options.IngressClass, or, without any
//     class, when one of our IngressClasses is the default class, or when
//     Options.WatchIngressWithoutClass is set and no other controller's class is the default;
//   - Exact paths match exactly; Prefix paths match element-wise ("/foo" matches "/foo" and
//     "/foo/bar", not "/foobar"; a trailing slash is ignored); ImplementationSpecific is
//     treated as Prefix, or as an RE2 regular expression over the whole path when the Ingress
//     has the annotation sluice.io/path-regex: "true";
//   - within a host, Exact routes come first, then regular expressions, then prefixes, each
//     longest first; a host's routes are tried before the catch-all routes (no host, and
//     defaultBackend);
//   - two Ingresses claiming the same host, path and type: the oldest creationTimestamp,
//     then namespace/name, wins; the other gets a finding;
//   - on a host with a certificate, an Ingress's routes answer plain HTTP with a 308 redirect
//     to HTTPS, as ingress-nginx's do, unless the Ingress's ssl-redirect annotation is
//     "false" (or Options.NoSSLRedirect); the path of an ACME HTTP-01 challenge is served;
//   - ingress-nginx's nginx.ingress.kubernetes.io/* annotations are served or refused with a
//     finding that names them (nginx.go), never ignored;
//   - a backend whose Service or port is missing, or that is not a Service, keeps its route
//     with no endpoints, so that the route answers 503 rather than falling through to
//     another backend; every reference to a backend without ready endpoints gets a warning.
package translate

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// Annotations Sluice reads.
const (
	AnnotationIngressClass   = contract.AnnotationIngressClass
	AnnotationDefaultClass   = contract.AnnotationDefaultClass
	AnnotationPathRegex      = "sluice.io/path-regex"
	AnnotationRequestTimeout = "sluice.io/request-timeout"
)

// Options are the translator's settings that change the result.
type Options struct {
	IngressClass   string
	ControllerName string
	// WatchIngressWithoutClass serves class-less Ingresses while no IngressClass is the
	// default, or one of ours is (ingress-nginx's flag of the same name).
	WatchIngressWithoutClass bool
	// NoSSLRedirect turns off the default redirect of HTTP to HTTPS on the hosts of Ingresses
	// that have a certificate (ingress-nginx's ssl-redirect ConfigMap key set to false);
	// force-ssl-redirect still redirects.
	NoSSLRedirect bool
	// DefaultCertificate ("namespace/name" of a TLS Secret) is served for a TLS handshake no
	// host has a certificate for: an unknown server name, none, or a host whose own Secret is
	// missing or unusable (its finding still says so). A Gateway listener without hostname
	// sets the catch-all's certificate first. Empty: such handshakes fail.
	DefaultCertificate string
	// Now is the time certificates are checked against; zero skips the expiry check.
	Now time.Time
	// PublishService ("namespace/name") is the Service whose status.loadBalancer and
	// externalIPs are the proxy's addresses; PublishAddresses lists them instead. They only
	// change the statuses (see Statuses), never the config.
	PublishService   string
	PublishAddresses []string

	// GatewayControllerName is the spec.controllerName of the GatewayClasses served
	// (DefaultGatewayControllerName when empty).
	GatewayControllerName string
	// GatewayHTTPPort and GatewayHTTPSPort are the Gateway listener ports served on the
	// proxy's HTTP and HTTPS listeners: the ports clients see (DefaultGatewayHTTPPort and
	// DefaultGatewayHTTPSPort when 0). A listener on another port is not served.
	GatewayHTTPPort  int32
	GatewayHTTPSPort int32
	// GatewayPorts are the further Gateway listener ports the proxies serve, each with its
	// protocol, on the shared address and on every address of GatewayAddresses (the proxies'
	// further listeners, named by contract.ListenerName).
	GatewayPorts []GatewayPort
	// GatewayAddresses is the pool of addresses Gateways are given one each of
	// (docs/design.md, "Gateway addresses and ports"): spec.addresses when it asks for one of
	// them, else one chosen by name. Empty: every Gateway shares the proxies' published
	// addresses.
	GatewayAddresses []string
	// GatewayReservedAddresses are addresses the proxies also serve Gateways on, given only to
	// a Gateway whose spec.addresses asks for one of them (never chosen by name).
	GatewayReservedAddresses []string

	// Quarantined are objects a data plane rejected, by findings key ("Ingress/ns/name",
	// "HTTPRoute/ns/name", "Secret/ns/name"), with the data plane's error: each is left out
	// as if invalid, with the finding "rejected by the data plane" (Translator.SetQuarantined
	// changes them later).
	Quarantined map[string]string
}

// Input is the set of objects to translate.
type Input struct {
	Ingresses      []*networkingv1.Ingress
	IngressClasses []*networkingv1.IngressClass
	Services       []*corev1.Service
	EndpointSlices []*discoveryv1.EndpointSlice
	Secrets        []*corev1.Secret

	GatewayClasses  []*gatewayv1.GatewayClass
	Gateways        []*gatewayv1.Gateway
	HTTPRoutes      []*gatewayv1.HTTPRoute
	ReferenceGrants []*gatewayv1.ReferenceGrant
	// ListenerSets add listeners to the Gateways that allow them.
	ListenerSets []*gatewayv1.ListenerSet
	// Namespaces are read for their labels only: a Gateway listener may admit routes from
	// the namespaces its selector matches.
	Namespaces []*corev1.Namespace
	// BackendTLSPolicies make HTTPRoutes speak TLS to the Services they target, trusting the
	// ca.crt of ConfigMaps.
	BackendTLSPolicies []*gatewayv1.BackendTLSPolicy
	ConfigMaps         []*corev1.ConfigMap
}

// Translate builds the config for in.
func Translate(in Input, opts Options) *configv1.Resources {
	t := New(opts)
	for _, o := range in.objects() {
		t.Set(o)
	}
	t.Build()
	return t.State().Resources()
}

// Hash returns the state hash of resources (contract.Hash).
func Hash(r *configv1.Resources) string { return contract.Hash(r) }

// SortFindings puts findings in their canonical order (contract.SortFindings).
func SortFindings(fs []*configv1.Finding) { contract.SortFindings(fs) }

// HostLess orders hosts as requests try them (contract.HostLess).
func HostLess(a, b string) bool { return contract.HostLess(a, b) }

// Served returns the Ingresses a translator with opts serves, in no particular order.
func Served(in Input, opts Options) []*networkingv1.Ingress {
	t := New(opts)
	for _, c := range in.IngressClasses {
		t.Set(c)
	}
	var out []*networkingv1.Ingress
	for _, ing := range in.Ingresses {
		if served, _ := t.ours(ing); served {
			out = append(out, ing)
		}
	}
	return out
}

// aged is what precedence reads of an object.
type aged interface {
	GetNamespace() string
	GetName() string
	GetCreationTimestamp() metav1.Time
}

// older orders Ingresses by precedence: oldest creationTimestamp, then namespace/name.
func older(a, b aged) bool {
	ta, tb := a.GetCreationTimestamp().Time, b.GetCreationTimestamp().Time
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	if a.GetNamespace() != b.GetNamespace() {
		return a.GetNamespace() < b.GetNamespace()
	}
	return a.GetName() < b.GetName()
}

func ref(ing *networkingv1.Ingress) *configv1.ObjectRef { return metaOf(ing).ref() }

func (m ingressMeta) ref() *configv1.ObjectRef {
	// No resourceVersion: a status write or a label change must not make a new config.
	return &configv1.ObjectRef{Group: "networking.k8s.io", Kind: "Ingress", Namespace: m.Namespace, Name: m.Name, Uid: string(m.UID)}
}

const (
	sevWarn  = configv1.FindingSeverity_FINDING_SEVERITY_WARNING
	sevError = configv1.FindingSeverity_FINDING_SEVERITY_ERROR
)

func finding(ing *networkingv1.Ingress, field string, sev configv1.FindingSeverity, reason, cause string) *configv1.Finding {
	return findingOf(metaOf(ing), field, sev, reason, cause)
}

func findingOf(m ingressMeta, field string, sev configv1.FindingSeverity, reason, cause string) *configv1.Finding {
	return &configv1.Finding{Object: m.ref(), Field: field, Cause: cause, Severity: sev, Reason: reason}
}

func pathTypeName(t configv1.PathMatchType) string {
	switch t {
	case configv1.PathMatchType_PATH_MATCH_TYPE_EXACT:
		return "Exact"
	case configv1.PathMatchType_PATH_MATCH_TYPE_REGEX:
		return "regex"
	default:
		return "Prefix"
	}
}

func checkHost(h string) string {
	if strings.HasPrefix(h, "*.") {
		if errs := validation.IsWildcardDNS1123Subdomain(h); len(errs) > 0 {
			return fmt.Sprintf("invalid wildcard host %q: %s", h, strings.Join(errs, "; "))
		}
		return ""
	}
	if errs := validation.IsDNS1123Subdomain(h); len(errs) > 0 {
		return fmt.Sprintf("invalid host %q: %s", h, strings.Join(errs, "; "))
	}
	return ""
}

func pathMatch(p networkingv1.HTTPIngressPath, regexPaths bool) (*configv1.PathMatch, string) {
	typ := networkingv1.PathTypeImplementationSpecific
	if p.PathType != nil {
		typ = *p.PathType
	}
	path := p.Path
	if path == "" {
		path = "/"
	}
	switch typ {
	case networkingv1.PathTypeExact:
		if !strings.HasPrefix(path, "/") {
			return nil, fmt.Sprintf("Exact path %q does not start with /", path)
		}
		return &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_EXACT, Value: path}, ""
	case networkingv1.PathTypeImplementationSpecific:
		if regexPaths {
			if _, err := regexp.Compile("^(?:" + path + ")$"); err != nil {
				return nil, fmt.Sprintf("invalid regular expression %q: %v", path, err)
			}
			return &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_REGEX, Value: path}, ""
		}
		fallthrough
	case networkingv1.PathTypePrefix:
		if !strings.HasPrefix(path, "/") {
			return nil, fmt.Sprintf("%s path %q does not start with /", typ, path)
		}
		if strings.ContainsAny(path, "*?{}") {
			return nil, fmt.Sprintf("%s path %q contains wildcard or regex characters; use pathType ImplementationSpecific with the %s annotation", typ, path, AnnotationPathRegex)
		}
		if len(path) > 1 {
			path = strings.TrimRight(path, "/")
			if path == "" {
				path = "/"
			}
		}
		return &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: path}, ""
	default:
		return nil, fmt.Sprintf("unknown pathType %q", typ)
	}
}

// covers reports whether a certificate's names cover host (a wildcard name covers one label).
func covers(names []string, host string) bool {
	for _, n := range names {
		if strings.EqualFold(n, host) {
			return true
		}
		if strings.HasPrefix(n, "*.") && !strings.HasPrefix(host, "*.") {
			if i := strings.IndexByte(host, '.'); i > 0 && strings.EqualFold(host[i+1:], n[2:]) {
				return true
			}
		}
	}
	return false
}

// moreSpecific orders routes: Exact, then regex, then Prefix; longer values first.
func moreSpecific(a, b *configv1.PathMatch) bool {
	rank := func(t configv1.PathMatchType) int {
		switch t {
		case configv1.PathMatchType_PATH_MATCH_TYPE_EXACT:
			return 0
		case configv1.PathMatchType_PATH_MATCH_TYPE_REGEX:
			return 1
		}
		return 2
	}
	if rank(a.Type) != rank(b.Type) {
		return rank(a.Type) < rank(b.Type)
	}
	if len(a.Value) != len(b.Value) {
		return len(a.Value) > len(b.Value)
	}
	return a.Value < b.Value
}
