package kinds

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	fakedynamic "k8s.io/client-go/dynamic/fake"
	fakekube "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

const (
	gvGatewayV1      = "gateway.networking.k8s.io/v1"
	gvGatewayV1beta1 = "gateway.networking.k8s.io/v1beta1"
)

// resourceList is one group version's discovery document: "plural:Kind:ns|cluster", ...
func resourceList(t *testing.T, gv string, rs ...string) *metav1.APIResourceList {
	t.Helper()
	l := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv}
	for _, r := range rs {
		p := strings.Split(r, ":")
		if len(p) != 3 {
			t.Fatalf("bad resource %q", r)
		}
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: p[0], Kind: p[1], Namespaced: p[2] == "ns"})
	}
	return l
}

// flakyDiscovery is client-go's fake discovery, whose group versions can fail for a number of
// calls; it counts the calls per group version and runs onCall (in the caller's goroutine)
// before answering.
type flakyDiscovery struct {
	*fakediscovery.FakeDiscovery
	fail   map[string]int // group version -> calls left that fail
	calls  map[string]int
	onCall func(gv string, call int)
}

func newFlakyDiscovery(lists ...*metav1.APIResourceList) *flakyDiscovery {
	return &flakyDiscovery{FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: lists}},
		fail: map[string]int{}, calls: map[string]int{}}
}

func (f *flakyDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	f.calls[gv]++
	if f.onCall != nil {
		f.onCall(gv, f.calls[gv])
	}
	if f.fail[gv] > 0 {
		f.fail[gv]--
		return nil, errors.New("connection refused")
	}
	return f.FakeDiscovery.ServerResourcesForGroupVersion(gv)
}

var _ discovery.DiscoveryInterface = (*flakyDiscovery)(nil)

func testLogger(t *testing.T) (hclog.Logger, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	return hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Debug}), &buf
}

// Probe is read through the real discovery client: what a group version serves; a group
// version that does not exist (404) is not served, so an optional kind of it can be skipped;
// any other failure (403, 503 of an aggregated API) decides nothing.
func TestProbeTellsNotServedFromFailed(t *testing.T) {
	docs := map[string]*metav1.APIResourceList{
		"/api/v1":              resourceList(t, "v1", "services:Service:ns"),
		"/apis/" + gvGatewayV1: resourceList(t, gvGatewayV1, "gateways:Gateway:ns"),
	}
	codes := map[string]int{"/apis/forbidden.example/v1": http.StatusForbidden, "/apis/metrics.example/v1": http.StatusServiceUnavailable}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code, ok := codes[r.URL.Path]; ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: int32(code), Message: "no"})
			return
		}
		doc, ok := docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	}))
	t.Cleanup(srv.Close)
	disco, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}

	got := Probe(disco, []string{"v1", gvGatewayV1, gvGatewayV1beta1, "forbidden.example/v1", "metrics.example/v1"})

	cases := []struct {
		gv     string
		served []string // resource names; nil: not in Resources
		failed bool
	}{
		{gv: "v1", served: []string{"services"}},
		{gv: gvGatewayV1, served: []string{"gateways"}},
		{gv: gvGatewayV1beta1},
		{gv: "forbidden.example/v1", failed: true},
		{gv: "metrics.example/v1", failed: true},
	}
	for _, tc := range cases {
		list, ok := got.Resources[tc.gv]
		if ok != (tc.served != nil) {
			t.Errorf("%s: served=%v, want %v", tc.gv, ok, tc.served != nil)
		}
		var names []string
		for _, r := range list {
			names = append(names, r.Name)
		}
		if !slices.Equal(names, tc.served) {
			t.Errorf("%s: resources %v, want %v", tc.gv, names, tc.served)
		}
		if _, failed := got.Failed[tc.gv]; failed != tc.failed {
			t.Errorf("%s: failed=%v (%v), want %v", tc.gv, failed, got.Failed[tc.gv], tc.failed)
		}
	}
}

