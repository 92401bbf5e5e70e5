package translate

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// benchInput is n Ingresses, each with its Service and EndpointSlice (3 endpoints), a tenth
// of them with TLS (the golden certificate's Secret).
func benchInput(tb testing.TB, n int) Input {
	tb.Helper()
	tlsIn := load(tb, "tls.yaml")
	var secret *corev1.Secret
	for _, s := range tlsIn.Secrets {
		if s.Name == "secure-cert" {
			secret = s
		}
	}
	var in Input
	cls := "sluice"
	in.IngressClasses = []*networkingv1.IngressClass{{ObjectMeta: metav1.ObjectMeta{Name: cls}, Spec: networkingv1.IngressClassSpec{Controller: "sluice.io/ingress-controller"}}}
	pt := networkingv1.PathTypePrefix
	for i := 0; i < n; i++ {
		ns, name := fmt.Sprintf("ns%d", i%50), fmt.Sprintf("app%d", i)
		in.Services = append(in.Services, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}})
		in.EndpointSlices = append(in.EndpointSlices, &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: name}}, AddressType: discoveryv1.AddressTypeIPv4,
			Ports:     []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080))}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{fmt.Sprintf("10.%d.%d.1", i/250, i%250)}}, {Addresses: []string{fmt.Sprintf("10.%d.%d.2", i/250, i%250)}}, {Addresses: []string{fmt.Sprintf("10.%d.%d.3", i/250, i%250)}}},
		})
		host := fmt.Sprintf("%s.%s.example.com", name, ns)
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: networkingv1.IngressSpec{IngressClassName: &cls,
			Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{
				{Path: "/", PathType: &pt, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name, Port: networkingv1.ServiceBackendPort{Name: "http"}}}},
				{Path: "/api", PathType: &pt, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name, Port: networkingv1.ServiceBackendPort{Number: 80}}}},
			}}}}}}}
		if i%10 == 0 {
			s := secret.DeepCopy()
			s.Namespace, s.Name = ns, name+"-tls"
			in.Secrets = append(in.Secrets, s)
			ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{host}, SecretName: s.Name}}
		}
		in.Ingresses = append(in.Ingresses, ing)
	}
	return in
}

// BenchmarkTranslate is a full translation, with the hash, at 1k and 10k Ingresses.
func BenchmarkTranslate(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		in := benchInput(b, n)
		b.Run(fmt.Sprintf("ingresses=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = Hash(Translate(in, goldenOpts))
			}
		})
	}
}

// BenchmarkChange is the cost of one change with the incremental translator at 1k, 10k and
// 100k Ingresses (each with its Service and EndpointSlice): an Ingress's path changed, or an
// EndpointSlice's endpoints, then Build and the delta to send, with its serialised size.
// Side by side, the sizes show whether the cost of a change grows with the cluster.
func BenchmarkChange(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		in := benchInput(b, n)
		tr := New(goldenOpts)
		for _, o := range in.objects() {
			tr.Set(o)
		}
		tr.Build()
		tr.State().TakeDelta()
		seq := 0 // across runs, so that every change is new
		for _, kind := range []string{"ingress", "endpointslice"} {
			b.Run(fmt.Sprintf("ingresses=%d/change=%s", n, kind), func(b *testing.B) {
				b.ReportAllocs()
				i, bytes := 0, 0
				for b.Loop() {
					seq++
					switch kind {
					case "ingress":
						ing := in.Ingresses[i%n].DeepCopy()
						ing.Spec.Rules[0].HTTP.Paths[1].Path = fmt.Sprintf("/api%d", seq)
						tr.Set(ing)
					default:
						s := in.EndpointSlices[i%n].DeepCopy()
						s.Endpoints[0].Addresses[0] = fmt.Sprintf("10.%d.%d.%d", 100+seq/62500%100, seq/250%250, seq%250)
						tr.Set(s)
					}
					tr.Build()
					d := tr.State().TakeDelta()
					d.Hash = tr.State().Hash()
					bytes += proto.Size(d)
					i++
				}
				b.ReportMetric(float64(bytes)/float64(i), "delta-bytes/op")
			})
		}
	}
}
