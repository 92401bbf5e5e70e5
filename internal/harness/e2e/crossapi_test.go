package e2e_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/sluice-io/sluice/internal/pki"
)

// Hosts across the two APIs, end to end: an Ingress serves a host with its certificate; an
// HTTPRoute of another namespace, allowed on a shared Gateway, claims the same host. The
// older Ingress keeps it (backend and certificate, over HTTP and HTTPS) and the route reports
// Accepted=False ConflictLost. With the Ingress gone the route is served; the Ingress made
// again is the newer claim: refused, with a Warning Event, while the route keeps the host.
func TestHostAcrossAPIsOlderClaimKeepsIt(t *testing.T) {
	w := newGatewayWorld(t)
	shop := "shop." + w.domain
	for name, host := range map[string]string{"ing-tls": shop, "gw-tls": "*." + w.domain} {
		certPEM, keyPEM, err := pki.SelfSigned(host)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.c.Client.CoreV1().Secrets(w.ns).Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
			Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const ingressYAML = `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop
  namespace: NS
  # Who owns the host is read over both schemes, so HTTP is served rather than redirected.
  annotations: {sluice.io/ssl-redirect: "false"}
spec:
  ingressClassName: sluice
  tls: [{hosts: [shop.DOMAIN], secretName: ing-tls}]
  rules:
  - host: shop.DOMAIN
    http:
      paths: [{path: /, pathType: Prefix, backend: {service: {name: alpha, port: {name: http}}}}]
`
	w.apply(`
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: shared, namespace: NS}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: http, protocol: HTTP, port: 80, hostname: "*.DOMAIN", allowedRoutes: {namespaces: {from: All}}}
  - name: https
    protocol: HTTPS
    port: 443
    hostname: "*.DOMAIN"
    tls: {mode: Terminate, certificateRefs: [{name: gw-tls}]}
    allowedRoutes: {namespaces: {from: All}}
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: from-other, namespace: NS}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: OTHER}]
  to: [{group: "", kind: Service, name: beta}]
---` + ingressYAML)
	w.startStack()

	// served says who answers the host over HTTP and HTTPS, and the names of the certificate.
	served := func() (http, https, cert string) {
		http, https = w.request("http", shop, "/", nil).backend, w.request("https", shop, "/", nil).backend
		conn, err := tls.Dial("tcp", w.st.HTTPSAddr(), &tls.Config{ServerName: shop, InsecureSkipVerify: true})
		if err != nil {
			return http, https, "error: " + err.Error()
		}
		defer conn.Close()
		return http, https, strings.Join(conn.ConnectionState().PeerCertificates[0].DNSNames, ",")
	}
	expect := func(what, backend, cert string) {
		t.Helper()
		w.eventually(what, func() (bool, string) {
			h, s, c := served()
			return h == backend && s == backend && c == cert, fmt.Sprintf("http %q, https %q, certificate for %q", h, s, c)
		})
	}
	expect("the Ingress serves its host with its certificate", "alpha", shop)

	w.apply(`
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: takeover, namespace: OTHER}
spec:
  parentRefs: [{name: shared, namespace: NS}]
  hostnames: [shop.DOMAIN]
  rules: [{backendRefs: [{name: beta, namespace: NS, port: 80}]}]
`)
	w.eventually("the newer HTTPRoute of another namespace is refused the host", func() (bool, string) {
		c := w.condition("httproute", w.other, "takeover", ".status.parents[0]", "Accepted")
		return c == "False/ConflictLost", c
	})
	for range 10 {
		if h, s, c := served(); h != "alpha" || s != "alpha" || c != shop {
			t.Fatalf("with the HTTPRoute refused: http %q, https %q, certificate for %q; want the Ingress's alpha and certificate", h, s, c)
		}
	}

	// The older claim gone, the route is served; the Ingress made again is the newer claim.
	w.kube("", "delete", "ingress", "-n", w.ns, "shop")
	expect("the HTTPRoute serves the host once the Ingress is gone", "beta", "*."+w.domain)
	w.eventually("the HTTPRoute is accepted", func() (bool, string) {
		c := w.condition("httproute", w.other, "takeover", ".status.parents[0]", "Accepted")
		return c == "True/Accepted", c
	})
	// creationTimestamp counts seconds: made in the route's second, the Ingress would tie, and
	// a tie goes to the first namespace (this one).
	created, err := time.Parse(time.RFC3339, strings.TrimSpace(w.kube("", "get", "httproute", "-n", w.other, "takeover", "-o", "jsonpath={.metadata.creationTimestamp}")))
	if err != nil {
		t.Fatal(err)
	}
	w.eventually("the clock past the HTTPRoute's creation second", func() (bool, string) {
		now := time.Now().UTC().Truncate(time.Second)
		return now.After(created), now.Format(time.RFC3339)
	})
	w.apply(ingressYAML)
	sel := fields.Set{"involvedObject.kind": "Ingress", "involvedObject.name": "shop", "type": corev1.EventTypeWarning, "reason": "ConflictLost"}.AsSelector().String()
	w.eventually("the newer Ingress gets a Warning Event ConflictLost at spec.rules[0].host", func() (bool, string) {
		list, err := w.c.Client.CoreV1().Events(w.ns).List(context.Background(), metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return false, err.Error()
		}
		var msgs []string
		for _, e := range list.Items {
			if strings.HasPrefix(e.Message, "spec.rules[0].host: ") && strings.Contains(e.Message, "HTTPRoute "+w.other+"/takeover") {
				return true, e.Message
			}
			msgs = append(msgs, e.Message)
		}
		return false, strings.Join(msgs, " | ")
	})
	for range 10 {
		if h, s, c := served(); h != "beta" || s != "beta" || c != "*."+w.domain {
			t.Fatalf("with the newer Ingress refused: http %q, https %q, certificate for %q; want the HTTPRoute's beta and the listener's certificate", h, s, c)
		}
	}
}
