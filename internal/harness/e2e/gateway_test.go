package e2e_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sluice-io/sluice/internal/harness/stack"
	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/internal/pki"
)

// gwWorld is a world with the Gateway API: its own cluster (the CRDs it installs must not
// change what the other tests' watchers serve), a second namespace, and kubectl.
type gwWorld struct {
	*world
	other   string // the second namespace: routes there reach w.ns only with a ReferenceGrant
	kubectl string
	domain  string // every host of the test ends in it
}

// gatewayCRDs is the committed copy of the pinned Gateway API's standard-channel CRDs.
func gatewayCRDs(t *testing.T) string {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, testenv.GatewayAPIInstallFile)
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func newGatewayWorld(t *testing.T) *gwWorld {
	t.Helper()
	c, err := testenv.StartCluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	kubectl, err := testenv.ToolPath("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	c.Workloads(t)
	w := &gwWorld{world: &world{t: t, c: c, ns: c.Namespace(t)}, kubectl: kubectl}
	w.other = w.ns + "-b"
	if _, err := c.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.other}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.domain = w.ns + ".gw.example.com"
	// As a user installs them: kubectl, server-side (the CRDs are too large for the
	// last-applied annotation).
	w.kube("", "apply", "--server-side", "-f", gatewayCRDs(t))
	w.kube("", "wait", "--for", "condition=Established", "--timeout", "60s", "crd/gatewayclasses.gateway.networking.k8s.io",
		"crd/gateways.gateway.networking.k8s.io", "crd/httproutes.gateway.networking.k8s.io", "crd/referencegrants.gateway.networking.k8s.io")
	ensureClass(t, c)
	w.startBackends()
	return w
}

