package status

import (
	"context"
	"encoding/json"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/store"
	"github.com/sluice-io/sluice/watcher/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

var gatewayKinds = map[string]*watchv1.GroupVersionKind{
	KindGatewayClass: {Group: GatewayGroup, Version: "v1", Kind: KindGatewayClass},
	KindGateway:      {Group: GatewayGroup, Version: "v1", Kind: KindGateway},
	KindHTTPRoute:    {Group: GatewayGroup, Version: "v1", Kind: KindHTTPRoute},
}

// apiObjects reads and writes Gateway API objects on the real apiserver, and hands what it
// reads to the Writer's store, as the watcher's informers would.
type apiObjects struct {
	t   *testing.T
	dyn dynamic.Interface
	src *storetest.Locked
}

func (a *apiObjects) res(kind, ns string) dynamic.ResourceInterface {
	r := a.dyn.Resource(schema.GroupVersionResource{Group: GatewayGroup, Version: "v1", Resource: gatewayResources[kind]})
	if ns == "" {
		return r
	}
	return r.Namespace(ns)
}

func toUnstructured(t *testing.T, kind string, obj any) *unstructured.Unstructured {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw, &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetAPIVersion(GatewayGroup + "/v1")
	u.SetKind(kind)
	return u
}

func (a *apiObjects) create(kind, ns string, obj any) *unstructured.Unstructured {
	a.t.Helper()
	u, err := a.res(kind, ns).Create(context.Background(), toUnstructured(a.t, kind, obj), metav1.CreateOptions{})
	if err != nil {
		a.t.Fatalf("create %s: %v", kind, err)
	}
	return u
}

func (a *apiObjects) get(kind, ns, name string, into any) *unstructured.Unstructured {
	a.t.Helper()
	u, err := a.res(kind, ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		a.t.Fatalf("get %s %s/%s: %v", kind, ns, name, err)
	}
	if into != nil {
		raw, _ := u.MarshalJSON()
		if err := json.Unmarshal(raw, into); err != nil {
			a.t.Fatal(err)
		}
	}
	return u
}

// sync hands the object as the apiserver has it now to the store.
func (a *apiObjects) sync(kind, ns, name string) {
	a.t.Helper()
	u := a.get(kind, ns, name, nil)
	raw, err := u.MarshalJSON()
	if err != nil {
		a.t.Fatal(err)
	}
	a.src.Do(func(st *store.Store) {
		if _, err := st.Upsert(&watchv1.Object{Kind: gatewayKinds[kind], Namespace: ns, Name: name, Uid: string(u.GetUID()),
			ResourceVersion: u.GetResourceVersion(), ContentType: watchstream.ContentTypeJSON, Raw: raw}); err != nil {
			a.t.Fatal(err)
		}
	})
}

// One status pipeline for both APIs, against the real apiserver (Gateway API CRDs of the
// pinned module): one report in the one shape carries an Ingress, a GatewayClass, a Gateway
// and an HTTPRoute of our controller, and each is written through the one queue and reads
// back as decided (the Ingress's typed addresses as status.loadBalancer); a GatewayClass of
// another controller is untouched; another controller's status.parents entry on the
// HTTPRoute survives every write, including one that raced with it (a conflict, decided
// again on a fresh read, as the Ingress's is by the same loop); once written, the same
// report writes nothing more; and a route the translator lets go of loses only our entry.
func TestWriterWritesGatewayAPIStatusesToTheAPIServer(t *testing.T) {
	c := testenv.SharedCluster(t)
	testenv.InstallGatewayAPICRDs(t, c)
	ns := c.Namespace(t)
	st, err := store.New(store.Config{Kinds: []*watchv1.GroupVersionKind{ingressKind, gatewayKinds[KindGatewayClass], gatewayKinds[KindGateway], gatewayKinds[KindHTTPRoute]}})
	if err != nil {
		t.Fatal(err)
	}
	a := &apiObjects{t: t, dyn: c.Dynamic(), src: storetest.New(st)}
	ourClass, theirClass := "sluice-"+ns, "other-"+ns
	a.create(KindGatewayClass, "", &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: ourClass}, Spec: gwv1.GatewayClassSpec{ControllerName: ours}})
	a.create(KindGatewayClass, "", &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: theirClass}, Spec: gwv1.GatewayClassSpec{ControllerName: theirs}})
	a.create(KindGateway, ns, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "gw"}, Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(ourClass),
		Listeners: []gwv1.Listener{{Name: "http", Protocol: gwv1.HTTPProtocolType, Port: 80}}}})
	r := a.create(KindHTTPRoute, ns, &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Spec: gwv1.HTTPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{
		ParentRefs: []gwv1.ParentReference{{Name: "gw", SectionName: ptr.To(gwv1.SectionName("http"))}, {Name: "their-gw"}}}}})
	// Another controller already wrote its entry.
	theirEntry := map[string]any{"parentRef": map[string]any{"name": "their-gw"}, "controllerName": theirs,
		"conditions": []any{map[string]any{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "theirs", "lastTransitionTime": "2029-01-01T00:00:00Z"}}}
	if err := unstructured.SetNestedSlice(r.Object, []any{theirEntry}, "status", "parents"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.res(KindHTTPRoute, ns).UpdateStatus(context.Background(), r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct{ kind, ns, name string }{{KindGatewayClass, "", ourClass}, {KindGatewayClass, "", theirClass}, {KindGateway, ns, "gw"}, {KindHTTPRoute, ns, "r"}} {
		a.sync(k.kind, k.ns, k.name)
	}

	cs, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	m := newFakeMetrics()
	var clock atomic.Int64 // the injected clock, in Unix seconds
	clock.Store(now.Unix())
	w := runWriter(t, Config{Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: testWriter{t}}), Source: a.src, Client: cs, Dynamic: a.dyn,
		Ingress: ingressKind, GatewayControllerName: ours, Now: func() time.Time { return time.Unix(clock.Load(), 0).UTC() }, Workers: 2, Metrics: m})

	// An Ingress beside them, in the same store and the same report.
	ing, err := cs.NetworkingV1().Ingresses(ns).Create(context.Background(), &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web",
			Port: networkingv1.ServiceBackendPort{Number: 80}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	syncIngress := func() *networkingv1.Ingress {
		t.Helper()
		cur, err := cs.NetworkingV1().Ingresses(ns).Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.APIVersion, cur.Kind = "networking.k8s.io/v1", "Ingress"
		raw, err := json.Marshal(cur)
		if err != nil {
			t.Fatal(err)
		}
		a.src.Do(func(st *store.Store) {
			if _, err := st.Upsert(&watchv1.Object{Kind: ingressKind, Namespace: ns, Name: "web", Uid: string(cur.UID),
				ResourceVersion: cur.ResourceVersion, ContentType: watchstream.ContentTypeJSON, Raw: raw}); err != nil {
				t.Fatal(err)
			}
		})
		return cur
	}
	syncIngress()
	ingReport := func(addrs ...*watchv1.GatewayAddress) *watchv1.ObjectStatus {
		return &watchv1.ObjectStatus{Key: &watchv1.ObjectKey{Kind: KindIngress, Namespace: ns, Name: "web"}, Uid: string(ing.UID),
			ManageAddresses: true, Addresses: addrs}
	}
	ingShows := func() []networkingv1.IngressLoadBalancerIngress {
		cur, err := cs.NetworkingV1().Ingresses(ns).Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cur.Status.LoadBalancer.Ingress
	}

	uid := func(kind, ns, name string) string { return string(a.get(kind, ns, name, nil).GetUID()) }
	classReport := report(KindGatewayClass, "", ourClass, uid(KindGatewayClass, "", ourClass))
	classReport.Conditions = []*watchv1.Condition{wcond("Accepted", "True", "Accepted", 1)}
	classReport.SupportedFeatures = []string{"Gateway", "HTTPRoute", "ReferenceGrant"}
	theirClassReport := report(KindGatewayClass, "", theirClass, uid(KindGatewayClass, "", theirClass))
	theirClassReport.Conditions = classReport.Conditions
	gwReport := report(KindGateway, ns, "gw", uid(KindGateway, ns, "gw"))
	gwReport.Conditions = []*watchv1.Condition{wcond("Accepted", "True", "Accepted", 1), wcond("Programmed", "True", "Programmed", 1)}
	gwReport.Listeners = []*watchv1.ListenerStatus{{Name: "http", AttachedRoutes: 1, SupportedKinds: []*watchv1.RouteGroupKind{{Kind: "HTTPRoute"}},
		Conditions: []*watchv1.Condition{wcond("Accepted", "True", "Accepted", 1), wcond("Programmed", "True", "Programmed", 1)}}}
	gwReport.ManageAddresses, gwReport.Addresses = true, []*watchv1.GatewayAddress{{Type: "IPAddress", Value: "192.0.2.10"}}
	routeReport := func(status string) *watchv1.ObjectStatus {
		rr := report(KindHTTPRoute, ns, "r", uid(KindHTTPRoute, ns, "r"))
		rr.Parents = []*watchv1.RouteParentStatus{{ParentRef: &watchv1.ParentReference{Name: "gw", SectionName: "http"},
			Conditions: []*watchv1.Condition{wcond("Accepted", status, "Accepted", 1), wcond("ResolvedRefs", "True", "ResolvedRefs", 1)}}}
		return rr
	}
	w.Report(Origin{}, &watchv1.ReportStatusRequest{Source: "s", Full: true, Objects: []*watchv1.ObjectStatus{
		ingReport(&watchv1.GatewayAddress{Type: "Hostname", Value: "lb.example.com"}, &watchv1.GatewayAddress{Type: "IPAddress", Value: "192.0.2.10"}),
		classReport, theirClassReport, gwReport, routeReport("True")}})
	m.eventually(t, "four statuses written", func() bool { return m.write("done") == 4 })
	if lb := ingShows(); len(lb) != 2 || lb[0].Hostname != "lb.example.com" || lb[1].IP != "192.0.2.10" {
		t.Fatalf("the Ingress shows %+v, want the reported hostname and IP", lb)
	}

	var gc gwv1.GatewayClass
	a.get(KindGatewayClass, "", ourClass, &gc)
	if len(gc.Status.Conditions) != 1 || gc.Status.Conditions[0].Status != "True" || !gc.Status.Conditions[0].LastTransitionTime.Equal(&now) {
		t.Fatalf("our GatewayClass shows %+v, want Accepted=True since the injected now", gc.Status.Conditions)
	}
	// The features the report declares, as the conformance suite reads them.
	if f := gc.Status.SupportedFeatures; len(f) != 3 || f[0].Name != "Gateway" || f[1].Name != "HTTPRoute" || f[2].Name != "ReferenceGrant" {
		t.Fatalf("our GatewayClass declares %+v, want Gateway, HTTPRoute, ReferenceGrant", f)
	}
	var other gwv1.GatewayClass
	a.get(KindGatewayClass, "", theirClass, &other)
	if len(other.Status.Conditions) != 1 || other.Status.Conditions[0].Reason != "Pending" {
		t.Fatalf("another controller's GatewayClass was written: %+v", other.Status.Conditions)
	}
	var g gwv1.Gateway
	a.get(KindGateway, ns, "gw", &g)
	if len(g.Status.Addresses) != 1 || g.Status.Addresses[0].Value != "192.0.2.10" || len(g.Status.Conditions) != 2 ||
		len(g.Status.Listeners) != 1 || g.Status.Listeners[0].AttachedRoutes != 1 || len(g.Status.Listeners[0].Conditions) != 2 {
		t.Fatalf("the Gateway shows %+v", g.Status)
	}
	parents := func() []gwv1.RouteParentStatus {
		var hr gwv1.HTTPRoute
		a.get(KindHTTPRoute, ns, "r", &hr)
		return hr.Status.Parents
	}
	if p := parents(); len(p) != 2 || p[0].ControllerName != theirs || p[0].Conditions[0].Message != "theirs" ||
		p[1].ControllerName != ours || len(p[1].Conditions) != 2 || *p[1].ParentRef.SectionName != "http" {
		t.Fatalf("the HTTPRoute's parents are %+v; want theirs kept, then ours", p)
	}

	// The store sees the writes; the same report again (as a change) decides equal for every
	// object: nothing more is written. (The class last: a class change decides its Gateways
	// again, and the store must hold the written Gateway by then.)
	for _, k := range []struct{ kind, ns, name string }{{KindGateway, ns, "gw"}, {KindHTTPRoute, ns, "r"}, {KindGatewayClass, "", ourClass}} {
		a.sync(k.kind, k.ns, k.name)
	}
	clock.Add(3600)
	syncIngress()
	w.Report(Origin{}, &watchv1.ReportStatusRequest{Source: "s", Objects: []*watchv1.ObjectStatus{
		ingReport(&watchv1.GatewayAddress{Type: "Hostname", Value: "lb.example.com"}, &watchv1.GatewayAddress{Type: "IPAddress", Value: "192.0.2.10"}),
		classReport, gwReport, routeReport("True")}})
	m.eventually(t, "four writes skipped", func() bool { return m.write("skipped") == 4 })
	if n, c := m.write("done"), m.write("conflict"); n != 4 || c != 0 {
		t.Fatalf("%d writes, %d conflicts; the statuses the objects already showed were written again", n, c)
	}

	// Another controller changes its entry after the store last saw the route: our next
	// write conflicts, is decided again on a fresh read, and keeps their change.
	hr := a.get(KindHTTPRoute, ns, "r", nil)
	ps, _, _ := unstructured.NestedSlice(hr.Object, "status", "parents")
	ps[0].(map[string]any)["conditions"].([]any)[0].(map[string]any)["message"] = "theirs, changed"
	if err := unstructured.SetNestedSlice(hr.Object, ps, "status", "parents"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.res(KindHTTPRoute, ns).UpdateStatus(context.Background(), hr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.Report(Origin{}, &watchv1.ReportStatusRequest{Source: "s", Objects: []*watchv1.ObjectStatus{routeReport("False")}})
	m.eventually(t, "the route written after a conflict", func() bool { return m.write("conflict") >= 1 && m.write("done") == 5 })
	p := parents()
	if len(p) != 2 || p[0].Conditions[0].Message != "theirs, changed" || p[1].Conditions[0].Status != "False" ||
		!p[1].Conditions[0].LastTransitionTime.Equal(&metav1.Time{Time: now.Add(time.Hour)}) || !p[1].Conditions[1].LastTransitionTime.Equal(&now) {
		t.Fatalf("after the conflict the parents are %+v; want their change kept, ours Accepted=False since the later now, ResolvedRefs' time kept", p)
	}

	// The Ingress changes after the store last saw it (a label: a new resourceVersion): the
	// next address write conflicts on the same loop, is decided again on a fresh read, and
	// lands.
	conflicts := m.write("conflict")
	labelled, err := cs.NetworkingV1().Ingresses(ns).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	labelled.Labels = map[string]string{"changed": "yes"}
	if _, err := cs.NetworkingV1().Ingresses(ns).Update(context.Background(), labelled, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.Report(Origin{}, &watchv1.ReportStatusRequest{Source: "s", Objects: []*watchv1.ObjectStatus{ingReport(&watchv1.GatewayAddress{Type: "IPAddress", Value: "192.0.2.11"})}})
	m.eventually(t, "the Ingress written after a conflict", func() bool { return m.write("conflict") > conflicts && m.write("done") == 6 })
	if lb := ingShows(); len(lb) != 1 || lb[0].IP != "192.0.2.11" {
		t.Fatalf("after the conflict the Ingress shows %+v, want 192.0.2.11", lb)
	}

	// The translator lets go of the route: our entry goes, theirs stays.
	a.sync(KindHTTPRoute, ns, "r")
	w.Report(Origin{}, &watchv1.ReportStatusRequest{Source: "s", RemovedObjects: []*watchv1.ObjectKey{{Kind: KindHTTPRoute, Namespace: ns, Name: "r"}}})
	m.eventually(t, "our entry removed", func() bool { return m.write("done") == 7 })
	if p := parents(); len(p) != 1 || p[0].ControllerName != theirs {
		t.Fatalf("after release the parents are %+v; want theirs alone", p)
	}
	if n := m.write("failed"); n != 0 {
		t.Fatalf("%d writes failed", n)
	}
}

// Against the real apiserver: a Gateway's status is not written from a translator of another
// IngressClass than --gateway-translator-class (its report is refused and counted), and is
// written from the configured class's translator.
func TestWriterWritesGatewayStatusOnlyFromTheGatewayTranslator(t *testing.T) {
	c := testenv.SharedCluster(t)
	testenv.InstallGatewayAPICRDs(t, c)
	ns := c.Namespace(t)
	st, err := store.New(store.Config{Kinds: []*watchv1.GroupVersionKind{ingressKind, gatewayKinds[KindGatewayClass], gatewayKinds[KindGateway]}})
	if err != nil {
		t.Fatal(err)
	}
	a := &apiObjects{t: t, dyn: c.Dynamic(), src: storetest.New(st)}
	ourClass := "sluice-bound-" + ns
	a.create(KindGatewayClass, "", &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: ourClass}, Spec: gwv1.GatewayClassSpec{ControllerName: ours}})
	a.create(KindGateway, ns, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "gw"}, Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(ourClass),
		Listeners: []gwv1.Listener{{Name: "http", Protocol: gwv1.HTTPProtocolType, Port: 80}}}})
	a.sync(KindGatewayClass, "", ourClass)
	a.sync(KindGateway, ns, "gw")

	cs, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	m := newFakeMetrics()
	w := runWriter(t, Config{Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: testWriter{t}}), Source: a.src, Client: cs, Dynamic: a.dyn,
		Ingress: ingressKind, GatewayControllerName: ours, GatewayTranslatorClass: "sluice", Now: func() time.Time { return now.Time }, Metrics: m})

	gwReport := func(reason string) *watchv1.ObjectStatus {
		r := report(KindGateway, ns, "gw", string(a.get(KindGateway, ns, "gw", nil).GetUID()))
		r.Conditions = []*watchv1.Condition{wcond("Programmed", "True", reason, 1)}
		return r
	}
	programmed := func() []metav1.Condition {
		var g gwv1.Gateway
		a.get(KindGateway, ns, "gw", &g)
		var out []metav1.Condition
		for _, c := range g.Status.Conditions {
			if c.Type == "Programmed" {
				out = append(out, c)
			}
		}
		return out
	}

	nginx := translatorOrigin("nginx")
	w.Report(nginx, &watchv1.ReportStatusRequest{Source: nginx.Source, Full: true, Objects: []*watchv1.ObjectStatus{gwReport("FromNginx")}})
	m.eventually(t, "the other class's report refused", func() bool { return m.write("refused") == 1 })
	if p := programmed(); len(p) != 1 || p[0].Reason != "Pending" {
		t.Fatalf("after the refused report the Gateway's Programmed conditions are %+v; want the CRD's Pending", p)
	}
	// The refused report queued nothing; a report from the configured class now writes, and
	// what it writes is its own.
	sluice := translatorOrigin("sluice")
	w.Report(sluice, &watchv1.ReportStatusRequest{Source: sluice.Source, Full: true, Objects: []*watchv1.ObjectStatus{gwReport("FromSluice")}})
	m.eventually(t, "the configured class's report written", func() bool { return m.write("done") == 1 })
	if p := programmed(); len(p) != 1 || p[0].Reason != "FromSluice" {
		t.Fatalf("the Gateway's Programmed conditions are %+v; want the one the sluice translator reported", p)
	}
	if n, f := m.write("done"), m.write("failed"); n != 1 || f != 0 {
		t.Fatalf("%d writes done, %d failed; want the configured class's only", n, f)
	}
}
