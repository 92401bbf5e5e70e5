// Package translate turns a set of Kubernetes objects into one data-plane-neutral proxy
// config. It is pure: objects in, config out, no I/O, and the same objects always give the
// same bytes. Every problem is a Finding on the object at fault; no finding removes a route
// that does not depend on that object.
//
// Semantics, as users of other controllers expect them (docs/translation.md has the table):
//   - an Ingress is served when spec.ingressClassName names an IngressClass whose controller
//     is Options.ControllerName (or names Options.IngressClass itself), when the legacy
//     kubernetes.io/ingress.class annotation names Options.IngressClass, or, without any
//     class, when one of our IngressClasses is the default class or
//     Options.WatchIngressWithoutClass is set;
//   - Exact paths match exactly; Prefix paths match element-wise ("/foo" matches "/foo" and
//     "/foo/bar", not "/foobar"; a trailing slash is ignored); ImplementationSpecific is
//     treated as Prefix, or as an RE2 regular expression over the whole path when the Ingress
//     has the annotation sluice.io/path-regex: "true";
//   - within a host, Exact routes come first, then regular expressions, then prefixes, each
//     longest first; a host's routes are tried before the catch-all routes (no host, and
//     defaultBackend);
//   - two Ingresses claiming the same host, path and type: the oldest creationTimestamp,
//     then namespace/name, wins; the other gets a finding;
//   - a backend whose Service or port is missing, or that is not a Service, keeps its route
//     with no endpoints, so that the route answers 503 rather than falling through to
//     another backend.
package translate

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// Annotations Sluice reads.
const (
	AnnotationIngressClass   = "kubernetes.io/ingress.class"
	AnnotationDefaultClass   = "ingressclass.kubernetes.io/is-default-class"
	AnnotationPathRegex      = "sluice.io/path-regex"
	AnnotationRequestTimeout = "sluice.io/request-timeout"
)

// Options are the translator's settings that change the result.
type Options struct {
	IngressClass             string
	ControllerName           string
	WatchIngressWithoutClass bool
	// Now is the time certificates are checked against; zero skips the expiry check.
	Now time.Time
	// PublishService ("namespace/name") is the Service whose status.loadBalancer and
	// externalIPs are the proxy's addresses; PublishAddresses lists them instead. They only
	// change the statuses (see Statuses), never the config.
	PublishService   string
	PublishAddresses []string
}

// Input is the set of objects to translate.
type Input struct {
	Ingresses      []*networkingv1.Ingress
	IngressClasses []*networkingv1.IngressClass
	Services       []*corev1.Service
	EndpointSlices []*discoveryv1.EndpointSlice
	Secrets        []*corev1.Secret
}

// Hash returns the content hash of resources: lower-case hex SHA-256 of their deterministic
// serialization.
func Hash(r *configv1.Resources) string {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("translate: marshal resources: %v", err)) // cannot happen for valid messages
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

type nsName struct{ ns, name string }

type routeKey struct {
	host string
	typ  configv1.PathMatchType
	path string
}

type certProblem struct{ reason, why string }

type claimedRoute struct {
	route *configv1.Route
	owner *networkingv1.Ingress
}

type translator struct {
	opts     Options
	services map[nsName]*corev1.Service
	slices   map[nsName][]*discoveryv1.EndpointSlice // by namespace/service name
	secrets  map[nsName]*corev1.Secret
	classes  map[string]*networkingv1.IngressClass

	routes        map[routeKey]*claimedRoute
	hostCert      map[string]string // host -> certificate name
	hostCertOwner map[string]*networkingv1.Ingress
	certs         map[string]*configv1.Certificate
	certErr       map[string]certProblem // certificate name -> why it is unusable
	backends      map[string]*configv1.Backend
	findings      []*configv1.Finding
}

