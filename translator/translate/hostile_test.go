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
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// keepObjects is in with only the objects keep accepts (by name).
func keepObjects(in Input, keep func(name string) bool) Input {
	var out Input
	out.Ingresses = filterObjs(in.Ingresses, keep)
	out.IngressClasses = filterObjs(in.IngressClasses, keep)
	out.Services = filterObjs(in.Services, keep)
	out.EndpointSlices = filterObjs(in.EndpointSlices, keep)
	out.Secrets = filterObjs(in.Secrets, keep)
	out.GatewayClasses = filterObjs(in.GatewayClasses, keep)
	out.Gateways = filterObjs(in.Gateways, keep)
	out.HTTPRoutes = filterObjs(in.HTTPRoutes, keep)
	out.ReferenceGrants = filterObjs(in.ReferenceGrants, keep)
	return out
}

func filterObjs[T metav1.Object](s []T, keep func(string) bool) []T {
	var out []T
	for _, o := range s {
		if keep(o.GetName()) {
			out = append(out, o)
		}
	}
	return out
}

// assertOnlyOwnParts fails unless with is base plus parts owned by the objects own names:
// every resource of base is byte-identical in with once the routes those objects brought
// are taken out, and every resource with adds is theirs (their findings, their hosts).
func assertOnlyOwnParts(t *testing.T, base, with *configv1.Resources, own func(*configv1.ObjectRef) bool) {
	t.Helper()
	enc := func(m proto.Message) string {
		t.Helper()
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	baseHosts := map[string]*configv1.VirtualHost{}
	for _, vh := range base.GetVirtualHosts() {
		baseHosts[vh.GetHostname()] = vh
	}
	ownCerts := map[string]bool{}
	for _, c := range with.GetCertificates() {
		ownCerts[c.GetName()] = own(c.GetSource())
	}
	for _, vh := range with.GetVirtualHosts() {
		stripped := proto.Clone(vh).(*configv1.VirtualHost)
		stripped.Routes = nil
		if ownCerts[stripped.GetCertificate()] {
			stripped.Certificate = ""
		}
		for _, rt := range vh.GetRoutes() {
			if !own(rt.GetSource()) {
				stripped.Routes = append(stripped.Routes, rt)
			}
		}
		b, ok := baseHosts[vh.GetHostname()]
		switch {
		case !ok && len(stripped.Routes) == 0 && stripped.GetCertificate() == "":
			// a host only the hostile objects serve
		case !ok:
			t.Errorf("virtual host %q appeared with parts of other objects: %v", vh.GetHostname(), stripped)
		case enc(b) != enc(stripped):
			t.Errorf("virtual host %q changed:\n%v\nwas\n%v", vh.GetHostname(), stripped, b)
		}
		delete(baseHosts, vh.GetHostname())
	}
	for h := range baseHosts {
		t.Errorf("virtual host %q is gone", h)
	}
	same := func(what string, a, b []proto.Message, key func(proto.Message) string, ownedExtra func(proto.Message) bool) {
		am := map[string]string{}
		for _, m := range a {
			am[key(m)] = enc(m)
		}
		for _, m := range b {
			k := key(m)
			was, ok := am[k]
			switch {
			case !ok && !ownedExtra(m):
				t.Errorf("%s %s appeared: %v", what, k, m)
			case ok && was != enc(m):
				t.Errorf("%s %s changed: %v", what, k, m)
			}
			delete(am, k)
		}
		for k := range am {
			t.Errorf("%s %s is gone", what, k)
		}
	}
	msgs := func(s any) []proto.Message {
		var out []proto.Message
		switch s := s.(type) {
		case []*configv1.Backend:
			for _, m := range s {
				out = append(out, m)
			}
		case []*configv1.Certificate:
			for _, m := range s {
				out = append(out, m)
			}
		case []*configv1.Finding:
			for _, m := range s {
				out = append(out, m)
			}
		}
		return out
	}
	same("backend", msgs(base.GetBackends()), msgs(with.GetBackends()),
		func(m proto.Message) string { return m.(*configv1.Backend).GetName() },
		func(proto.Message) bool { return false })
	same("certificate", msgs(base.GetCertificates()), msgs(with.GetCertificates()),
		func(m proto.Message) string { return m.(*configv1.Certificate).GetName() },
		func(m proto.Message) bool { return own(m.(*configv1.Certificate).GetSource()) })
	same("finding", msgs(base.GetFindings()), msgs(with.GetFindings()), enc,
		func(m proto.Message) bool { return own(m.(*configv1.Finding).GetObject()) })
}

// want is one finding a hostile object must get.
type wantFinding struct{ kind, name, field, reason, cause string }

// wantCondition is one condition a Gateway API object must show (for an HTTPRoute on its
// parent, for a Gateway on its listener).
type wantCondition struct{ kind, name, typ, status, reason string }

func findingsOf(r *configv1.Resources, kind, name string) []*configv1.Finding {
	var out []*configv1.Finding
	for _, f := range r.GetFindings() {
		if f.GetObject().GetKind() == kind && f.GetObject().GetName() == name {
			out = append(out, f)
		}
	}
	return out
}

func conditionsOf(st []*watchv1.ObjectStatus, kind, name string) []*watchv1.Condition {
	var out []*watchv1.Condition
	for _, s := range st {
		if s.GetKey().GetKind() != kind || s.GetKey().GetName() != name {
			continue
		}
		out = append(out, s.GetConditions()...)
		for _, p := range s.GetParents() {
			out = append(out, p.GetConditions()...)
		}
		for _, l := range s.GetListeners() {
			out = append(out, l.GetConditions()...)
		}
	}
	return out
}

// testCert returns a self-signed leaf for host and its key, in PEM.
func testCert(t *testing.T, host string) (crt, key []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd})
}