// Scenario 2 (docs/design.md): a discovery that fails decides nothing. Resolve retries (with
// backoff) until every kind is decided, recording meanwhile why each pending kind is not
// resolved; an optional kind of a group version that failed is watched once discovery answers,
// never skipped for having failed.
func TestResolveRetriesAFailedDiscoveryUntilDecided(t *testing.T) {
	disco := newFlakyDiscovery(resourceList(t, "v1", "services:Service:ns", "namespaces:Namespace:cluster"),
		resourceList(t, gvGatewayV1, "gatewayclasses:GatewayClass:cluster", "gateways:Gateway:ns", "httproutes:HTTPRoute:ns", "referencegrants:ReferenceGrant:ns"))
	disco.fail[gvGatewayV1] = 2
	specs, err := ParseSpecs([]string{"v1/services"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	causes := &Causes{}
	var whileFailing []string // the causes seen at the start of each retry
	disco.onCall = func(gv string, call int) {
		if gv == gvGatewayV1 && call > 1 {
			whileFailing = append(whileFailing, errString(causes.Get(gvGatewayV1+"/httproutes")))
		}
	}
	log, _ := testLogger(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	d, err := Resolve(ctx, log, disco, GatewayAPIAuto, specs, causes)
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if n := disco.calls[gvGatewayV1]; n != 3 {
		t.Errorf("discovery of %s asked %d times, want 3 (two failures, then the answer)", gvGatewayV1, n)
	}
	if want := []string{"discovery of " + gvGatewayV1 + ": connection refused", "discovery of " + gvGatewayV1 + ": connection refused"}; !slices.Equal(whileFailing, want) {
		t.Errorf("causes while discovery failed: %q, want %q", whileFailing, want)
	}
	if len(d.Watch) != 6 || len(d.Skipped) != 3 || d.Skipped[0].GVR.Resource != "listenersets" || d.Skipped[1].GVR.Resource != "backendtlspolicies" || d.Skipped[2].GVR != ConfigMapsGVR {
		t.Errorf("watch %d kinds, skipped %v; want services, the four Gateway API kinds and Namespaces, and ListenerSets, BackendTLSPolicies (not served here) and so ConfigMaps skipped", len(d.Watch), d.Skipped)
	}
	for _, s := range WithGateway(GatewayAPIAuto, specs) {
		if err := causes.Get(s.String()); err != nil {
			t.Errorf("%s: cause %v left after it was resolved", s.String(), err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Scenario 2 (docs/design.md): a required kind the apiserver does not serve is waited for,
// never dropped: Resolve keeps asking, records that it is not served, and ends only with ctx.
func TestResolveWaitsForARequiredKindNotServed(t *testing.T) {
	disco := newFlakyDiscovery(resourceList(t, "v1", "services:Service:ns", "namespaces:Namespace:cluster"))
	specs, err := ParseSpecs([]string{"v1/services", "widgets.example/v1/widgets"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	disco.onCall = func(gv string, call int) {
		if gv == "widgets.example/v1" && call == 3 {
			cancel() // three looks are enough to show it is waited for
		}
	}
	causes := &Causes{}
	log, _ := testLogger(t)

	d, err := Resolve(ctx, log, disco, GatewayAPIOff, specs, causes)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Resolve = %+v, %v; want context.Canceled", d, err)
	}
	if n := disco.calls["widgets.example/v1"]; n != 3 {
		t.Errorf("discovery asked %d times, want 3", n)
	}
	if c := causes.Get("widgets.example/v1/widgets"); !errors.Is(c, ErrNotServed) {
		t.Errorf("cause of the missing kind = %v, want one wrapping ErrNotServed", c)
	}
	if c := causes.Get("v1/services"); c != nil {
		t.Errorf("cause of a served kind = %v, want none", c)
	}
}

// Scenario 2 and the Gateway API rules (docs/design.md): an optional kind not served is
// skipped, and said so; a ReferenceGrant is read at v1 when served, else at v1beta1; under
// --gateway-api=on a Gateway API kind served at neither is waited for.
func TestResolveReadsReferenceGrantAtV1ElseV1beta1(t *testing.T) {
	gwNoRG := []string{"gatewayclasses:GatewayClass:cluster", "gateways:Gateway:ns", "httproutes:HTTPRoute:ns"}
	rg := "referencegrants:ReferenceGrant:ns"
	cases := []struct {
		name    string
		mode    GatewayAPIMode
		lists   []*metav1.APIResourceList
		rg      string // the version ReferenceGrant is watched at; "" when not watched
		skipped bool   // and said so
		pending bool
	}{
		{name: "v1 served", mode: GatewayAPIAuto, lists: []*metav1.APIResourceList{resourceList(t, gvGatewayV1, append(gwNoRG, rg)...),
			resourceList(t, gvGatewayV1beta1, rg)}, rg: "v1"},
		{name: "only v1beta1", mode: GatewayAPIAuto, lists: []*metav1.APIResourceList{resourceList(t, gvGatewayV1, gwNoRG...),
			resourceList(t, gvGatewayV1beta1, "httproutes:HTTPRoute:ns", rg)}, rg: "v1beta1"},
		{name: "only v1beta1, on", mode: GatewayAPIOn, lists: []*metav1.APIResourceList{resourceList(t, gvGatewayV1, gwNoRG...),
			resourceList(t, gvGatewayV1beta1, rg)}, rg: "v1beta1"},
		{name: "neither, auto: skipped", mode: GatewayAPIAuto, lists: []*metav1.APIResourceList{resourceList(t, gvGatewayV1, gwNoRG...)}, skipped: true},
		{name: "neither, on: waited for", mode: GatewayAPIOn, lists: []*metav1.APIResourceList{resourceList(t, gvGatewayV1, gwNoRG...)}, pending: true},
	}
	specs, err := ParseSpecs([]string{"v1/services"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			disco := newFlakyDiscovery(append(tc.lists, resourceList(t, "v1", "services:Service:ns", "namespaces:Namespace:cluster"))...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			disco.onCall = func(gv string, call int) {
				if call == 2 {
					cancel() // a second look: it was not decided on the first
				}
			}
			causes := &Causes{}
			log, buf := testLogger(t)

			d, err := Resolve(ctx, log, disco, tc.mode, specs, causes)
			if tc.pending {
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("Resolve = %v, want it to wait for the ReferenceGrant", err)
				}
				if c := causes.Get(gvGatewayV1 + "/referencegrants"); !errors.Is(c, ErrNotServed) {
					t.Errorf("cause %v, want not served", c)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			var version string
			for _, k := range d.Watch {
				if k.GVK.Kind == "ReferenceGrant" {
					version = k.GVK.Version
					if k.Spec.GVR.Version != version || k.GVR.Resource != "referencegrants" || !k.Namespaced {
						t.Errorf("ReferenceGrant watched as %v (kind %v, namespaced %v)", k.GVR, k.GVK, k.Namespaced)
					}
				}
			}
			if version != tc.rg {
				t.Errorf("ReferenceGrant watched at %q, want %q", version, tc.rg)
			}
			said := strings.Contains(buf.String(), "optional kind not served by the apiserver; not watched: kind="+gvGatewayV1+"/referencegrants")
			if said != tc.skipped || slices.ContainsFunc(d.Skipped, func(s Spec) bool { return s.GVR.Resource == "referencegrants" }) != tc.skipped {
				t.Errorf("skipped %v, logged %v; want %v:\n%s", d.Skipped, said, tc.skipped, buf.String())
			}
		})
	}
}

// The barrier names the kinds that have not synced and why: causes are set per kind, cleared
// with nil, and read while the informers' handlers write them.
func TestCausesRecordPerKindAndClear(t *testing.T) {
	var c Causes
	if err := c.Get("v1/services"); err != nil {
		t.Fatalf("an empty Causes has %v", err)
	}
	forbidden := errors.New("forbidden")
	var wg sync.WaitGroup
	for _, kind := range []string{"v1/services", "v1/secrets", "networking.k8s.io/v1/ingresses"} {
		wg.Go(func() { c.Set(kind, forbidden) })
		wg.Go(func() { _ = c.Get(kind) })
	}
	wg.Wait()
	c.Set("v1/secrets", nil)
	for kind, want := range map[string]error{"v1/services": forbidden, "v1/secrets": nil, "networking.k8s.io/v1/ingresses": forbidden} {
		if got := c.Get(kind); got != want {
			t.Errorf("Get(%s) = %v, want %v", kind, got, want)
		}
	}
}

// The watcher lists only what it must: a namespaced kind once per namespace of --namespaces
// (all namespaces without it), a cluster-scoped kind once; the kind's field selector goes to
// the apiserver; built-in kinds are read typed (protobuf on), custom ones dynamically (JSON);
// every informer stores the transformed form.
func TestInformersListPerNamespaceWithTheFieldSelector(t *testing.T) {
	tlsSecret := func(ns, name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeTLS}
	}
	widgetGVR := schema.GroupVersionResource{Group: "widgets.example", Version: "v1", Resource: "widgets"}
	widget := func(ns, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("widgets.example/v1")
		u.SetKind("Widget")
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	services := &Kind{Spec: Spec{GVR: schema.GroupVersionResource{Version: "v1", Resource: "services"}}, GVK: schema.GroupVersionKind{Version: "v1", Kind: "Service"}, Namespaced: true}
	secrets := &Kind{Spec: Spec{GVR: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, FieldSelector: "type=kubernetes.io/tls"},
		GVK: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, Namespaced: true}
	classes := &Kind{Spec: Spec{GVR: schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingressclasses"}},
		GVK: schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "IngressClass"}}
	widgets := &Kind{Spec: Spec{GVR: widgetGVR}, GVK: widgetGVR.GroupVersion().WithKind("Widget"), Namespaced: true}

	cases := []struct {
		name        string
		kind        *Kind
		namespaces  []string
		informers   int
		keys        []string // what the informers hold together, sorted
		contentType string
		selector    string
	}{
		{name: "namespaced, two namespaces", kind: services, namespaces: []string{"a", "b"}, informers: 2, keys: []string{"a/s", "b/s"}, contentType: ContentTypeProtobuf},
		{name: "namespaced, all namespaces", kind: services, informers: 1, keys: []string{"a/s", "b/s", "c/s"}, contentType: ContentTypeProtobuf},
		{name: "cluster-scoped ignores namespaces", kind: classes, namespaces: []string{"a", "b"}, informers: 1, keys: []string{"caddy"}, contentType: ContentTypeProtobuf},
		{name: "field selector", kind: secrets, namespaces: []string{"a"}, informers: 1, keys: []string{"a/tls"}, contentType: ContentTypeProtobuf, selector: "type=kubernetes.io/tls"},
		{name: "custom resource", kind: widgets, namespaces: []string{"b", "c"}, informers: 2, keys: []string{"b/w", "c/w"}, contentType: ContentTypeJSON},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			for _, ns := range []string{"a", "b", "c"} {
				objs = append(objs, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"}})
			}
			objs = append(objs, tlsSecret("a", "tls"), &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "caddy"}})
			cs := fakekube.NewClientset(objs...)
			var mu sync.Mutex
			var selectors []string
			cs.PrependReactor("list", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
				mu.Lock()
				defer mu.Unlock()
				selectors = append(selectors, a.(clienttesting.ListAction).GetListRestrictions().Fields.String())
				return false, nil, nil
			})
			dyn := fakedynamic.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{widgetGVR: "WidgetList"},
				widget("a", "w"), widget("b", "w"), widget("c", "w"))

			infs, err := tc.kind.Informers(cs, dyn, tc.namespaces)
			if err != nil {
				t.Fatal(err)
			}
			if len(infs) != tc.informers {
				t.Fatalf("%d informers, want %d", len(infs), tc.informers)
			}
			runInformers(t, infs)
			var keys []string
			for _, inf := range infs {
				for _, o := range inf.GetStore().List() {
					st, ok := o.(*Stored)
					if !ok {
						t.Fatalf("the store holds a %T, want *Stored", o)
					}
					if st.Wire.GetContentType() != tc.contentType {
						t.Errorf("%s/%s encoded as %s, want %s", st.Wire.Namespace, st.Wire.Name, st.Wire.GetContentType(), tc.contentType)
					}
					keys = append(keys, strings.TrimPrefix(st.Wire.Namespace+"/"+st.Wire.Name, "/"))
				}
			}
			slices.Sort(keys)
			if !slices.Equal(keys, tc.keys) {
				t.Errorf("informers hold %v, want %v", keys, tc.keys)
			}
			mu.Lock()
			defer mu.Unlock()
			if tc.contentType == ContentTypeProtobuf && (len(selectors) == 0 || slices.ContainsFunc(selectors, func(s string) bool { return s != tc.selector })) {
				t.Errorf("lists asked with field selectors %q, want each %q", selectors, tc.selector)
			}
		})
	}
}

// Namespaces, under --namespaces, are read one by one (a metadata.name field selector per
// namespace watched), so that RBAC can grant exactly those by resourceNames; without
// --namespaces, one informer reads them all.
func TestNamespacesAreReadOnlyWhereWatched(t *testing.T) {
	k := &Kind{Spec: Spec{GVR: NamespacesGVR, Gateway: true}, GVK: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}}
	for _, tc := range []struct {
		name       string
		namespaces []string
		selectors  []string
	}{
		{name: "every namespace", selectors: []string{""}},
		{name: "two watched", namespaces: []string{"b", "a"}, selectors: []string{"metadata.name=a", "metadata.name=b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fakekube.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}})
			var mu sync.Mutex
			var selectors []string
			cs.PrependReactor("list", "namespaces", func(a clienttesting.Action) (bool, runtime.Object, error) {
				mu.Lock()
				defer mu.Unlock()
				selectors = append(selectors, a.(clienttesting.ListAction).GetListRestrictions().Fields.String())
				return false, nil, nil
			})
			infs, err := k.Informers(cs, nil, tc.namespaces)
			if err != nil {
				t.Fatal(err)
			}
			runInformers(t, infs)
			mu.Lock()
			defer mu.Unlock()
			slices.Sort(selectors)
			if len(infs) != len(tc.selectors) || !slices.Equal(selectors, tc.selectors) {
				t.Errorf("%d informers listing with field selectors %q, want %q", len(infs), selectors, tc.selectors)
			}
		})
	}
}

// runInformers runs the informers until the test ends and waits until they have synced.
func runInformers(t *testing.T, infs []cache.SharedIndexInformer) {
	t.Helper()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	var synced []cache.InformerSynced
	for _, inf := range infs {
		go inf.Run(stop)
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(stop, synced...) {
		t.Fatal("informers did not sync")
	}
}