// Translate builds the config for in.
func Translate(in Input, opts Options) *configv1.Resources {
	t := &translator{
		opts:          opts,
		services:      map[nsName]*corev1.Service{},
		slices:        map[nsName][]*discoveryv1.EndpointSlice{},
		secrets:       map[nsName]*corev1.Secret{},
		classes:       map[string]*networkingv1.IngressClass{},
		routes:        map[routeKey]*claimedRoute{},
		hostCert:      map[string]string{},
		hostCertOwner: map[string]*networkingv1.Ingress{},
		certs:         map[string]*configv1.Certificate{},
		certErr:       map[string]certProblem{},
		backends:      map[string]*configv1.Backend{},
	}
	for _, s := range in.Services {
		t.services[nsName{s.Namespace, s.Name}] = s
	}
	for _, s := range in.EndpointSlices {
		if svc := s.Labels[discoveryv1.LabelServiceName]; svc != "" {
			k := nsName{s.Namespace, svc}
			t.slices[k] = append(t.slices[k], s)
		}
	}
	for _, s := range in.Secrets {
		t.secrets[nsName{s.Namespace, s.Name}] = s
	}
	for _, c := range in.IngressClasses {
		t.classes[c.Name] = c
	}
	ings := t.ours(in.Ingresses)
	sort.SliceStable(ings, func(i, j int) bool { return older(ings[i], ings[j]) })
	for _, ing := range ings {
		t.ingress(ing)
	}
	// defaultBackends come after every rule: a rule without host and with path "/" wins.
	for _, ing := range ings {
		t.defaultBackend(ing)
	}
	return t.result()
}

// older orders Ingresses by precedence: oldest creationTimestamp, then namespace/name.
func older(a, b *networkingv1.Ingress) bool {
	ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// Served returns the Ingresses a translator with opts serves, in no particular order.
func Served(in Input, opts Options) []*networkingv1.Ingress {
	t := &translator{opts: opts, classes: map[string]*networkingv1.IngressClass{}}
	for _, c := range in.IngressClasses {
		t.classes[c.Name] = c
	}
	return t.ours(in.Ingresses)
}

// ours selects the Ingresses this translator serves.
func (t *translator) ours(all []*networkingv1.Ingress) []*networkingv1.Ingress {
	defaultClass := false
	for _, c := range t.classes {
		if c.Spec.Controller == t.opts.ControllerName && c.Annotations[AnnotationDefaultClass] == "true" {
			defaultClass = true
		}
	}
	var out []*networkingv1.Ingress
	for _, ing := range all {
		switch {
		case ing.Spec.IngressClassName != nil:
			name := *ing.Spec.IngressClassName
			c, ok := t.classes[name]
			switch {
			case ok && c.Spec.Controller == t.opts.ControllerName:
				out = append(out, ing)
			case !ok && name == t.opts.IngressClass:
				t.finding(ing, "spec.ingressClassName", sevWarn, "IngressClassNotFound",
					fmt.Sprintf("IngressClass %q does not exist; served because it is this translator's class", name))
				out = append(out, ing)
			}
		case ing.Annotations[AnnotationIngressClass] != "":
			if ing.Annotations[AnnotationIngressClass] == t.opts.IngressClass {
				out = append(out, ing)
			}
		case defaultClass || t.opts.WatchIngressWithoutClass:
			out = append(out, ing)
		}
	}
	return out
}

func ref(ing *networkingv1.Ingress) *configv1.ObjectRef {
	// No resourceVersion: a status write or a label change must not make a new config.
	return &configv1.ObjectRef{Group: "networking.k8s.io", Kind: "Ingress", Namespace: ing.Namespace, Name: ing.Name, Uid: string(ing.UID)}
}

func (t *translator) finding(ing *networkingv1.Ingress, field string, sev configv1.FindingSeverity, reason, cause string) {
	t.findings = append(t.findings, &configv1.Finding{Object: ref(ing), Field: field, Cause: cause, Severity: sev, Reason: reason})
}

const (
	sevWarn  = configv1.FindingSeverity_FINDING_SEVERITY_WARNING
	sevError = configv1.FindingSeverity_FINDING_SEVERITY_ERROR
)

func (t *translator) ingress(ing *networkingv1.Ingress) {
	var timeout *durationpb.Duration
	if v, ok := ing.Annotations[AnnotationRequestTimeout]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.finding(ing, "metadata.annotations["+AnnotationRequestTimeout+"]", sevWarn, "InvalidAnnotation",
				fmt.Sprintf("invalid duration %q (want e.g. \"30s\"); the default timeout applies", v))
		} else {
			timeout = durationpb.New(d)
		}
	}
	regexPaths := ing.Annotations[AnnotationPathRegex] == "true"

	// Hosts of this Ingress's rules, for TLS entries without hosts.
	var ruleHosts []string
	for _, r := range ing.Spec.Rules {
		if r.Host != "" {
			ruleHosts = append(ruleHosts, r.Host)
		}
	}
	for i, entry := range ing.Spec.TLS {
		field := fmt.Sprintf("spec.tls[%d]", i)
		hosts := entry.Hosts
		if len(hosts) == 0 {
			hosts = ruleHosts
		}
		if entry.SecretName == "" {
			t.finding(ing, field+".secretName", sevError, "SecretNotFound", "no secretName: the hosts are not served over HTTPS")
			continue
		}
		name, cert := t.certificate(ing, entry.SecretName, field+".secretName")
		for _, h := range hosts {
			switch {
			case cert == nil:
				// certificate() already reported why.
			case !covers(cert.GetDnsNames(), h):
				t.finding(ing, field+".hosts", sevError, "CertificateHostMismatch", fmt.Sprintf("certificate %s does not cover host %q (it covers %s); the host is not served over HTTPS",
					name, h, strings.Join(cert.GetDnsNames(), ", ")))
			default:
				if cur, ok := t.hostCert[h]; ok && cur != name {
					t.finding(ing, field+".hosts", sevError, "ConflictLost", fmt.Sprintf("host %q already has certificate %s from Ingress %s/%s, which takes precedence",
						h, cur, t.hostCertOwner[h].Namespace, t.hostCertOwner[h].Name))
					continue
				}
				t.hostCert[h], t.hostCertOwner[h] = name, ing
			}
		}
	}

	for ri, rule := range ing.Spec.Rules {
		field := fmt.Sprintf("spec.rules[%d]", ri)
		host := rule.Host
		if host != "" {
			if err := checkHost(host); err != "" {
				t.finding(ing, field+".host", sevError, "InvalidHost", err+"; the rule is not served")
				continue
			}
		}
		if rule.HTTP == nil {
			continue
		}
		for pi, p := range rule.HTTP.Paths {
			pfield := fmt.Sprintf("%s.http.paths[%d]", field, pi)
			pm, err := pathMatch(p, regexPaths)
			if err != "" {
				t.finding(ing, pfield, sevError, "InvalidPath", err+"; the path is not served")
				continue
			}
			route := &configv1.Route{
				Name:    fmt.Sprintf("%s/%s/rules[%d]/paths[%d]", ing.Namespace, ing.Name, ri, pi),
				Path:    pm,
				Timeout: timeout,
				Source:  ref(ing),
			}
			if b := t.backend(ing, p.Backend, pfield+".backend"); b != "" {
				route.Backends = []*configv1.WeightedBackend{{Backend: b, Weight: 1}}
			}
			t.claim(ing, routeKey{host, pm.Type, pm.Value}, route, pfield)
		}
	}
}

