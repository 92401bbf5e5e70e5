package translate

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sprotobuf "k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/watchstream"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// universe generates random objects over small pools of names, hosts and paths, so that
// random changes collide: shared hosts, conflicting paths, equal creation times, Services and
// Secrets that come and go under the Ingresses that name them, classes that become default.
type universe struct {
	r     *mrand.Rand
	certs [][]byte // PEM certificate and key pairs, flattened: cert, key, cert, key ...
	base  time.Time
}

var (
	uNamespaces = []string{"a", "b"}
	uServices   = []string{"web", "api", "ext"}
	uHosts      = []string{"", "foo.example.com", "bar.example.com", "x.wild.example.com", "*.wild.example.com", "Bad_Host"}
	uPaths      = []string{"/", "/api", "/api/", "/v[0-9]+", "/a*"}
	uClasses    = []string{"sluice", "other", "missing"}
	uSecrets    = []string{"tls-a", "tls-b", "tls-c"}
)

func selfSigned(t testing.TB, notAfter time.Time, names ...string) (crt, key []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})
}

func (u *universe) pick(xs []string) string { return xs[u.r.IntN(len(xs))] }

func (u *universe) meta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name + fmt.Sprint(u.r.IntN(2))),
		CreationTimestamp: metav1.NewTime(u.base.Add(time.Duration(u.r.IntN(3)) * time.Hour))}
}

func (u *universe) ingress() *networkingv1.Ingress {
	ns := u.pick(uNamespaces)
	ing := &networkingv1.Ingress{ObjectMeta: u.meta(ns, fmt.Sprintf("ing%d", u.r.IntN(6)))}
	switch u.r.IntN(5) {
	case 0:
		ing.Annotations = map[string]string{AnnotationIngressClass: u.pick(uClasses)}
	case 1: // no class
	default:
		ing.Spec.IngressClassName = ptr.To(u.pick(uClasses))
	}
	if u.r.IntN(4) == 0 {
		if ing.Annotations == nil {
			ing.Annotations = map[string]string{}
		}
		ing.Annotations[AnnotationPathRegex] = "true"
	}
	if u.r.IntN(6) == 0 {
		if ing.Annotations == nil {
			ing.Annotations = map[string]string{}
		}
		ing.Annotations[AnnotationRequestTimeout] = []string{"5s", "bad"}[u.r.IntN(2)]
	}
	if u.r.IntN(5) == 0 {
		// Upstream TLS: a backend of the Ingress's own, built from a Secret it names.
		if ing.Annotations == nil {
			ing.Annotations = map[string]string{}
		}
		ing.Annotations[NginxAnnotationPrefix+"backend-protocol"] = "HTTPS"
		ing.Annotations[NginxAnnotationPrefix+"proxy-ssl-secret"] = u.pick(uSecrets)
		ing.Annotations[NginxAnnotationPrefix+"proxy-ssl-verify"] = []string{"on", "off"}[u.r.IntN(2)]
		if u.r.IntN(2) == 0 {
			ing.Annotations[NginxAnnotationPrefix+"proxy-ssl-name"] = "foo.example.com"
		}
	}
	types := []networkingv1.PathType{networkingv1.PathTypePrefix, networkingv1.PathTypeExact, networkingv1.PathTypeImplementationSpecific}
	for range u.r.IntN(3) {
		rule := networkingv1.IngressRule{Host: u.pick(uHosts)}
		if u.r.IntN(8) > 0 {
			rule.HTTP = &networkingv1.HTTPIngressRuleValue{}
			for range 1 + u.r.IntN(3) {
				rule.HTTP.Paths = append(rule.HTTP.Paths, networkingv1.HTTPIngressPath{Path: u.pick(uPaths), PathType: &types[u.r.IntN(len(types))], Backend: u.backend()})
			}
		}
		ing.Spec.Rules = append(ing.Spec.Rules, rule)
	}
	if u.r.IntN(4) == 0 {
		b := u.backend()
		ing.Spec.DefaultBackend = &b
	}
	for range u.r.IntN(3) {
		entry := networkingv1.IngressTLS{SecretName: u.pick(append([]string{""}, uSecrets...))}
		for range u.r.IntN(3) {
			entry.Hosts = append(entry.Hosts, u.pick(uHosts[1:]))
		}
		ing.Spec.TLS = append(ing.Spec.TLS, entry)
	}
	return ing
}

