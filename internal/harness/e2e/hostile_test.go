package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-io/sluice/internal/pki"
	"github.com/sluice-io/sluice/internal/promtext"
)

// Scenario 8, as a hostile tenant would try it: objects the apiserver and the Gateway API's
// CRDs accept but that a data plane refuses, or that carry junk, each applied to a running
// system. After each one, the system still takes changes: a new ordinary Ingress is served,
// the routes served before still are, and no config is ever rejected by Caddy (the
// translator checks every route and certificate as the data plane does, and leaves out only
// the part at fault). Served-but-unusual values (303/307/308 redirects) are served.
func TestScenario8HostileObjectsNeverFreezeTheFleet(t *testing.T) {
	w := newGatewayWorld(t)
	ctx := context.Background()
	w.apply(`
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: web, namespace: NS}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: http, protocol: HTTP, port: 80, hostname: "*.DOMAIN", allowedRoutes: {namespaces: {from: Same}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: app, namespace: NS}
spec:
  parentRefs: [{name: web}]
  hostnames: [app.DOMAIN]
  rules: [{backendRefs: [{name: alpha, port: 80}]}]
`)
	w.startStack()
	served := func(host, backend string) {
		t.Helper()
		w.eventually(host+" served by "+backend, func() (bool, string) {
			a := w.request("http", host, "/", nil)
			return a.code == http.StatusOK && a.backend == backend, fmt.Sprintf("%d from %q", a.code, a.backend)
		})
	}
	served("app."+w.domain, "alpha")

	crt, key, err := pki.SelfSigned("junk." + w.domain)
	if err != nil {
		t.Fatal(err)
	}
	junk := append(append(append([]byte{}, crt...), []byte("-----BEGIN GARBAGE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END GARBAGE-----\n")...), []byte(strings.Repeat("x", 512<<10))...)
	otherCrt, _, err := pki.SelfSigned("other.example")
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name  string
		apply func()
		check func() // what the hostile object itself gets, when it is served at all
	}{
		{"redirects with 303, 307 and 308 (valid, Extended)", func() {
			w.apply(`
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: redirects, namespace: NS}
spec:
  parentRefs: [{name: web}]
  hostnames: [redirects.DOMAIN]
  rules:
  - matches: [{path: {type: PathPrefix, value: /see-other}}]
    filters: [{type: RequestRedirect, requestRedirect: {hostname: elsewhere.example, statusCode: 303}}]
  - matches: [{path: {type: PathPrefix, value: /temporary}}]
    filters: [{type: RequestRedirect, requestRedirect: {hostname: elsewhere.example, statusCode: 307}}]
  - matches: [{path: {type: PathPrefix, value: /permanent}}]
    filters: [{type: RequestRedirect, requestRedirect: {hostname: elsewhere.example, statusCode: 308}}]
`)
		}, func() {
			for path, code := range map[string]int{"/see-other": 303, "/temporary": 307, "/permanent": 308} {
				w.eventually("redirect "+path, func() (bool, string) {
					a := w.request("http", "redirects."+w.domain, path, nil)
					return a.code == code && strings.Contains(a.location, "elsewhere.example"), fmt.Sprintf("%d to %q", a.code, a.location)
				})
			}
		}},
		{"a header modifier removing an empty name", func() {
			w.apply(`
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: empty-remove, namespace: NS}
spec:
  parentRefs: [{name: web}]
  hostnames: [empty-remove.DOMAIN]
  rules:
  - filters: [{type: RequestHeaderModifier, requestHeaderModifier: {remove: [""]}}]
    backendRefs: [{name: beta, port: 80}]
`)
		}, func() {
			w.eventually("the empty-remove route refused in its status", func() (bool, string) {
				c := w.condition("httproute", w.ns, "empty-remove", ".status.parents[0]", "Accepted")
				return strings.HasPrefix(c, "False/"), c
			})
		}},
		{"a TLS Secret whose chain holds junk after the leaf", func() {
			if _, err := w.c.Client.CoreV1().Secrets(w.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "junk-tls"}, Type: corev1.SecretTypeTLS,
				Data: map[string][]byte{corev1.TLSCertKey: junk, corev1.TLSPrivateKeyKey: key}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			ing := ingress("junk-tls", "junk."+w.domain, "beta")
			ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"junk." + w.domain}, SecretName: "junk-tls"}}
			if _, err := w.c.Client.NetworkingV1().Ingresses(w.ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, func() { served("junk."+w.domain, "beta") }}, // over HTTP: the certificate is refused, the routes are not
		{"a TLS Secret whose key does not match its certificate", func() {
			_, otherKey, err := pki.SelfSigned("other.example")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.c.Client.CoreV1().Secrets(w.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mismatch-tls"}, Type: corev1.SecretTypeTLS,
				Data: map[string][]byte{corev1.TLSCertKey: otherCrt, corev1.TLSPrivateKeyKey: otherKey}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			ing := ingress("mismatch-tls", "mismatch."+w.domain, "beta")
			ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"mismatch." + w.domain}, SecretName: "mismatch-tls"}}
			if _, err := w.c.Client.NetworkingV1().Ingresses(w.ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, func() { served("mismatch."+w.domain, "beta") }},
		{"an Ingress with two thousand paths", func() {
			ing := ingress("many-paths", "many."+w.domain, "alpha")
			pt := networkingv1.PathTypePrefix
			base := ing.Spec.Rules[0].HTTP.Paths[0]
			for i := range 2000 {
				p := base
				p.Path, p.PathType = fmt.Sprintf("/p%d", i), &pt
				ing.Spec.Rules[0].HTTP.Paths = append(ing.Spec.Rules[0].HTTP.Paths, p)
			}
			if _, err := w.c.Client.NetworkingV1().Ingresses(w.ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, func() { served("many."+w.domain, "alpha") }},
	}
	for i, s := range steps {
		s.apply()
		// The system still takes changes: a new ordinary Ingress after the hostile object.
		fresh := fmt.Sprintf("fresh%d.%s", i, w.domain)
		if _, err := w.c.Client.NetworkingV1().Ingresses(w.ns).Create(ctx, ingress(fmt.Sprintf("fresh-%d", i), fresh, "beta"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		served(fresh, "beta")
		served("app."+w.domain, "alpha")
		s.check()
		if n := promtext.Value(w.st.PusherHTTP, "sluice_pusher_configs_rejected_total"); n != 0 {
			t.Fatalf("after %s: Caddy rejected %v configs; the translator must emit nothing a data plane refuses", s.name, n)
		}
	}
}
