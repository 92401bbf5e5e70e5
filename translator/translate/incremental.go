package translate

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// Translator is the incremental translation. It holds the current objects, what it built
// from each, an index from every source object to what depends on it, and the resulting
// config state. Set, Remove and SetBroken record a change; Build re-translates only what
// the changes since the last Build touch, and State then holds exactly what Translate would
// build from the same objects. The units of work, each in a file of its own:
//   - an Ingress (ingress.go): its routes, TLS claims and own findings (from the classes, the
//     Services and TLS Secrets it names);
//   - a host (hosts.go): every claim on it, resolved together in precedence order (conflicts,
//     the certificate), into one virtual host;
//   - a backend, a Service port (backends.go): its endpoints, from the Service and its
//     EndpointSlices;
//   - a certificate, a TLS Secret (certificates.go);
//   - an object's findings (findings.go).
//
// It is not safe for concurrent use.
type Translator struct {
	opts Options

	// The current objects.
	ingresses map[nsName]*storedIngress // compact.go
	classes   map[string]*networkingv1.IngressClass
	services  map[nsName]*service       // compact.go
	slices    map[nsName]*endpointSlice // by the slice's own name
	bySvc     index[nsName, nsName]     // service -> its slices
	secrets   map[nsName]*corev1.Secret
	broken    map[string]*configv1.Finding // findings key -> why the object does not decode
	// quarantined are the objects a data plane rejected, by findings key (quarantines).
	quarantined map[string]*configv1.Finding

	// What depends on what.
	classUsers   index[string, nsName] // class name -> Ingresses naming it
	classless    set[nsName]           // Ingresses without class name or annotation
	svcUsers     index[nsName, nsName] // Service -> Ingresses naming it (found or not)
	secretUsers  index[nsName, nsName] // Secret -> Ingresses naming it (found or not)
	hostUsers    index[string, nsName] // host -> served Ingresses claiming it
	backendUsers index[string, string] // backend -> findings keys of the objects referring to it
	svcBackends  index[nsName, string] // Service -> the backends built from it
	defaultClass bool
	// foreignDefault: another controller's IngressClass is the default, so class-less
	// Ingresses are its own even under WatchIngressWithoutClass (contract.MayReport agrees).
	foreignDefault bool

	// What was built.
	local    map[nsName]*ingressOut
	backends map[string]*backendOut
	// backendTLS are the TLS settings of the backends an Ingress's proxy-ssl-* annotations
	// make (verifiedSep), set by that Ingress (index) while it refers to them.
	backendTLS map[string]*configv1.BackendTLS
	certs      map[nsName]*certOut
	// readAhead are certificates of changed Secrets read on every core at the start of a
	// Build (readCertificates), each taken once by certificate.
	readAhead    map[nsName]*certOut
	hostFindings map[string]map[string][]*configv1.Finding // conflict findings per host, by findings key
	hostUses     map[string]hostUse                        // what each virtual host refers to
	backendRefs  map[string]int                            // backend -> winning routes using it
	certRefs     map[string]int                            // certificate -> virtual hosts using it
	nextExpiry   time.Time                                 // earliest notAfter of a usable certificate

	// Work since the last Build.
	dirtyIngresses set[nsName]
	dirtySecrets   set[nsName]
	dirtyServices  set[nsName] // their backends are rebuilt
	dirtyHosts     set[string]
	dirtyBackends  set[string] // re-examined for the output
	dirtyCerts     set[string]
	dirtyFindings  set[string] // findings keys
	statusDirty    set[nsName] // Ingresses whose status may have changed (TakeStatusChanges)
	rebuilt        set[string] // backends built in this Build (each once: the inputs do not change within it)

	gw gatewayState

	out *contract.State
}

type nsName struct{ ns, name string }

type set[K comparable] map[K]struct{}

func (s set[K]) add(k K) { s[k] = struct{}{} }