func (u *universe) backend() networkingv1.IngressBackend {
	if u.r.IntN(12) == 0 {
		return networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{Kind: "Bucket", Name: "b"}}
	}
	p := networkingv1.ServiceBackendPort{Number: []int32{80, 81, 9}[u.r.IntN(3)]}
	if u.r.IntN(3) == 0 {
		p = networkingv1.ServiceBackendPort{Name: []string{"http", "grpc"}[u.r.IntN(2)]}
	}
	return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: u.pick(uServices), Port: p}}
}

func (u *universe) service() *corev1.Service {
	s := &corev1.Service{ObjectMeta: u.meta(u.pick(uNamespaces), u.pick(uServices))}
	s.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}
	if u.r.IntN(2) == 0 {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "grpc", Port: 81})
	}
	if u.r.IntN(8) == 0 {
		s.Spec.Type = corev1.ServiceTypeExternalName
	}
	return s
}

func (u *universe) slice() *discoveryv1.EndpointSlice {
	ns, svc := u.pick(uNamespaces), u.pick(uServices)
	s := &discoveryv1.EndpointSlice{ObjectMeta: u.meta(ns, fmt.Sprintf("%s-%d", svc, u.r.IntN(2))), AddressType: discoveryv1.AddressTypeIPv4}
	if u.r.IntN(10) > 0 {
		s.Labels = map[string]string{discoveryv1.LabelServiceName: svc}
	}
	s.Ports = []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080))}, {Name: ptr.To("grpc"), Port: ptr.To(int32(9000))}}
	for range u.r.IntN(3) {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.0.0.%d", u.r.IntN(4))},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(u.r.IntN(3) > 0)}})
	}
	return s
}

func (u *universe) secret() *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: u.meta(u.pick(uNamespaces), u.pick(uSecrets)), Type: corev1.SecretTypeTLS}
	i := u.r.IntN(len(u.certs) / 2)
	s.Data = map[string][]byte{corev1.TLSCertKey: u.certs[2*i], corev1.TLSPrivateKeyKey: u.certs[2*i+1]}
	switch u.r.IntN(8) {
	case 0:
		s.Type = corev1.SecretTypeOpaque
	case 1:
		s.Data[corev1.TLSCertKey] = []byte("not a certificate")
	}
	if u.r.IntN(2) == 0 {
		s.Data[contract.CAKey] = u.certs[2*u.r.IntN(len(u.certs)/2)] // upstream TLS's trusted certificates
	}
	return s
}

func (u *universe) class() *networkingv1.IngressClass {
	c := &networkingv1.IngressClass{ObjectMeta: u.meta("", u.pick(uClasses))}
	c.Spec.Controller = []string{"sluice.io/ingress-controller", "example.com/other"}[u.r.IntN(2)]
	if u.r.IntN(2) == 0 {
		c.Annotations = map[string]string{AnnotationDefaultClass: "true"}
	}
	return c
}

// objects is the current set, by kind and key, for the from-scratch translation.
type objects map[string]any

func keyOf(o any) string {
	m := o.(metav1.Object)
	return fmt.Sprintf("%T/%s/%s", o, m.GetNamespace(), m.GetName())
}

func (os objects) input() Input {
	var in Input
	for _, o := range os {
		in.add(o)
	}
	return in
}

