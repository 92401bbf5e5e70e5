package translate

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Cold start: the compact form of an EndpointSlice applies the API's defaults for absent
// conditions as translation always read them (ready when unset; serving as ready when unset;
// not terminating when unset), and keeps its Service, address type and ports.
func TestCompactSliceReadsConditionsAsTheAPIDefinesThem(t *testing.T) {
	yes, no := ptr.To(true), ptr.To(false)
	for _, tc := range []struct {
		name string
		cond discoveryv1.EndpointConditions
		want sliceEndpoint
	}{
		{"none set", discoveryv1.EndpointConditions{}, sliceEndpoint{Ready: true, Serving: true}},
		{"not ready, serving unset", discoveryv1.EndpointConditions{Ready: no}, sliceEndpoint{}},
		{"ready, serving unset", discoveryv1.EndpointConditions{Ready: yes}, sliceEndpoint{Ready: true, Serving: true}},
		{"terminating and still serving", discoveryv1.EndpointConditions{Ready: no, Serving: yes, Terminating: yes}, sliceEndpoint{Serving: true, Terminating: true}},
		{"ready but not serving", discoveryv1.EndpointConditions{Ready: yes, Serving: no, Terminating: no}, sliceEndpoint{Ready: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Namespace: "shop", Name: "web-x", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}, {Port: ptr.To[int32](9090)}, {Name: ptr.To("none")}},
				Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: tc.cond}},
			}
			c := compactSlice(s)
			got := c.Endpoints[0]
			if got.Ready != tc.want.Ready || got.Serving != tc.want.Serving || got.Terminating != tc.want.Terminating || got.Addresses[0] != "10.0.0.1" {
				t.Fatalf("endpoint %+v, want ready %v serving %v terminating %v", got, tc.want.Ready, tc.want.Serving, tc.want.Terminating)
			}
			wantPorts := []slicePort{{Name: "http", Port: 8080, Set: true}, {Port: 9090, Set: true}, {Name: "none"}}
			if c.service != "web" || c.AddressType != discoveryv1.AddressTypeIPv4 || len(c.Ports) != 3 {
				t.Fatalf("slice %+v", c)
			}
			for i, p := range wantPorts {
				if c.Ports[i] != p {
					t.Fatalf("port %d %+v, want %+v", i, c.Ports[i], p)
				}
			}
		})
	}
}

// Cold start: the compact form of a Service keeps what translation reads of it.
func TestCompactServiceKeepsWhatTranslationReads(t *testing.T) {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "u1", Labels: map[string]string{"app": "web"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.1",
			Ports:       []corev1.ServicePort{{Name: "http", Port: 80, AppProtocol: ptr.To("kubernetes.io/h2c")}},
			ExternalIPs: []string{"192.0.2.1"}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "198.51.100.1"}}}}}
	c := compactService(s)
	if c.Namespace != "shop" || c.Name != "web" || c.UID != "u1" || c.Spec.Type != corev1.ServiceTypeLoadBalancer ||
		len(c.Spec.Ports) != 1 || c.Spec.Ports[0].Name != "http" || *c.Spec.Ports[0].AppProtocol != "kubernetes.io/h2c" ||
		len(c.Spec.ExternalIPs) != 1 || c.Status.LoadBalancer.Ingress[0].IP != "198.51.100.1" {
		t.Fatalf("compact service %+v", c)
	}
}

// Cold start: an Ingress held encoded is translated again from its encoding; an encoding
// that no longer decodes (never expected: the same bytes decoded when they came) leaves the
// Ingress out with a finding that says so, and nothing else is lost.
func TestIngressTranslatedAgainFromItsEncoding(t *testing.T) {
	inc := New(Options{IngressClass: "sluice", ControllerName: "sluice.io/ingress-controller"})
	inc.Set(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}})
	good := encoded(t, newIngress("good", "good.example.com", nil, false, ingressPath("/", networkingv1.PathTypePrefix, "web")))
	bad := encoded(t, newIngress("bad", "bad.example.com", nil, false, ingressPath("/", networkingv1.PathTypePrefix, "web")))
	bad.Wire.Raw = []byte("no longer protobuf")
	inc.Set(good)
	inc.Set(bad)
	inc.Build() // the first translation of each reads the object decoded on arrival
	routesTo := func(host string) int {
		for _, vh := range inc.State().Resources().GetVirtualHosts() {
			if vh.GetHostname() == host {
				return len(vh.GetRoutes())
			}
		}
		return 0
	}
	if routesTo("good.example.com") != 1 || routesTo("bad.example.com") != 1 {
		t.Fatalf("first build: routes %d and %d, want one each", routesTo("good.example.com"), routesTo("bad.example.com"))
	}
	// A change to the Service they name translates both again, from their encodings.
	inc.Set(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}, {Port: 81}}}})
	inc.Build()
	if routesTo("good.example.com") != 1 {
		t.Fatalf("the Ingress translated again from its encoding has %d routes, want 1", routesTo("good.example.com"))
	}
	if routesTo("bad.example.com") != 0 {
		t.Fatal("an Ingress whose encoding does not decode is still served")
	}
	fs := findingsOf(inc.State().Resources(), "Ingress", "bad")
	if len(fs) != 1 || fs[0].GetReason() != "Undecodable" {
		t.Fatalf("findings of the undecodable Ingress: %v", fs)
	}
	for _, f := range findingsOf(inc.State().Resources(), "Ingress", "good") {
		if f.GetReason() == "Undecodable" {
			t.Fatalf("the good Ingress is found undecodable: %v", f)
		}
	}
}
