package e2e_test

import (
	"fmt"
	"testing"
)

// allowedRoutes.namespaces.from Selector, end to end: a listener admits an HTTPRoute of a
// namespace whose labels match its selector, and the route is served; relabelling the
// namespace so that it no longer matches detaches the route (Accepted=False
// NotAllowedByListeners) and the host is no longer served. The watcher runs with
// --namespaces, so it reads each watched Namespace alone.
func TestSelectorListenerFollowsNamespaceLabels(t *testing.T) {
	w := newGatewayWorld(t)
	w.kube("", "label", "namespace", w.other, "sluice-e2e-team=selected")
	w.apply(`
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: selective, namespace: NS}
spec:
  gatewayClassName: sluice
  listeners:
  - name: http
    protocol: HTTP
    port: 80
    hostname: "*.DOMAIN"
    allowedRoutes: {namespaces: {from: Selector, selector: {matchLabels: {sluice-e2e-team: selected}}}}
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: routes-from-other, namespace: NS}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: OTHER}]
  to: [{group: "", kind: Service}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: labelled, namespace: OTHER}
spec:
  parentRefs: [{name: selective, namespace: NS}]
  hostnames: [labelled.DOMAIN]
  rules: [{backendRefs: [{name: beta, namespace: NS, port: 80}]}]
`)
	w.startStack()

	host := "labelled." + w.domain
	w.eventually("the route of the labelled namespace is served", func() (bool, string) {
		a := w.request("http", host, "/", nil)
		return a.backend == "beta", fmt.Sprint(a.code, " ", a.backend)
	})
	w.eventually("the route is Accepted", func() (bool, string) {
		c := w.condition("httproute", w.other, "labelled", ".status.parents[0]", "Accepted")
		return c == "True/Accepted", c
	})
	w.eventually("the listener counts the route", func() (bool, string) {
		n := w.kube("", "get", "gateway", "-n", w.ns, "selective", "-o", "jsonpath={.status.listeners[0].attachedRoutes}")
		return n == "1", n
	})

	w.kube("", "label", "namespace", w.other, "sluice-e2e-team=elsewhere", "--overwrite")
	w.eventually("the relabelled namespace's route is detached", func() (bool, string) {
		c := w.condition("httproute", w.other, "labelled", ".status.parents[0]", "Accepted")
		return c == "False/NotAllowedByListeners", c
	})
	w.eventually("the route is no longer served", func() (bool, string) {
		a := w.request("http", host, "/", nil)
		return a.code != -1 && a.backend == "", fmt.Sprint(a.code, " ", a.backend)
	})
}