func tlsSecret(name string, crt, key []byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}
}

func webBackend() networkingv1.IngressBackend {
	return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}
}

func hostIngress(name, host string, paths []networkingv1.HTTPIngressPath, tlsSecret string) *networkingv1.Ingress {
	cls := "sluice"
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, CreationTimestamp: metav1.NewTime(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))},
		Spec: networkingv1.IngressSpec{IngressClassName: &cls, Rules: []networkingv1.IngressRule{{Host: host,
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}}}}
	if tlsSecret != "" {
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{host}, SecretName: tlsSecret}}
	}
	return ing
}

// Hostile input, as a tenant may send it: each object is refused in its own part only (the
// rule, the path, the certificate) with a finding naming object, field and cause, and for the
// Gateway API the condition the spec names; every other resource of the config is
// byte-identical to the config without it. testdata/gateway-hostile.yaml holds the hostile
// objects with a base of ordinary ones (their golden files show the findings and conditions);
// the cases built here are too large for a golden file.
func TestHostileInputIsRefusedInItsOwnPartOnly(t *testing.T) {
	all := load(t, "gateway-hostile.yaml")
	ordinary := func(name string) bool { return !strings.HasPrefix(name, "hostile-") }
	base := keepObjects(all, ordinary)
	baseOut := Translate(base, goldenOpts)
	baseStatus := GatewayStatuses(base, goldenOpts)

	leaf, leafKey := testCert(t, "big.example.com")
	_, otherKey := testCert(t, "big.example.com")
	junk := append(append([]byte{}, leaf...), bytes.Repeat([]byte("junk that is no PEM block at all\n"), 32<<10)...) // 1 MiB
	manyPaths := make([]networkingv1.HTTPIngressPath, 5000)
	pt := networkingv1.PathTypePrefix
	for i := range manyPaths {
		manyPaths[i] = networkingv1.HTTPIngressPath{Path: fmt.Sprintf("/p%d", i), PathType: &pt, Backend: webBackend()}
	}
	longChain := leaf
	for i := 0; i < contract.MaxCertificateChainLength; i++ {
		longChain = append(longChain, leaf...)
	}

	cases := []struct {
		name     string
		objects  []any // built here; else the yaml's objects named name
		findings []wantFinding
		conds    []wantCondition
		served   []string // virtual hosts that must be served, with every route they had asked for
		check    func(t *testing.T, out *configv1.Resources)
	}{
		{name: "hostile-redirects", served: []string{"redirects.example.com"},
			conds: []wantCondition{{"HTTPRoute", "hostile-redirects", "Accepted", "True", "Accepted"}},
			check: func(t *testing.T, out *configv1.Resources) {
				for path, code := range map[string]int{"/see-other": 303, "/temporary": 307, "/permanent": 308} {
					rt := contract.Match(out, contract.Request{Scheme: "http", Host: "redirects.example.com", Path: path})
					if _, got := contract.RedirectLocation(rt, contract.Request{Scheme: "http", Host: "redirects.example.com", Path: path}); got != code {
						t.Errorf("%s: redirect status %d, want %d", path, got, code)
					}
				}
				if fs := findingsOf(out, "HTTPRoute", "hostile-redirects"); len(fs) > 0 {
					t.Errorf("findings on a route that is served: %v", fs)
				}
			}},
		{name: "hostile-empty-remove",
			findings: []wantFinding{{"HTTPRoute", "hostile-empty-remove", "spec.rules[0]", "UnsupportedValue", "removes an empty name"}},
			conds:    []wantCondition{{"HTTPRoute", "hostile-empty-remove", "Accepted", "False", "UnsupportedValue"}}},
		{name: "hostile-crlf", served: []string{"crlf.example.com"},
			findings: []wantFinding{{"HTTPRoute", "hostile-crlf", "spec.rules[1]", "UnsupportedValue", `holds control character '\r'`}},
			conds: []wantCondition{{"HTTPRoute", "hostile-crlf", "Accepted", "True", "Accepted"},
				{"HTTPRoute", "hostile-crlf", "PartiallyInvalid", "True", "UnsupportedValue"}}},
		{name: "hostile-junk-chain", served: []string{"junk.wild.example.com"},
			findings: []wantFinding{{"Ingress", "hostile-junk-chain", "spec.tls[0].secretName", "InvalidCertificate", `block 2 is a "GARBAGE", not a CERTIFICATE`}}},
		{name: "hostile-mismatched-key",
			findings: []wantFinding{{"Gateway", "hostile-mismatched-key", "spec.listeners[0]", "InvalidCertificateRef", "private key does not match"}},
			conds:    []wantCondition{{"Gateway", "hostile-mismatched-key", "ResolvedRefs", "False", "InvalidCertificateRef"}}},
		{name: "hostile-regex", served: []string{"regex.example.com"},
			findings: []wantFinding{{"Ingress", "hostile-regex", "spec.rules[0].http.paths[1].path", "InvalidPath", "at most 1024"}}},
		{name: "hostile-huge-chain", objects: []any{tlsSecret("hostile-huge-chain", junk, leafKey),
			hostIngress("hostile-huge-chain", "big.example.com", manyPaths[:1], "hostile-huge-chain")},
			served:   []string{"big.example.com"},
			findings: []wantFinding{{"Ingress", "hostile-huge-chain", "spec.tls[0].secretName", "InvalidCertificate", "at most 65536"}}},
		{name: "hostile-long-chain", objects: []any{tlsSecret("hostile-long-chain", longChain, leafKey),
			hostIngress("hostile-long-chain", "big.example.com", manyPaths[:1], "hostile-long-chain")},
			served:   []string{"big.example.com"},
			findings: []wantFinding{{"Ingress", "hostile-long-chain", "spec.tls[0].secretName", "InvalidCertificate", "more than 10 certificates"}}},
		{name: "hostile-other-key", objects: []any{tlsSecret("hostile-other-key", leaf, otherKey),
			hostIngress("hostile-other-key", "big.example.com", manyPaths[:1], "hostile-other-key")},
			served:   []string{"big.example.com"},
			findings: []wantFinding{{"Ingress", "hostile-other-key", "spec.tls[0].secretName", "InvalidCertificate", "private key does not match"}}},
		{name: "hostile-valid-chain", objects: []any{tlsSecret("hostile-valid-chain", append(append([]byte("subject=CN = big.example.com\n"), leaf...), leaf...), leafKey),
			hostIngress("hostile-valid-chain", "big.example.com", manyPaths[:1], "hostile-valid-chain")},
			served: []string{"big.example.com"},
			check: func(t *testing.T, out *configv1.Resources) {
				if fs := findingsOf(out, "Ingress", "hostile-valid-chain"); len(fs) > 0 {
					t.Errorf("findings on a valid chain: %v", fs)
				}
				for _, c := range out.GetCertificates() {
					if c.GetName() == "app/hostile-valid-chain" && !bytes.Equal(c.GetCertificatePem(), append(append([]byte{}, leaf...), leaf...)) {
						t.Errorf("text outside the PEM blocks was emitted: %q", c.GetCertificatePem())
					}
				}
			}},
		// Thousands of paths in one Ingress are served, as Contour and Envoy Gateway serve
		// them: the apiserver's object size limit bounds them, and the cost is linear.
		{name: "hostile-many-paths", objects: []any{hostIngress("hostile-many-paths", "many.example.com", manyPaths, "")},
			served: []string{"many.example.com"},
			check: func(t *testing.T, out *configv1.Resources) {
				for _, vh := range out.GetVirtualHosts() {
					if vh.GetHostname() == "many.example.com" && len(vh.GetRoutes()) != len(manyPaths) {
						t.Errorf("%d routes served, want %d", len(vh.GetRoutes()), len(manyPaths))
					}
				}
				if fs := findingsOf(out, "Ingress", "hostile-many-paths"); len(fs) > 0 {
					t.Errorf("findings: %v", fs)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := keepObjects(all, func(name string) bool { return ordinary(name) || name == c.name })
			for _, o := range c.objects {
				switch o := o.(type) {
				case *corev1.Secret:
					in.Secrets = append(in.Secrets, o)
				case *networkingv1.Ingress:
					in.Ingresses = append(in.Ingresses, o)
				}
			}
			if len(in.Ingresses)+len(in.Secrets)+len(in.Gateways)+len(in.HTTPRoutes) == len(base.Ingresses)+len(base.Secrets)+len(base.Gateways)+len(base.HTTPRoutes) {
				t.Fatalf("no object named %s", c.name)
			}
			out := Translate(in, goldenOpts)
			own := func(o *configv1.ObjectRef) bool { return o.GetName() == c.name }
			assertOnlyOwnParts(t, baseOut, out, own)
			for _, w := range c.findings {
				found := false
				for _, f := range findingsOf(out, w.kind, w.name) {
					if f.GetField() == w.field && f.GetReason() == w.reason && strings.Contains(f.GetCause(), w.cause) {
						found = true
					}
				}
				if !found {
					t.Errorf("no finding %+v; the object has %v", w, findingsOf(out, w.kind, w.name))
				}
			}
			st := GatewayStatuses(in, goldenOpts)
			for _, w := range c.conds {
				found := false
				for _, cd := range conditionsOf(st, w.kind, w.name) {
					if cd.GetType() == w.typ && cd.GetStatus() == w.status && cd.GetReason() == w.reason {
						found = true
					}
				}
				if !found {
					t.Errorf("no condition %+v; the object shows %v", w, conditionsOf(st, w.kind, w.name))
				}
			}
			// The ordinary objects' statuses are untouched (but a Gateway's count of attached
			// routes, which counts the hostile routes too).
			for _, s := range baseStatus {
				for _, s2 := range st {
					if proto.Equal(s.GetKey(), s2.GetKey()) && !proto.Equal(s, s2) && s.GetKey().GetKind() != "Gateway" {
						t.Errorf("status of %v changed: %v, was %v", s.GetKey(), s2, s)
					}
				}
			}
			for _, h := range c.served {
				found := false
				for _, vh := range out.GetVirtualHosts() {
					found = found || (vh.GetHostname() == h && len(vh.GetRoutes()) > 0)
				}
				if !found {
					t.Errorf("host %s is not served", h)
				}
			}
			if c.check != nil {
				c.check(t, out)
			}
			// What the translator emits, no data plane refuses.
			for _, vh := range out.GetVirtualHosts() {
				for _, rt := range vh.GetRoutes() {
					if err := contract.CheckRoute(rt); err != nil {
						t.Errorf("route %s emitted, but a data plane refuses it: %v", rt.GetName(), err)
					}
				}
			}
		})
	}
}

// Every route of every golden translation passes contract.CheckRoute, the check both Caddy
// targets run: the data plane never refuses what the translator emitted.
func TestGoldenRoutesPassTheDataPlaneCheck(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range inputs {
		name := strings.TrimPrefix(path, "testdata/")
		for _, vh := range Translate(load(t, name), goldenOpts).GetVirtualHosts() {
			for _, rt := range vh.GetRoutes() {
				if err := contract.CheckRoute(rt); err != nil {
					t.Errorf("%s: route %s: %v", name, rt.GetName(), err)
				}
			}
		}
	}
}