// kube runs kubectl with the admin kubeconfig, stdin as given, and returns its output.
func (w *gwWorld) kube(stdin string, args ...string) string {
	w.t.Helper()
	cmd := exec.Command(w.kubectl, append([]string{"--kubeconfig", w.c.AdminKubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		w.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// apply applies manifests, with NS, OTHER and DOMAIN replaced.
func (w *gwWorld) apply(manifests string) {
	w.t.Helper()
	r := strings.NewReplacer("NS", w.ns, "OTHER", w.other, "DOMAIN", w.domain)
	w.kube(r.Replace(manifests), "apply", "-f", "-")
}

// gwAnswer is what one request through Caddy got.
type gwAnswer struct {
	code     int
	backend  string // the backend's Service, when a backend answered
	path     string // the path the backend saw
	location string
	header   http.Header
}

func (w *gwWorld) request(scheme, host, path string, header map[string]string) gwAnswer {
	addr := w.st.HTTPAddr()
	tr := &http.Transport{}
	if scheme == "https" {
		addr = w.st.HTTPSAddr()
		tr.TLSClientConfig = &tls.Config{ServerName: host, InsecureSkipVerify: true, // self-signed; the name is checked below
			VerifyConnection: func(cs tls.ConnectionState) error { return cs.PeerCertificates[0].VerifyHostname(host) }}
	}
	client := &http.Client{Timeout: 3 * time.Second, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest(http.MethodGet, scheme+"://"+addr+path, nil)
	req.Host = host
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return gwAnswer{code: -1}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	a := gwAnswer{code: resp.StatusCode, location: resp.Header.Get("Location"), header: resp.Header}
	var b testenv.BackendAnswer
	if resp.StatusCode == http.StatusOK && json.Unmarshal(body, &b) == nil {
		a.backend, a.path = strings.TrimSuffix(b.Backend, "-"+w.ns), b.Path
	}
	return a
}

// eventually polls cond until it holds, failing with what it last saw.
func (w *gwWorld) eventually(what string, cond func() (bool, string)) {
	w.t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		ok, seen := cond()
		last = seen
		return ok, nil
	})
	if err != nil {
		w.t.Fatalf("%s: not so after a minute; last seen: %s", what, last)
	}
}

// condition returns "status/reason" of a condition read with a kubectl jsonpath prefix.
func (w *gwWorld) condition(kind, ns, name, prefix, typ string) string {
	w.t.Helper()
	path := fmt.Sprintf(`jsonpath={%s.conditions[?(@.type=="%s")].status}/{%s.conditions[?(@.type=="%s")].reason}`, prefix, typ, prefix, typ)
	return strings.TrimSpace(w.kube("", "get", kind, "-n", ns, name, "-o", path))
}

// The Gateway API end to end (docs/translation.md): a Gateway with an HTTP and an HTTPS listener, HTTPRoutes in two
// namespaces (one needing a ReferenceGrant, added mid-test), a header match, a weighted split,
// a redirect (HTTP to HTTPS, and a path prefix), a rewrite and a response header, each checked
// with real requests through Caddy; the conditions as kubectl shows them.
func TestGatewayAPIServedEndToEnd(t *testing.T) {
	w := newGatewayWorld(t)
	certPEM, keyPEM, err := pki.SelfSigned("secure." + w.domain)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.c.Client.CoreV1().Secrets(w.ns).Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gw-tls"},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.apply(`
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: someone-else}
spec: {controllerName: example.com/another-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: web, namespace: NS}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: http, protocol: HTTP, port: 80, hostname: "*.DOMAIN", allowedRoutes: {namespaces: {from: All}}}
  - name: https
    protocol: HTTPS
    port: 443
    hostname: secure.DOMAIN
    tls: {mode: Terminate, certificateRefs: [{name: gw-tls}]}
  - {name: odd-port, protocol: HTTP, port: 8081, hostname: odd.DOMAIN}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: not-ours, namespace: NS}
spec:
  gatewayClassName: someone-else
  listeners: [{name: http, protocol: HTTP, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: app, namespace: NS}
spec:
  parentRefs: [{name: web, sectionName: http}]
  hostnames: [app.DOMAIN]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}, headers: [{name: x-env, value: canary}]}]
    backendRefs: [{name: beta, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /old}}]
    filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /new}, statusCode: 301}}]
  - matches: [{path: {type: PathPrefix, value: /v1}}]
    filters:
    - {type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /v2}}}
    - {type: ResponseHeaderModifier, responseHeaderModifier: {set: [{name: x-served-by, value: sluice}]}}
    backendRefs: [{name: alpha, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs: [{name: alpha, port: 80, weight: 1}, {name: beta, port: 80, weight: 1}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: secure, namespace: NS}
spec:
  parentRefs: [{name: web, sectionName: https}]
  hostnames: [secure.DOMAIN]
  rules: [{backendRefs: [{name: alpha, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: secure-redirect, namespace: NS}
spec:
  parentRefs: [{name: web, sectionName: http}]
  hostnames: [secure.DOMAIN]
  rules: [{filters: [{type: RequestRedirect, requestRedirect: {scheme: https, statusCode: 301}}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: cross, namespace: OTHER}
spec:
  parentRefs: [{name: web, namespace: NS, sectionName: http}]
  hostnames: [cross.DOMAIN]
  rules: [{backendRefs: [{name: beta, namespace: NS, port: 80}]}]
`)
	w.startStack()

	app := "app." + w.domain
	w.eventually("the header match sends x-env: canary to beta", func() (bool, string) {
		a := w.request("http", app, "/", map[string]string{"x-env": "canary"})
		return a.backend == "beta", fmt.Sprint(a.code, " ", a.backend)
	})
	for range 10 {
		if a := w.request("http", app, "/anything", map[string]string{"x-env": "canary"}); a.backend != "beta" {
			t.Fatalf("x-env: canary answered by %q (%d), want beta every time", a.backend, a.code)
		}
	}
	seen := map[string]int{}
	for range 60 {
		seen[w.request("http", app, "/", nil).backend]++
	}
	if seen["alpha"] == 0 || seen["beta"] == 0 || seen["alpha"]+seen["beta"] != 60 {
		t.Fatalf("the 1:1 split answered %v over 60 requests, want both backends and nothing else", seen)
	}
	if a := w.request("http", app, "/old/page?q=1", nil); a.code != http.StatusMovedPermanently || !strings.HasSuffix(a.location, "/new/page?q=1") {
		t.Fatalf("/old/page: %d Location %q, want 301 to .../new/page?q=1", a.code, a.location)
	}
	if a := w.request("http", app, "/v1/items", nil); a.backend != "alpha" || a.path != "/v2/items" || a.header.Get("X-Served-By") != "sluice" {
		t.Fatalf("/v1/items: backend %q saw %q, x-served-by %q; want alpha, /v2/items, sluice", a.backend, a.path, a.header.Get("X-Served-By"))
	}

	secure := "secure." + w.domain
	if a := w.request("https", secure, "/x", nil); a.backend != "alpha" {
		t.Fatalf("https://%s/x: %d %q, want alpha over TLS with the listener's certificate", secure, a.code, a.backend)
	}
	if a := w.request("http", secure, "/x", nil); a.code != http.StatusMovedPermanently || !strings.HasPrefix(a.location, "https://"+secure) {
		t.Fatalf("http://%s/x: %d Location %q, want 301 to https", secure, a.code, a.location)
	}
	// The HTTPS listener's route is not served on plain HTTP, nor the HTTP listener's on TLS.
	if a := w.request("https", app, "/", nil); a.backend != "" {
		t.Fatalf("https://%s/ was answered by %s: the HTTP listener's route leaked onto HTTPS", app, a.backend)
	}

	// A route in another namespace whose backend needs a ReferenceGrant: refused (500), then
	// served once the grant is there.
	cross := "cross." + w.domain
	w.eventually("the cross-namespace route is refused with RefNotPermitted", func() (bool, string) {
		c := w.condition("httproute", w.other, "cross", ".status.parents[0]", "ResolvedRefs")
		return c == "False/RefNotPermitted", c
	})
	// The Gateway API's answer for a rule whose only backend is invalid: 500.
	w.eventually("the cross-namespace route answers 500 without a ReferenceGrant", func() (bool, string) {
		a := w.request("http", cross, "/", nil)
		return a.code == http.StatusInternalServerError && a.backend == "", fmt.Sprint(a.code, " ", a.backend)
	})
	w.apply(`
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: from-other, namespace: NS}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: OTHER}]
  to: [{group: "", kind: Service, name: beta}]
`)
	w.eventually("the cross-namespace route is served once the ReferenceGrant exists", func() (bool, string) {
		a := w.request("http", cross, "/", nil)
		return a.backend == "beta", fmt.Sprint(a.code, " ", a.backend)
	})
	w.eventually("the cross-namespace route's refs resolve", func() (bool, string) {
		c := w.condition("httproute", w.other, "cross", ".status.parents[0]", "ResolvedRefs")
		return c == "True/ResolvedRefs", c
	})

	// Status, as kubectl shows it.
	w.eventually("the Gateway is Programmed with the published address", func() (bool, string) {
		out := w.kube("", "get", "gateway", "-n", w.ns, "web")
		return strings.Contains(out, "192.0.2.10") && strings.Contains(out, "True"), out
	})
	for _, c := range []struct{ kind, ns, name, prefix, typ, want string }{
		{"gatewayclass", "", "sluice", ".status", "Accepted", "True/Accepted"},
		// Accepted with one listener invalid: the spec's partial acceptance.
		{"gateway", w.ns, "web", ".status", "Accepted", "True/ListenersNotValid"},
		{"gateway", w.ns, "web", ".status", "Programmed", "True/Programmed"},
		{"gateway", w.ns, "web", `.status.listeners[?(@.name=="odd-port")]`, "Accepted", "False/PortUnavailable"},
		{"httproute", w.ns, "app", ".status.parents[0]", "Accepted", "True/Accepted"},
		{"httproute", w.ns, "app", ".status.parents[0]", "ResolvedRefs", "True/ResolvedRefs"},
	} {
		w.eventually(fmt.Sprintf("%s %s: %s is %s", c.kind, c.name, c.typ, c.want), func() (bool, string) {
			got := w.condition(c.kind, c.ns, c.name, c.prefix, c.typ)
			return got == c.want, got
		})
	}
	w.eventually("the http listener counts its attached routes", func() (bool, string) {
		got := strings.TrimSpace(w.kube("", "get", "gateway", "-n", w.ns, "web", "-o", `jsonpath={.status.listeners[?(@.name=="http")].attachedRoutes}`))
		return got == "3", got // app, secure-redirect, cross
	})
	// A class of another controller is never written.
	if out := w.kube("", "get", "gatewayclass", "someone-else", "-o", "jsonpath={.status.conditions[*].reason}"); strings.Contains(out, "Accepted") && !strings.Contains(out, "Pending") {
		t.Fatalf("the other controller's GatewayClass got a status: %s", out)
	}
	t.Logf("kubectl get gateway,httproute:\n%s", w.kube("", "get", "gateway,httproute", "-A"))
}

// startStack starts the system watching both namespaces.
func (w *gwWorld) startStack() {
	w.t.Helper()
	w.start(stack.Config{Namespaces: []string{w.other}, TranslatorArgs: []string{"--publish-address", "192.0.2.10"}})
}

// Scenario 1 for the Gateway API: the watcher restarted with the list of HTTPRoutes forbidden
// (--gateway-api=on). No marker, nothing pushed, Caddy keeps serving the HTTPRoute's and the
// Ingress's routes, and the watcher exits after the timeout naming the kind.
func TestScenario1WatcherRestartedWithHTTPRouteListForbidden(t *testing.T) {
	w := newGatewayWorld(t)
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
  listeners: [{name: http, protocol: HTTP, port: 80, hostname: "*.DOMAIN"}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: app, namespace: NS}
spec:
  parentRefs: [{name: web}]
  hostnames: [app.DOMAIN]
  rules: [{backendRefs: [{name: beta, port: 80}]}]
`)
	w.createRoutes(0, 2)
	w.startStack()
	app := "app." + w.domain
	w.eventually("the HTTPRoute is served", func() (bool, string) {
		a := w.request("http", app, "/", nil)
		return a.backend == "beta", fmt.Sprint(a.code, " ", a.backend)
	})
	w.waitServed(0, 2, time.Minute)
	hash, applied := w.caddyHash(), w.pusherApplied()

	w.restartWatcherWith(w.restrictedKubeconfig("httproutes"), "--gateway-api", "on", "--sync-timeout", "4s")
	if code := w.st.Watcher.WaitExit(t, time.Minute); code == 0 {
		t.Fatal("the watcher exited 0")
	}
	if logs := w.st.Watcher.Logs(); !strings.Contains(logs, "gateway.networking.k8s.io/v1/httproutes: forbidden (403)") {
		t.Fatalf("the watcher did not name the kind and the 403:\n%s", w.st.Watcher.LogTail(5))
	}
	if h := w.caddyHash(); h != hash {
		t.Fatalf("Caddy's config changed from %.12s to %.12s", hash, h)
	}
	if a := w.pusherApplied(); a != applied {
		t.Fatalf("the pusher applied %v configs while the watcher could not sync", a-applied)
	}
	if a := w.request("http", app, "/", nil); a.backend != "beta" {
		t.Fatalf("the HTTPRoute's host answered %d %q while the watcher could not sync, want beta", a.code, a.backend)
	}
	w.waitServed(0, 2, time.Second)
	// With its permissions back, the watcher converges the system again.
	if err := w.st.StartWatcher(); err != nil {
		t.Fatal(err)
	}
	w.apply(`
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: app, namespace: NS}
spec:
  parentRefs: [{name: web}]
  hostnames: [app.DOMAIN]
  rules: [{backendRefs: [{name: alpha, port: 80}]}]
`)
	w.eventually("the changed HTTPRoute is served", func() (bool, string) {
		a := w.request("http", app, "/", nil)
		return a.backend == "alpha", fmt.Sprint(a.code, " ", a.backend)
	})
}
