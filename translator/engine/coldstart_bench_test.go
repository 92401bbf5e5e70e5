package engine

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/pki"
	"github.com/sluice-io/sluice/internal/watchstream"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/translator/translate"
)

// coldObjects is the benchmark's cluster as the watcher streams it: n Ingresses, each with
// its Service and EndpointSlice, a TLS Secret for every tenth, and the IngressClass, in the
// snapshot's kind order, encoded as the watcher encodes them.
func coldObjects(tb testing.TB, n int) ([]*watchv1.Object, []*watchv1.KindInventory, []*watchv1.GroupVersionKind) {
	tb.Helper()
	ser := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	rv := 0
	enc := func(o runtime.Object, gvk schema.GroupVersionKind) *watchv1.Object {
		rv++
		acc := o.(metav1.Object)
		acc.SetResourceVersion(fmt.Sprint(rv))
		o.GetObjectKind().SetGroupVersionKind(gvk)
		var buf bytes.Buffer
		if err := ser.Encode(o, &buf); err != nil {
			tb.Fatal(err)
		}
		return &watchv1.Object{Kind: &watchv1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
			Namespace: acc.GetNamespace(), Name: acc.GetName(), Uid: fmt.Sprint("uid-", rv), ResourceVersion: acc.GetResourceVersion(),
			ContentType: watchstream.ContentTypeProtobuf, Raw: buf.Bytes()}
	}
	secretGVK := corev1.SchemeGroupVersion.WithKind("Secret")
	svcGVK := corev1.SchemeGroupVersion.WithKind("Service")
	sliceGVK := discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice")
	ingGVK := networkingv1.SchemeGroupVersion.WithKind("Ingress")
	classGVK := networkingv1.SchemeGroupVersion.WithKind("IngressClass")
	byKind := map[schema.GroupVersionKind][]*watchv1.Object{}
	cert, key := benchCert(tb)
	cls := "sluice"
	pt := networkingv1.PathTypePrefix
	for i := 0; i < n; i++ {
		ns, name := "bench", fmt.Sprintf("app%d", i)
		host := fmt.Sprintf("%s.bench.example.com", name)
		byKind[svcGVK] = append(byKind[svcGVK], enc(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}, svcGVK))
		byKind[sliceGVK] = append(byKind[sliceGVK], enc(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{discoveryv1.LabelServiceName: name}}, AddressType: discoveryv1.AddressTypeIPv4,
			Ports:     []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080))}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.200.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}}, sliceGVK))
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: networkingv1.IngressSpec{IngressClassName: &cls,
			Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pt, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: name, Port: networkingv1.ServiceBackendPort{Name: "http"}}}}}}}}}}}
		if i%10 == 0 {
			byKind[secretGVK] = append(byKind[secretGVK], enc(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-tls", Namespace: ns}, Type: corev1.SecretTypeTLS,
				Data: map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key}}, secretGVK))
			ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{host}, SecretName: name + "-tls"}}
		}
		byKind[ingGVK] = append(byKind[ingGVK], enc(ing, ingGVK))
	}
	byKind[classGVK] = append(byKind[classGVK], enc(&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: cls},
		Spec: networkingv1.IngressClassSpec{Controller: "sluice.io/ingress-controller"}}, classGVK))
	var objs []*watchv1.Object
	var inv []*watchv1.KindInventory
	var kinds []*watchv1.GroupVersionKind
	// The stream's kind order (kinds.SortKinds): referents first, then by wire name.
	for _, gvk := range []schema.GroupVersionKind{secretGVK, classGVK, svcGVK, sliceGVK, ingGVK} {
		k := &watchv1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
		kinds = append(kinds, k)
		objs = append(objs, byKind[gvk]...)
		inv = append(inv, watchstream.InventoryOf(k, byKind[gvk]))
	}
	return objs, inv, kinds
}

// firstPublisher signals the first complete config.
type firstPublisher struct{ done chan *configv1.Config }

func (p *firstPublisher) NewEpoch(string) {}
func (p *firstPublisher) Publish(c *configv1.Config, _ *contract.State) {
	select {
	case p.done <- c:
	default:
	}
}
func (p *firstPublisher) PublishDelta(*configv1.ConfigDelta, contract.Digests) {}

// BenchmarkColdStart is the translator's share of a cold start: a watch stream carrying
// the snapshot of n Ingresses (with their Services, EndpointSlices and Secrets) and its
// marker, until the first complete config is published. The stream's messages are built
// beforehand, so the figure is the translator's receiving, decoding and translating.
func BenchmarkColdStart(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		objs, inv, kinds := coldObjects(b, n)
		epoch := "bench"
		var msgs []*watchv1.WatchResponse
		msgs = append(msgs, msg(epoch, 1, &watchv1.SnapshotStart{Count: uint64(len(objs)), Kinds: kinds}))
		for _, o := range objs {
			msgs = append(msgs, msg(epoch, 1, &watchv1.Upsert{Object: o}))
		}
		msgs = append(msgs, msg(epoch, 1, &watchv1.SnapshotEnd{}), msg(epoch, 1, &watchv1.InitialSyncComplete{Inventory: inv}))
		b.Run(fmt.Sprintf("ingresses=%d", n), func(b *testing.B) {
			for b.Loop() {
				benchColdStart(b, msgs)
			}
		})
	}
}

func benchColdStart(b *testing.B, msgs []*watchv1.WatchResponse) {
	b.Helper()
	fw := &fakeWatcher{scripts: make(chan func(func(*watchv1.WatchResponse)) error, 1), onWatch: func() {}}
	fw.scripts <- func(send func(*watchv1.WatchResponse)) error {
		for _, m := range msgs {
			send(m)
		}
		return nil
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer()
	watchv1.RegisterWatchServiceServer(gs, fw)
	go gs.Serve(lis)
	defer gs.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	pub := &firstPublisher{done: make(chan *configv1.Config, 1)}
	e, err := New(Config{Logger: hclog.NewNullLogger(), Client: watchv1.NewWatchServiceClient(conn), Publisher: pub,
		Options: translate.Options{IngressClass: "sluice", ControllerName: "sluice.io/ingress-controller"},
		Holdoff: 10 * time.Millisecond, MaxDelay: 500 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.Run(ctx); close(done) }()
	select {
	case <-pub.done:
	case <-time.After(2 * time.Minute):
		b.Fatal("no config published")
	}
	cancel()
	<-done
}

func benchCert(tb testing.TB) ([]byte, []byte) {
	tb.Helper()
	cert, key, err := pki.SelfSigned("*.bench.example.com")
	if err != nil {
		tb.Fatal(err)
	}
	return cert, key
}