func (t *translator) defaultBackend(ing *networkingv1.Ingress) {
	if ing.Spec.DefaultBackend == nil {
		return
	}
	route := &configv1.Route{
		Name:   fmt.Sprintf("%s/%s/defaultBackend", ing.Namespace, ing.Name),
		Path:   &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"},
		Source: ref(ing),
	}
	if b := t.backend(ing, *ing.Spec.DefaultBackend, "spec.defaultBackend"); b != "" {
		route.Backends = []*configv1.WeightedBackend{{Backend: b, Weight: 1}}
	}
	t.claim(ing, routeKey{"", route.Path.Type, "/"}, route, "spec.defaultBackend")
}

// claim gives a route key to the first (oldest) Ingress that asks for it.
func (t *translator) claim(ing *networkingv1.Ingress, k routeKey, r *configv1.Route, field string) {
	if cur, ok := t.routes[k]; ok {
		if cur.owner == ing {
			t.finding(ing, field, sevWarn, "DuplicatePath", fmt.Sprintf("duplicate of %s in the same Ingress; the first one is served", cur.route.Name))
			return
		}
		host := k.host
		if host == "" {
			host = "(any host)"
		}
		t.finding(ing, field, sevError, "ConflictLost", fmt.Sprintf("conflict: host %s, %s path %q is already served by Ingress %s/%s, which is older; this path is not served",
			host, pathTypeName(k.typ), k.path, cur.owner.Namespace, cur.owner.Name))
		return
	}
	t.routes[k] = &claimedRoute{route: r, owner: ing}
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

// backend resolves an Ingress backend to a Backend name ("" when it cannot be resolved; the
// route then has no endpoints and answers 503).
func (t *translator) backend(ing *networkingv1.Ingress, b networkingv1.IngressBackend, field string) string {
	if b.Resource != nil {
		t.finding(ing, field+".resource", sevError, "UnsupportedBackend", fmt.Sprintf("resource backends (%s %s) are not supported; the route answers 503", b.Resource.Kind, b.Resource.Name))
		return ""
	}
	if b.Service == nil {
		t.finding(ing, field, sevError, "UnsupportedBackend", "no service backend; the route answers 503")
		return ""
	}
	svc, ok := t.services[nsName{ing.Namespace, b.Service.Name}]
	if !ok {
		t.finding(ing, field+".service.name", sevError, "ServiceNotFound", fmt.Sprintf("Service %s/%s not found; the route answers 503", ing.Namespace, b.Service.Name))
		return ""
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		t.finding(ing, field+".service.name", sevError, "UnsupportedBackend", fmt.Sprintf("Service %s/%s is of type ExternalName, which is not supported; the route answers 503", svc.Namespace, svc.Name))
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
		t.finding(ing, field+".service.port", sevError, "ServicePortNotFound", fmt.Sprintf("Service %s/%s has no port %s; the route answers 503", svc.Namespace, svc.Name, want))
		return ""
	}
	name := fmt.Sprintf("%s/%s:%d", svc.Namespace, svc.Name, port.Port)
	if _, ok := t.backends[name]; ok {
		return name
	}
	be := &configv1.Backend{Name: name, ServicePort: port.Port, Service: &configv1.ObjectRef{Kind: "Service", Namespace: svc.Namespace, Name: svc.Name, Uid: string(svc.UID)}}
	seen := map[string]*configv1.Endpoint{}
	for _, s := range t.slices[nsName{svc.Namespace, svc.Name}] {
		if s.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		var target int32 = -1
		for _, p := range s.Ports {
			pname := ""
			if p.Name != nil {
				pname = *p.Name
			}
			if pname == port.Name && p.Port != nil {
				target = *p.Port
			}
		}
		if target < 0 {
			continue
		}
		for _, e := range s.Endpoints {
			ready := e.Conditions.Ready == nil || *e.Conditions.Ready
			serving := ready
			if e.Conditions.Serving != nil {
				serving = *e.Conditions.Serving
			}
			terminating := e.Conditions.Terminating != nil && *e.Conditions.Terminating
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
	ready := 0
	for _, ep := range seen {
		be.Endpoints = append(be.Endpoints, ep)
		if ep.Ready {
			ready++
		}
	}
	sort.Slice(be.Endpoints, func(i, j int) bool {
		a, b := be.Endpoints[i], be.Endpoints[j]
		if a.Address != b.Address {
			return a.Address < b.Address
		}
		return a.Port < b.Port
	})
	if ready == 0 {
		t.finding(ing, field+".service", sevWarn, "NoReadyEndpoints", fmt.Sprintf("Service %s/%s port %d has no ready endpoints; the route answers 503 until it has", svc.Namespace, svc.Name, port.Port))
	}
	t.backends[name] = be
	return name
}

// certificate loads and checks the TLS Secret ns/name; nil when unusable (reported).
func (t *translator) certificate(ing *networkingv1.Ingress, secretName, field string) (string, *configv1.Certificate) {
	name := ing.Namespace + "/" + secretName
	if c, ok := t.certs[name]; ok {
		return name, c
	}
	if p, ok := t.certErr[name]; ok {
		t.finding(ing, field, sevError, p.reason, p.why)
		return name, nil
	}
	fail := func(reason, why string) (string, *configv1.Certificate) {
		p := certProblem{reason: reason, why: fmt.Sprintf("TLS Secret %s %s; its hosts are not served over HTTPS", name, why)}
		t.certErr[name] = p
		t.finding(ing, field, sevError, p.reason, p.why)
		return name, nil
	}
	s, ok := t.secrets[nsName{ing.Namespace, secretName}]
	if !ok {
		return fail("SecretNotFound", "not found (only Secrets of type kubernetes.io/tls are read)")
	}
	if s.Type != corev1.SecretTypeTLS {
		return fail("SecretNotFound", fmt.Sprintf("is of type %q, not kubernetes.io/tls", s.Type))
	}
	crt, key := s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return fail("InvalidCertificate", "holds no valid certificate and key: "+err.Error())
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fail("InvalidCertificate", "holds an unparsable certificate: "+err.Error())
	}
	if !t.opts.Now.IsZero() && t.opts.Now.After(leaf.NotAfter) {
		return fail("InvalidCertificate", fmt.Sprintf("holds a certificate that expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339)))
	}
	names := append([]string(nil), leaf.DNSNames...)
	sort.Strings(names)
	c := &configv1.Certificate{
		Name:           name,
		Source:         &configv1.ObjectRef{Kind: "Secret", Namespace: s.Namespace, Name: s.Name, Uid: string(s.UID), ResourceVersion: s.ResourceVersion},
		CertificatePem: crt, PrivateKeyPem: key, DnsNames: names, NotAfter: timestamppb.New(leaf.NotAfter),
	}
	t.certs[name] = c
	return name, c
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

func (t *translator) result() *configv1.Resources {
	vhosts := map[string]*configv1.VirtualHost{}
	for k, cr := range t.routes {
		vh, ok := vhosts[k.host]
		if !ok {
			vh = &configv1.VirtualHost{Hostname: k.host}
			vhosts[k.host] = vh
		}
		vh.Routes = append(vh.Routes, cr.route)
	}
	// A host with a certificate but no route still serves TLS (and 404s).
	for h := range t.hostCert {
		if _, ok := vhosts[h]; !ok {
			vhosts[h] = &configv1.VirtualHost{Hostname: h}
		}
	}
	out := &configv1.Resources{}
	used := map[string]bool{}
	usedCert := map[string]bool{}
	for _, vh := range vhosts {
		vh.Certificate = t.hostCert[vh.Hostname]
		if vh.Certificate != "" {
			usedCert[vh.Certificate] = true
		}
		sort.Slice(vh.Routes, func(i, j int) bool { return moreSpecific(vh.Routes[i].Path, vh.Routes[j].Path) })
		for _, r := range vh.Routes {
			for _, b := range r.Backends {
				used[b.Backend] = true
			}
		}
		out.VirtualHosts = append(out.VirtualHosts, vh)
	}
	sort.Slice(out.VirtualHosts, func(i, j int) bool { return HostLess(out.VirtualHosts[i].Hostname, out.VirtualHosts[j].Hostname) })
	for name, b := range t.backends {
		if used[name] {
			out.Backends = append(out.Backends, b)
		}
	}
	sort.Slice(out.Backends, func(i, j int) bool { return out.Backends[i].Name < out.Backends[j].Name })
	for name, c := range t.certs {
		if usedCert[name] {
			out.Certificates = append(out.Certificates, c)
		}
	}
	sort.Slice(out.Certificates, func(i, j int) bool { return out.Certificates[i].Name < out.Certificates[j].Name })
	out.Findings = t.findings
	SortFindings(out.Findings)
	return out
}

// SortFindings puts findings in their canonical order: by object, field, then cause.
func SortFindings(fs []*configv1.Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.Object.Kind != b.Object.Kind {
			return a.Object.Kind < b.Object.Kind
		}
		if a.Object.Namespace != b.Object.Namespace {
			return a.Object.Namespace < b.Object.Namespace
		}
		if a.Object.Name != b.Object.Name {
			return a.Object.Name < b.Object.Name
		}
		if a.Field != b.Field {
			return a.Field < b.Field
		}
		return a.Cause < b.Cause
	})
}

// HostLess orders hosts as requests try them: exact names, then wildcards, then the
// catch-all "", each group sorted.
func HostLess(a, b string) bool {
	rank := func(h string) int {
		switch {
		case h == "":
			return 2
		case strings.HasPrefix(h, "*."):
			return 1
		}
		return 0
	}
	if rank(a) != rank(b) {
		return rank(a) < rank(b)
	}
	return a < b
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