// Incremental translation: after every Build of a random sequence of changes, the state is
// byte-identical to a full translation of the same objects, and the chain of deltas it
// emitted, applied by a receiver, gives the same state and hash (docs/design.md: "Translation is
// incremental ... the result equals a full translation of the same objects").
func TestIncrementalEqualsFullTranslation(t *testing.T) {
	base := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	var certs [][]byte
	for _, c := range []struct {
		notAfter time.Time
		names    []string
	}{
		{base.Add(365 * 24 * time.Hour), []string{"foo.example.com", "bar.example.com"}},
		{base.Add(365 * 24 * time.Hour), []string{"*.wild.example.com"}},
		{base.Add(30 * time.Minute), []string{"foo.example.com", "x.wild.example.com"}}, // expires during the run
	} {
		crt, key := selfSigned(t, c.notAfter, c.names...)
		certs = append(certs, crt, key)
	}
	seeds, steps := 40, 150
	if testing.Short() {
		seeds = 10
	}
	for seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			u := &universe{r: mrand.New(mrand.NewPCG(uint64(seed), 7)), certs: certs, base: base}
			opts := Options{IngressClass: "sluice", ControllerName: "sluice.io/ingress-controller", WatchIngressWithoutClass: seed%3 == 0}
			// Some seeds serve a further port, some also give Gateways addresses of their own
			// from a pool smaller than the Gateways that may want one (docs/design.md,
			// "Gateway addresses and ports").
			if seed%4 >= 2 {
				opts.GatewayPorts = []GatewayPort{{Port: 8080}}
			}
			if seed%4 == 3 {
				opts.GatewayAddresses = []string{"192.0.2.21", "192.0.2.22", "192.0.2.23"}
				opts.GatewayReservedAddresses = []string{"192.0.2.99"}
			}
			cur := objects{}
			// What Set returned for each object, which Remove is given, as the engine does.
			held := map[string]any{}
			inc := New(opts)
			receiver := contract.NewState()
			gwHeld := map[string]*watchv1.ObjectStatus{}
			now := base
			for step := range steps {
				// A burst of one to four changes, then one build.
				for range 1 + u.r.IntN(4) {
					var o any
					switch k := u.r.IntN(15); k {
					case 0, 1, 2, 3:
						o = u.ingress()
					case 4:
						o = u.service()
					case 5, 6:
						o = u.slice()
					case 7:
						o = u.secret()
					case 8:
						o = u.class()
					case 10, 11, 12, 13:
						o = u.gatewayObject(k)
					case 14:
						o = u.namespace()
					case 9: // delete something
						for k := range cur {
							delete(cur, k)
							inc.Remove(held[k])
							delete(held, k)
							break
						}
						continue
					}
					cur[keyOf(o)] = o
					// Even seeds give Ingresses with their encoding, as the engine does, so
					// that each is decoded anew whenever it is translated again; odd seeds
					// without, so that the decoded object is kept.
					if ing, ok := o.(*networkingv1.Ingress); ok && seed%2 == 0 {
						held[keyOf(o)] = inc.Set(encoded(t, ing))
					} else {
						held[keyOf(o)] = inc.Set(o)
					}
				}
				now = now.Add(time.Duration(u.r.IntN(3)) * time.Minute)
				buildAndCheck(t, step, inc, cur, opts, now, receiver, gwHeld)
				checkIngressesHeldEncoded(t, step, inc, seed%2 == 0)
			}
		})
	}
}

// encoded is ing as the engine gives it: with the protobuf encoding the watch stream carried.
func encoded(t *testing.T, ing *networkingv1.Ingress) Encoded {
	t.Helper()
	c := ing.DeepCopy()
	c.APIVersion, c.Kind = "networking.k8s.io/v1", "Ingress"
	scheme := runtime.NewScheme()
	if err := watchstream.AddBuiltins(scheme); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := k8sprotobuf.NewSerializer(scheme, scheme).Encode(c, &buf); err != nil {
		t.Fatal(err)
	}
	return Encoded{Object: ing, Wire: &watchv1.Object{ContentType: watchstream.ContentTypeProtobuf, Raw: buf.Bytes()}}
}