// New returns an empty incremental translator.
func New(opts Options) *Translator {
	t := &Translator{
		opts:      opts,
		ingresses: map[nsName]*storedIngress{}, classes: map[string]*networkingv1.IngressClass{},
		services: map[nsName]*service{}, slices: map[nsName]*endpointSlice{},
		bySvc: newIndex[nsName, nsName](), secrets: map[nsName]*corev1.Secret{},
		broken:     map[string]*configv1.Finding{},
		classUsers: newIndex[string, nsName](), classless: set[nsName]{}, svcUsers: newIndex[nsName, nsName](),
		secretUsers: newIndex[nsName, nsName](), hostUsers: newIndex[string, nsName](),
		backendUsers: newIndex[string, string](), svcBackends: newIndex[nsName, string](),
		local: map[nsName]*ingressOut{}, backends: map[string]*backendOut{}, certs: map[nsName]*certOut{},
		backendTLS:   map[string]*configv1.BackendTLS{},
		hostFindings: map[string]map[string][]*configv1.Finding{}, hostUses: map[string]hostUse{},
		backendRefs: map[string]int{}, certRefs: map[string]int{},
		dirtyIngresses: set[nsName]{}, dirtySecrets: set[nsName]{}, dirtyServices: set[nsName]{},
		dirtyHosts: set[string]{}, dirtyBackends: set[string]{}, dirtyCerts: set[string]{}, dirtyFindings: set[string]{},
		statusDirty: set[nsName]{}, rebuilt: set[string]{},
		gw:  newGatewayState(),
		out: contract.NewState(),
	}
	if opts.DefaultCertificate != "" {
		// The catch-all host carries it from the first Build, and its Secret's findings say
		// when it is unusable.
		t.dirtyHosts.add("")
		t.dirtyFindings.add("Secret/" + opts.DefaultCertificate)
	}
	return t
}

// State is the config state of the last Build. Its TakeDelta gives what that Build changed.
func (t *Translator) State() *contract.State { return t.out }

// SetNow sets the time certificates are checked against at the next Build.
func (t *Translator) SetNow(now time.Time) { t.opts.Now = now }

// Set adds or replaces an object, given alone or as Encoded; kinds the translator does not
// read are ignored. It returns what the translator keeps of obj (its compact form for a
// Service or an EndpointSlice, its encoding for an Ingress, compact.go; else obj itself),
// which Remove takes as it takes obj: a caller that holds objects to remove them later holds
// that, so that one copy of each is kept.
func (t *Translator) Set(obj any) any {
	switch o := obj.(type) {
	case Encoded:
		if ing, ok := o.Object.(*networkingv1.Ingress); ok {
			return t.setIngress(newStoredIngress(ing, o.Wire))
		}
		return t.Set(o.Object)
	case *networkingv1.Ingress:
		return t.setIngress(newStoredIngress(o, nil))
	case *networkingv1.IngressClass:
		t.classes[o.Name] = o
		t.classChanged(o.Name)
	case *corev1.Service:
		c := compactService(o)
		k := nsName{o.Namespace, o.Name}
		t.services[k] = c
		t.serviceChanged(k)
		return c
	case *discoveryv1.EndpointSlice:
		c := compactSlice(o)
		k := nsName{o.Namespace, o.Name}
		t.removeSlice(k)
		t.slices[k] = c
		if c.service != "" {
			sk := nsName{o.Namespace, c.service}
			t.bySvc.add(sk, k)
			t.dirtyServices.add(sk)
		}
		return c
	case *corev1.Secret:
		k := nsName{o.Namespace, o.Name}
		t.secrets[k] = o
		t.dirtySecrets.add(k)
	default:
		t.setGateway(obj)
	}
	return obj
}

func (t *Translator) setIngress(s *storedIngress) *storedIngress {
	k := nsName{s.Namespace, s.Name}
	t.ingresses[k] = s
	t.dirtyIngresses.add(k)
	return s
}

// Remove removes the object of obj's kind, namespace and name.
func (t *Translator) Remove(obj any) {
	switch o := obj.(type) {
	case *networkingv1.Ingress:
		k := nsName{o.Namespace, o.Name}
		delete(t.ingresses, k)
		t.dirtyIngresses.add(k)
	case *storedIngress:
		k := nsName{o.Namespace, o.Name}
		delete(t.ingresses, k)
		t.dirtyIngresses.add(k)
	case *networkingv1.IngressClass:
		delete(t.classes, o.Name)
		t.classChanged(o.Name)
	case *corev1.Service:
		t.removeService(nsName{o.Namespace, o.Name})
	case *service:
		t.removeService(nsName{o.Namespace, o.Name})
	case *discoveryv1.EndpointSlice:
		t.removeSlice(nsName{o.Namespace, o.Name})
	case *endpointSlice:
		t.removeSlice(nsName{o.Namespace, o.Name})
	case *corev1.Secret:
		k := nsName{o.Namespace, o.Name}
		delete(t.secrets, k)
		t.dirtySecrets.add(k)
	default:
		t.removeGateway(obj)
	}
}

// SetBroken records that an object of kind does not decode (why); an empty why clears it.
// The object is reported as a finding of its own.
func (t *Translator) SetBroken(kind, namespace, name, why string) {
	o := &configv1.ObjectRef{Kind: kind, Namespace: namespace, Name: name}
	key := contract.KeyOfObject(o)
	if why == "" {
		delete(t.broken, key)
	} else {
		t.broken[key] = &configv1.Finding{Object: o, Cause: "object does not decode: " + why,
			Severity: sevError, Reason: "Undecodable"}
	}
	t.dirtyFindings.add(key)
}

func (t *Translator) removeSlice(k nsName) {
	old, ok := t.slices[k]
	if !ok {
		return
	}
	delete(t.slices, k)
	if old.service != "" {
		sk := nsName{old.Namespace, old.service}
		t.bySvc.remove(sk, k)
		t.dirtyServices.add(sk)
	}
}

func (t *Translator) removeService(k nsName) {
	delete(t.services, k)
	t.serviceChanged(k)
}

func (t *Translator) serviceChanged(k nsName) {
	t.dirtyServices.add(k)
	for ing := range t.svcUsers.all(k) {
		t.dirtyIngresses.add(ing)
	}
	for rt := range t.gw.svcUsers.all(k) {
		t.gw.dirtyRoutes.add(rt)
	}
}

// classChanged re-translates the Ingresses that name the class, and every class-less one
// when whether we have a default class changed.
func (t *Translator) classChanged(name string) {
	for ing := range t.classUsers.all(name) {
		t.dirtyIngresses.add(ing)
	}
	def, foreign := false, false
	for _, c := range t.classes {
		if c.Annotations[AnnotationDefaultClass] != "true" {
			continue
		}
		if c.Spec.Controller == t.opts.ControllerName || c.Name == t.opts.IngressClass {
			def = true
		} else {
			foreign = true
		}
	}
	if def != t.defaultClass || foreign != t.foreignDefault {
		t.defaultClass, t.foreignDefault = def, foreign
		for ing := range t.classless {
			t.dirtyIngresses.add(ing)
		}
	}
}

// Build re-translates what the changes since the last Build touch and updates State.
func (t *Translator) Build() {
	t.expire()
	t.readCertificates()
	for k := range t.dirtySecrets {
		delete(t.certs, k)
		for ing := range t.secretUsers.all(k) {
			t.dirtyIngresses.add(ing)
		}
		for g := range t.gw.secretUsers.all(k) {
			t.gw.dirtyGateways.add(g)
		}
		t.dirtyCerts.add(k.ns + "/" + k.name)
		t.dirtyFindings.add("Secret/" + k.ns + "/" + k.name) // a quarantined one's
		if k.ns+"/"+k.name == t.opts.DefaultCertificate {
			t.dirtyHosts.add("")
		}
	}
	for k := range t.dirtyIngresses {
		t.retranslate(k)
	}
	// The address pool's assignment first: a Gateway whose address changed is re-translated.
	t.reassignAddresses()
	// Gateways before routes: a route attaches to the listeners its Gateways have now.
	for k := range t.gw.dirtyGateways {
		t.retranslateGateway(k)
	}
	// Listener isolation: which listener governs a host follows the listeners' hostnames.
	t.listenerHostsChanged()
	for k := range t.gw.dirtyRoutes {
		t.retranslateRoute(k)
	}
	for svc := range t.dirtyServices {
		for name := range t.svcBackends.all(svc) {
			t.rebuildBackend(name)
		}
	}
	for h := range t.dirtyHosts {
		t.resolveHost(h)
	}
	for name := range t.dirtyBackends {
		if t.backendRefs[name] > 0 {
			t.out.Put(contract.Backends, name, t.backends[name].be)
		} else {
			t.out.Remove(contract.Backends, name)
		}
	}
	for name := range t.dirtyCerts {
		ns, sn, _ := strings.Cut(name, "/")
		if t.certRefs[name] > 0 {
			t.out.Put(contract.Certificates, name, t.certificate(nsName{ns, sn}).cert)
		} else {
			t.out.Remove(contract.Certificates, name)
		}
	}
	for key := range t.dirtyFindings {
		t.buildFindings(key)
	}
	t.dirtyIngresses, t.dirtySecrets, t.dirtyServices = set[nsName]{}, set[nsName]{}, set[nsName]{}
	t.dirtyHosts, t.dirtyBackends, t.dirtyCerts, t.dirtyFindings = set[string]{}, set[string]{}, set[string]{}, set[string]{}
	t.gw.dirtyGateways, t.gw.dirtyRoutes = set[nsName]{}, set[nsName]{}
	t.rebuilt = set[string]{}
}