// checkIngressesHeldEncoded checks, at step, that once built the translator holds no
// decoded Ingress given with its encoding (docs/design.md, "Cold start": each object is held
// once, an Ingress in its encoded form), and that nothing it built holds one.
func checkIngressesHeldEncoded(t *testing.T, step int, inc *Translator, withEncoding bool) {
	t.Helper()
	for k, s := range inc.ingresses {
		if withEncoding && (s.decoded != nil || s.raw == nil) {
			t.Fatalf("step %d: Ingress %s/%s held decoded after the build (raw %d bytes)", step, k.ns, k.name, len(s.raw))
		}
		if !withEncoding && s.decoded == nil {
			t.Fatalf("step %d: Ingress %s/%s set without its encoding was dropped", step, k.ns, k.name)
		}
	}
	for k, lo := range inc.local {
		if lo.ing != nil {
			t.Fatalf("step %d: the translation of Ingress %s/%s holds the object", step, k.ns, k.name)
		}
	}
}

// buildAndCheck builds at now and checks, at step, that the incremental state is
// byte-identical to a full translation of cur with the same hash, and that a receiver of its
// deltas holds the same state.
func buildAndCheck(t *testing.T, step int, inc *Translator, cur objects, opts Options, now time.Time, receiver *contract.State, gwHeld map[string]*watchv1.ObjectStatus) {
	t.Helper()
	inc.SetNow(now)
	inc.Build()
	o := opts
	o.Now = now
	want := Translate(cur.input(), o)
	got := inc.State().Resources()
	if !bytes.Equal(render(t, got), render(t, want)) {
		t.Fatalf("step %d: incremental translation differs from a full one:\n%s", step, diffLines(string(render(t, want)), string(render(t, got))))
	}
	if h, w := inc.State().Hash(), Hash(want); h != w {
		t.Fatalf("step %d: state hash %s, full translation's %s", step, h, w)
	}
	if d := inc.State().TakeDelta(); d != nil {
		d.Hash = inc.State().Hash()
		if err := receiver.ApplyDelta(proto.Clone(d).(*configv1.ConfigDelta)); err != nil {
			t.Fatalf("step %d: the receiver cannot apply the delta: %v", step, err)
		}
	}
	if !bytes.Equal(render(t, receiver.Resources()), render(t, want)) || receiver.Hash() != inc.State().Hash() {
		t.Fatalf("step %d: the receiver of the deltas holds another state", step)
	}
	checkGatewayStatuses(t, step, inc, GatewayStatuses(cur.input(), o), gwHeld)
	checkServedMayReport(t, step, inc, cur, opts)
}

// checkServedMayReport: every Ingress the translator serves is one the watcher lets it write
// the status of (docs/design.md, "Who may do what"; contract.MayReport is no narrower than
// what is served), whatever the classes and their default annotations.
func checkServedMayReport(t *testing.T, step int, inc *Translator, cur objects, opts Options) {
	t.Helper()
	classes := map[string]contract.IngressClassInfo{}
	for _, o := range cur {
		if c, ok := o.(*networkingv1.IngressClass); ok {
			classes[c.Name] = contract.IngressClassInfo{Controller: c.Spec.Controller, Default: c.Annotations[AnnotationDefaultClass] == "true"}
		}
	}
	for _, o := range cur {
		ing, ok := o.(*networkingv1.Ingress)
		if !ok {
			continue
		}
		served, _ := inc.ours(ing)
		claim := contract.ClassClaim{ClassName: ing.Spec.IngressClassName, Annotation: ing.Annotations[AnnotationIngressClass]}
		if served && !contract.MayReport(claim, opts.IngressClass, opts.ControllerName, classes) {
			t.Fatalf("step %d: Ingress %s/%s (class %v, annotation %q) is served but the watcher would refuse its status; classes %+v", step, ing.Namespace, ing.Name, ing.Spec.IngressClassName, claim.Annotation, classes)
		}
	}
}
