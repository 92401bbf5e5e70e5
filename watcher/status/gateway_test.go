package status

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/metadata"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sluice-io/sluice/internal/identity"
	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/store"
	"github.com/sluice-io/sluice/watcher/store/storetest"
)

const (
	ours   = "sluice.io/gateway-controller"
	theirs = "example.com/other-controller"
)

var (
	then = metav1.NewTime(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))  // an object's condition time
	now  = metav1.NewTime(time.Date(2030, 6, 7, 8, 9, 10, 0, time.UTC)) // the injected clock
)

// gwObject decodes a Gateway API object from its JSON, as the store holds it.
func gwObject(t *testing.T, kind string, obj any) *gatewayObject {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	o, err := decodeGateway(kind, "v1", watchstream.ContentTypeJSON, raw)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func cond(typ, status, reason string, gen int64, at metav1.Time) metav1.Condition {
	return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason, Message: reason, ObservedGeneration: gen, LastTransitionTime: at}
}

func wcond(typ, status, reason string, gen int64) *watchv1.Condition {
	return &watchv1.Condition{Type: typ, Status: status, Reason: reason, Message: reason, ObservedGeneration: gen}
}

func gatewayClass(controller string, conds ...metav1.Condition) *gwv1.GatewayClass {
	return &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "gc", UID: "u-gc", ResourceVersion: "1"},
		Spec:   gwv1.GatewayClassSpec{ControllerName: gwv1.GatewayController(controller)},
		Status: gwv1.GatewayClassStatus{Conditions: conds, SupportedFeatures: []gwv1.SupportedFeature{{Name: "HTTPRoute"}}}}
}

func gateway(st gwv1.GatewayStatus) *gwv1.Gateway {
	return &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gw", UID: "u-gw", ResourceVersion: "1"},
		Spec: gwv1.GatewaySpec{GatewayClassName: "gc"}, Status: st}
}

func listenerSet() *gwv1.ListenerSet {
	return &gwv1.ListenerSet{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "ls", UID: "u-ls", ResourceVersion: "1", Generation: 3},
		Spec: gwv1.ListenerSetSpec{ParentRef: gwv1.ParentGatewayReference{Name: "gw", Namespace: ptr.To(gwv1.Namespace("ns"))}}}
}

func lsReport() *watchv1.ObjectStatus {
	r := report(KindListenerSet, "team", "ls", "u-ls")
	r.Conditions = []*watchv1.Condition{wcond("Accepted", "True", "Accepted", 3), wcond("Programmed", "True", "Programmed", 3)}
	r.Listeners = []*watchv1.ListenerStatus{{Name: "a", AttachedRoutes: 1, SupportedKinds: []*watchv1.RouteGroupKind{{Kind: "HTTPRoute"}},
		Conditions: []*watchv1.Condition{wcond("Accepted", "True", "Accepted", 3)}}}
	return r
}

func route(parents ...gwv1.RouteParentStatus) *gwv1.HTTPRoute {
	r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r", UID: "u-r", ResourceVersion: "1"}}
	r.Status.Parents = parents
	return r
}

// parent is a status.parents entry as the apiserver shows it (group and kind defaulted).
func parent(controller, gw, section string, conds ...metav1.Condition) gwv1.RouteParentStatus {
	ref := gwv1.ParentReference{Group: ptr.To(gwv1.Group(GatewayGroup)), Kind: ptr.To(gwv1.Kind("Gateway")), Name: gwv1.ObjectName(gw)}
	if section != "" {
		ref.SectionName = ptr.To(gwv1.SectionName(section))
	}
	return gwv1.RouteParentStatus{ParentRef: ref, ControllerName: gwv1.GatewayController(controller), Conditions: conds}
}

// policy is a BackendTLSPolicy of namespace ns showing ancestors (the parents' fields).
func policy(ancestors ...gwv1.RouteParentStatus) *gwv1.BackendTLSPolicy {
	p := &gwv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u-p", ResourceVersion: "1"}}
	for _, a := range ancestors {
		p.Status.Ancestors = append(p.Status.Ancestors, gwv1.PolicyAncestorStatus{AncestorRef: a.ParentRef, ControllerName: a.ControllerName, Conditions: a.Conditions})
	}
	return p
}

func report(kind, ns, name, uid string) *watchv1.ObjectStatus {
	return &watchv1.ObjectStatus{Key: &watchv1.ObjectKey{Kind: kind, Namespace: ns, Name: name}, Uid: uid, ControllerName: ours}
}

// The Gateway API's statuses (docs/design.md, "Who may do what"; scenario 8): the decision table of Gateway API
// status write-back. A report is acted on only when it names this watcher's controller and
// the object's uid, only for objects of our controller; another controller's route parents
// are never touched; a condition keeps its time while its status holds; and nothing is
// written when the object already shows the result (no write storm).
func TestDecideGatewayStatus(t *testing.T) {
	accepted := func(gen int64) *watchv1.ObjectStatus {
		r := report(KindGatewayClass, "", "gc", "u-gc")
		r.Conditions = []*watchv1.Condition{wcond("Accepted", "True", "Accepted", gen)}
		r.SupportedFeatures = []string{"HTTPRoute"}
		return r
	}
	theirParent := parent(theirs, "other-gw", "", cond("Accepted", "True", "Accepted", 7, then))
	routeReport := func(status string) *watchv1.ObjectStatus {
		r := report(KindHTTPRoute, "ns", "r", "u-r")
		r.Parents = []*watchv1.RouteParentStatus{{ParentRef: &watchv1.ParentReference{Name: "gw", SectionName: "http"},
			Conditions: []*watchv1.Condition{wcond("Accepted", status, "Accepted", 2), wcond("ResolvedRefs", "True", "ResolvedRefs", 2)}}}
		return r
	}
	policyReport := func() *watchv1.ObjectStatus {
		r := report(KindBackendTLSPolicy, "ns", "p", "u-p")
		r.Parents = []*watchv1.RouteParentStatus{{ParentRef: &watchv1.ParentReference{Group: GatewayGroup, Kind: "Gateway", Namespace: "ns", Name: "gw"},
			Conditions: []*watchv1.Condition{wcond("Accepted", "True", "Accepted", 1), wcond("ResolvedRefs", "True", "ResolvedRefs", 1)}}}
		return r
	}
	gwReport := func(manage bool) *watchv1.ObjectStatus {
		r := report(KindGateway, "ns", "gw", "u-gw")
		r.Conditions = []*watchv1.Condition{wcond("Accepted", "True", "Accepted", 1), wcond("Programmed", "True", "Programmed", 1)}
		r.Listeners = []*watchv1.ListenerStatus{{Name: "http", AttachedRoutes: 2, SupportedKinds: []*watchv1.RouteGroupKind{{Kind: "HTTPRoute"}},
			Conditions: []*watchv1.Condition{wcond("Accepted", "True", "Accepted", 1)}}}
		r.ManageAddresses, r.Addresses = manage, []*watchv1.GatewayAddress{{Type: "IPAddress", Value: "192.0.2.1"}}
		return r
	}
	gwShown := gwv1.GatewayStatus{
		Conditions: []metav1.Condition{cond("Accepted", "True", "Accepted", 1, then), cond("Programmed", "True", "Programmed", 1, then)},
		Listeners: []gwv1.ListenerStatus{{Name: "http", AttachedRoutes: 2, SupportedKinds: []gwv1.RouteGroupKind{{Group: ptr.To(gwv1.Group(GatewayGroup)), Kind: "HTTPRoute"}},
			Conditions: []metav1.Condition{cond("Accepted", "True", "Accepted", 1, then)}}},
	}
	gwShownAddressed := *gwShown.DeepCopy()
	gwShownAddressed.Addresses = []gwv1.GatewayStatusAddress{{Type: ptr.To(gwv1.IPAddressType), Value: "192.0.2.1"}}
	otherReport := accepted(1)
	otherReport.ControllerName = theirs

	cases := []struct {
		name       string
		kind       string
		obj        any // nil: absent
		class      string
		report     *watchv1.ObjectStatus
		released   bool
		wantWhy    string
		wantStatus string // the patch's status, as JSON; set when a write is wanted
	}{{
		name: "GatewayClassOfOursGetsAcceptedAtNow", kind: KindGatewayClass,
		obj:        gatewayClass(ours, cond("Accepted", "Unknown", "Pending", 0, metav1.NewTime(time.Unix(0, 0)))),
		report:     accepted(1),
		wantStatus: `{"conditions":[{"type":"Accepted","status":"True","observedGeneration":1,"lastTransitionTime":"2030-06-07T08:09:10Z","reason":"Accepted","message":"Accepted"}],"supportedFeatures":[{"name":"HTTPRoute"}]}`,
	}, {
		name: "GatewayClassOfAnotherControllerUntouched", kind: KindGatewayClass,
		obj: gatewayClass(theirs), report: accepted(1), wantWhy: whyNotOurs,
	}, {
		name: "ReportNamingAnotherControllerRefused", kind: KindGatewayClass,
		obj: gatewayClass(ours), report: otherReport, wantWhy: whyRefused,
	}, {
		name: "ReportAboutAnEarlierObjectWaits", kind: KindGatewayClass,
		obj: gatewayClass(ours), report: func() *watchv1.ObjectStatus { r := accepted(1); r.Uid = "u-old"; return r }(), wantWhy: whyUIDMismatch,
	}, {
		name: "NoWriteWhenEqual", kind: KindGatewayClass,
		obj: gatewayClass(ours, cond("Accepted", "True", "Accepted", 1, then)), report: accepted(1), wantWhy: whyEqual,
	}, {
		name: "ConditionTimeKeptWhenItsStatusIsUnchanged", kind: KindGatewayClass,
		obj: gatewayClass(ours, cond("Accepted", "True", "Accepted", 1, then)), report: accepted(2),
		wantStatus: `{"conditions":[{"type":"Accepted","status":"True","observedGeneration":2,"lastTransitionTime":"2030-01-02T03:04:05Z","reason":"Accepted","message":"Accepted"}],"supportedFeatures":[{"name":"HTTPRoute"}]}`,
	}, {
		name: "AbsentObject", kind: KindGatewayClass, report: accepted(1), wantWhy: whyAbsent,
	}, {
		name: "UnreportedObjectUntouched", kind: KindGatewayClass, obj: gatewayClass(ours), wantWhy: whyNoReport,
	}, {
		name: "ReleasedGatewayClassLeftAsIs", kind: KindGatewayClass, obj: gatewayClass(ours, cond("Accepted", "True", "Accepted", 1, then)),
		released: true, wantWhy: whyLeftAsIs,
	}, {
		name: "GatewayOfOurClassWithoutAddresses", kind: KindGateway, class: ours, obj: gateway(gwv1.GatewayStatus{
			Addresses: []gwv1.GatewayStatusAddress{{Type: ptr.To(gwv1.HostnameAddressType), Value: "set.by.someone"}}}),
		report: gwReport(false),
		// addresses are not managed: the patch leaves them as they are.
		wantStatus: `{"attachedListenerSets":0,"conditions":[{"type":"Accepted","status":"True","observedGeneration":1,"lastTransitionTime":"2030-06-07T08:09:10Z","reason":"Accepted","message":"Accepted"},` +
			`{"type":"Programmed","status":"True","observedGeneration":1,"lastTransitionTime":"2030-06-07T08:09:10Z","reason":"Programmed","message":"Programmed"}],` +
			`"listeners":[{"name":"http","supportedKinds":[{"group":"gateway.networking.k8s.io","kind":"HTTPRoute"}],"attachedRoutes":2,` +
			`"conditions":[{"type":"Accepted","status":"True","observedGeneration":1,"lastTransitionTime":"2030-06-07T08:09:10Z","reason":"Accepted","message":"Accepted"}]}]}`,
	}, {
		name: "GatewayAddressesWhenManaged", kind: KindGateway, class: ours, obj: gateway(gwShown), report: gwReport(true),
		wantStatus: `{"addresses":[{"type":"IPAddress","value":"192.0.2.1"}],"attachedListenerSets":0,` +
			`"conditions":[{"type":"Accepted","status":"True","observedGeneration":1,"lastTransitionTime":"2030-01-02T03:04:05Z","reason":"Accepted","message":"Accepted"},` +
			`{"type":"Programmed","status":"True","observedGeneration":1,"lastTransitionTime":"2030-01-02T03:04:05Z","reason":"Programmed","message":"Programmed"}],` +
			`"listeners":[{"name":"http","supportedKinds":[{"group":"gateway.networking.k8s.io","kind":"HTTPRoute"}],"attachedRoutes":2,` +
			`"conditions":[{"type":"Accepted","status":"True","observedGeneration":1,"lastTransitionTime":"2030-01-02T03:04:05Z","reason":"Accepted","message":"Accepted"}]}]}`,
	}, {
		name: "GatewayCountsItsListenerSets", kind: KindGateway, class: ours, obj: gateway(gwShown),
		report: func() *watchv1.ObjectStatus { r := gwReport(false); r.AttachedListenerSets = 2; return r }(),
		wantStatus: `{"attachedListenerSets":2,"conditions":[{"type":"Accepted","status":"True","observedGeneration":1,"lastTransitionTime":"2030-01-02T03:04:05Z","reason":"Accepted","message":"Accepted"},` +
			`{"type":"Programmed","status":"True","observedGeneration":1,"lastTransitionTime":"2030-01-02T03:04:05Z","reason":"Programmed","message":"Programmed"}],` +
			`"listeners":[{"name":"http","supportedKinds":[{"group":"gateway.networking.k8s.io","kind":"HTTPRoute"}],"attachedRoutes":2,` +
			`"conditions":[{"type":"Accepted","status":"True","observedGeneration":1,"lastTransitionTime":"2030-01-02T03:04:05Z","reason":"Accepted","message":"Accepted"}]}]}`,
	}, {
		// A ListenerSet of a Gateway of ours: its conditions and listeners, as a Gateway's.
		name: "ListenerSetOfOurGateway", kind: KindListenerSet, class: ours, obj: listenerSet(), report: lsReport(),
		wantStatus: `{"conditions":[{"type":"Accepted","status":"True","observedGeneration":3,"lastTransitionTime":"2030-06-07T08:09:10Z","reason":"Accepted","message":"Accepted"},` +
			`{"type":"Programmed","status":"True","observedGeneration":3,"lastTransitionTime":"2030-06-07T08:09:10Z","reason":"Programmed","message":"Programmed"}],` +
			`"listeners":[{"name":"a","supportedKinds":[{"group":"gateway.networking.k8s.io","kind":"HTTPRoute"}],"attachedRoutes":1,` +
			`"conditions":[{"type":"Accepted","status":"True","observedGeneration":3,"lastTransitionTime":"2030-06-07T08:09:10Z","reason":"Accepted","message":"Accepted"}]}]}`,
	}, {
		name: "ListenerSetOfAnotherControllersGatewayUntouched", kind: KindListenerSet, class: theirs, obj: listenerSet(), report: lsReport(), wantWhy: whyNotOurs,
	}, {
		name: "GatewayEqualWithAddresses", kind: KindGateway, class: ours, obj: gateway(gwShownAddressed), report: gwReport(true), wantWhy: whyEqual,
	}, {
		name: "GatewayEqualAddressesNotManaged", kind: KindGateway, class: ours, obj: gateway(gwShownAddressed), report: gwReport(false), wantWhy: whyEqual,
	}, {
		name: "GatewayOfAnotherControllersClassUntouched", kind: KindGateway, class: theirs, obj: gateway(gwv1.GatewayStatus{}), report: gwReport(true), wantWhy: whyNotOurs,
	}, {
		name: "GatewayOfAnUnknownClassUntouched", kind: KindGateway, class: "", obj: gateway(gwv1.GatewayStatus{}), report: gwReport(true), wantWhy: whyNotOurs,
	}, {
		name: "ReleasedGatewayLeftAsIs", kind: KindGateway, class: ours, obj: gateway(gwShown), released: true, wantWhy: whyLeftAsIs,
	}, {
		name: "RouteParentsOfAnotherControllerKept", kind: KindHTTPRoute,
		obj:    route(parent(ours, "gw", "http", cond("Accepted", "False", "NotAllowedByListeners", 1, then)), theirParent),
		report: routeReport("True"),
		wantStatus: `{"parents":[{"parentRef":{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"other-gw"},"controllerName":"example.com/other-controller",` +
			`"conditions":[{"type":"Accepted","status":"True","observedGeneration":7,"lastTransitionTime":"2030-01-02T03:04:05Z","reason":"Accepted","message":"Accepted"}]},` +
			`{"parentRef":{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"gw","sectionName":"http"},"controllerName":"sluice.io/gateway-controller",` +
			`"conditions":[{"type":"Accepted","status":"True","observedGeneration":2,"lastTransitionTime":"2030-06-07T08:09:10Z","reason":"Accepted","message":"Accepted"},` +
			`{"type":"ResolvedRefs","status":"True","observedGeneration":2,"lastTransitionTime":"2030-06-07T08:09:10Z","reason":"ResolvedRefs","message":"ResolvedRefs"}]}]}`,
	}, {
		name: "RouteEqualWithUnsetGroupAndKindReported", kind: KindHTTPRoute,
		obj:    route(theirParent, parent(ours, "gw", "http", cond("Accepted", "True", "Accepted", 2, then), cond("ResolvedRefs", "True", "ResolvedRefs", 2, then))),
		report: routeReport("True"), wantWhy: whyEqual,
	}, {
		name: "ReleasedRouteLosesOurParentsOnly", kind: KindHTTPRoute, released: true,
		obj: route(parent(ours, "gw", "http", cond("Accepted", "True", "Accepted", 2, then)), theirParent),
		wantStatus: `{"parents":[{"parentRef":{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"other-gw"},"controllerName":"example.com/other-controller",` +
			`"conditions":[{"type":"Accepted","status":"True","observedGeneration":7,"lastTransitionTime":"2030-01-02T03:04:05Z","reason":"Accepted","message":"Accepted"}]}]}`,
	}, {
		name: "ReleasedRouteWithoutOursIsEqual", kind: KindHTTPRoute, released: true, obj: route(theirParent), wantWhy: whyEqual,
	}, {
		name: "ReleasedRouteOfOursAloneGetsAnEmptyList", kind: KindHTTPRoute, released: true,
		obj: route(parent(ours, "gw", "", cond("Accepted", "True", "Accepted", 2, then))), wantStatus: `{"parents":[]}`,
	}, {
		// A BackendTLSPolicy's ancestors are decided as a route's parents.
		name: "PolicyAncestorsOfAnotherControllerKept", kind: KindBackendTLSPolicy, obj: policy(theirParent), report: policyReport(),
		wantStatus: `{"ancestors":[{"ancestorRef":{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"other-gw"},"controllerName":"example.com/other-controller",` +
			`"conditions":[{"type":"Accepted","status":"True","observedGeneration":7,"lastTransitionTime":"2030-01-02T03:04:05Z","reason":"Accepted","message":"Accepted"}]},` +
			`{"ancestorRef":{"group":"gateway.networking.k8s.io","kind":"Gateway","namespace":"ns","name":"gw"},"controllerName":"sluice.io/gateway-controller",` +
			`"conditions":[{"type":"Accepted","status":"True","observedGeneration":1,"lastTransitionTime":"2030-06-07T08:09:10Z","reason":"Accepted","message":"Accepted"},` +
			`{"type":"ResolvedRefs","status":"True","observedGeneration":1,"lastTransitionTime":"2030-06-07T08:09:10Z","reason":"ResolvedRefs","message":"ResolvedRefs"}]}]}`,
	}, {
		name: "ReleasedPolicyLosesOurAncestorsOnly", kind: KindBackendTLSPolicy, released: true,
		obj: policy(parent(ours, "gw", "", cond("Accepted", "True", "Accepted", 1, then)), theirParent),
		wantStatus: `{"ancestors":[{"ancestorRef":{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"other-gw"},"controllerName":"example.com/other-controller",` +
			`"conditions":[{"type":"Accepted","status":"True","observedGeneration":7,"lastTransitionTime":"2030-01-02T03:04:05Z","reason":"Accepted","message":"Accepted"}]}]}`,
	}, {
		name: "ReleasedPolicyWithoutOursIsEqual", kind: KindBackendTLSPolicy, released: true, obj: policy(theirParent), wantWhy: whyEqual,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := gatewayInput{kind: tc.kind, controller: ours, now: now, classController: tc.class, reports: reportsOf(reportedBy("s", Origin{}, tc.report)), released: tc.released}
			if tc.obj != nil {
				in.obj = gwObject(t, tc.kind, tc.obj)
			}
			d := decideGateway(in)
			if tc.wantStatus == "" {
				if d.write || d.why != tc.wantWhy {
					t.Fatalf("decision: write %v (%q), want no write because %q; status %v", d.write, d.why, tc.wantWhy, d.status)
				}
				return
			}
			if !d.write {
				t.Fatalf("no write (%s); want status %s", d.why, tc.wantStatus)
			}
			got, err := json.Marshal(d.status)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.wantStatus {
				t.Fatalf("status patch\n got %s\nwant %s", got, tc.wantStatus)
			}
			// What is written, once read back, decides nothing more.
			applied := applyStatus(t, tc.kind, tc.obj, d.status)
			in.obj, in.released = applied, false
			if tc.released {
				in.released = true
			}
			if again := decideGateway(in); again.write {
				t.Fatalf("the written status decides another write: %v", again.status)
			}
		})
	}
}

// applyStatus is obj with the patch's status fields merged in (a merge patch replaces each
// field whole), decoded as the store would hold it.
func applyStatus(t *testing.T, kind string, obj any, status map[string]any) *gatewayObject {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	st, _ := m["status"].(map[string]any)
	if st == nil {
		st = map[string]any{}
	}
	patch, err := json.Marshal(status)
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(patch, &p); err != nil {
		t.Fatal(err)
	}
	for k, v := range p {
		if v == nil {
			delete(st, k)
		} else {
			st[k] = v
		}
	}
	m["status"] = st
	return gwObject(t, kind, m)
}

// docs/design.md, "Who may do what": a report naming another Gateway controller than the watcher's is refused:
// counted for every status, logged once per source and name, and nothing is written.
func TestWriterRefusesAnotherGatewayControllerName(t *testing.T) {
	st, err := store.New(store.Config{Kinds: []*watchv1.GroupVersionKind{ingressKind, {Group: GatewayGroup, Version: "v1", Kind: KindGatewayClass}}})
	if err != nil {
		t.Fatal(err)
	}
	src := storetest.New(st)
	raw, err := json.Marshal(gatewayClass(ours))
	if err != nil {
		t.Fatal(err)
	}
	src.Do(func(st *store.Store) {
		if _, err := st.Upsert(&watchv1.Object{Kind: &watchv1.GroupVersionKind{Group: GatewayGroup, Version: "v1", Kind: KindGatewayClass}, Name: "gc", Uid: "u-gc",
			ResourceVersion: "1", ContentType: watchstream.ContentTypeJSON, Raw: raw}); err != nil {
			t.Fatal(err)
		}
	})
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	logs := &statusLog{}
	m := newFakeMetrics()
	w := runWriter(t, Config{Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info}), Source: src, Client: fake.NewClientset(), Dynamic: dyn,
		Ingress: ingressKind, GatewayControllerName: ours, Now: func() time.Time { return now.Time }, Metrics: m})
	lie := report(KindGatewayClass, "", "gc", "u-gc")
	lie.ControllerName = theirs
	lie.Conditions = []*watchv1.Condition{wcond("Accepted", "True", "Accepted", 1)}
	w.Report(Origin{}, &watchv1.ReportStatusRequest{Source: "s", Full: true, Objects: []*watchv1.ObjectStatus{lie}})
	w.Report(Origin{}, &watchv1.ReportStatusRequest{Source: "s", Objects: []*watchv1.ObjectStatus{lie}})
	m.eventually(t, "two refusals", func() bool { return m.write("refused") == 2 })
	if n := strings.Count(logs.String(), "gateway api status report refused"); n != 1 {
		t.Fatalf("the refusal was logged %d times, want once:\n%s", n, logs.String())
	}
	for _, a := range dyn.Actions() {
		if a.GetVerb() == "patch" {
			t.Fatalf("a refused report was written: %v", a)
		}
	}
}

// reportedBy is the reports of an object when src (sent by from) reports r; none when r is nil.
func reportedBy(src string, from Origin, r *watchv1.ObjectStatus) map[string]sourceReport {
	if r == nil {
		return nil
	}
	return map[string]sourceReport{src: {from: from, status: r}}
}

// translatorOrigin is the Origin the Service establishes for a translator of class over mTLS.
func translatorOrigin(class string) Origin {
	return Origin{Source: "spiffe://cluster.local/sluice/translator/" + class, Class: class, Checked: true}
}

// relayedOrigin is the Origin the leader establishes for a stream a watcher replica relays
// for a translator of class.
func relayedOrigin(t *testing.T, class string) Origin {
	t.Helper()
	ctx := identity.WithCaller(context.Background(), identity.Caller{Name: "spiffe://cluster.local/sluice/watcher",
		Identity: identity.Identity{TrustDomain: "cluster.local", Role: identity.Watcher}})
	from, err := originOf(ctx, metadata.Pairs(relayedForKey, "spiffe://cluster.local/sluice/translator/"+class))
	if err != nil {
		t.Fatal(err)
	}
	return from
}

// A translator may decide Gateway API statuses only when its identity serves the IngressClass
// whose translator serves this watcher's Gateway controller (--gateway-translator-class):
// another class's translator, reporting directly or through a relaying replica, has its
// report kept and passed over; an origin that is not checked (no mTLS) keeps deciding.
func TestDecideGatewayBindsReportsToTheTranslatorClass(t *testing.T) {
	const served = "sluice"
	classReport := func(status string) *watchv1.ObjectStatus {
		r := report(KindGatewayClass, "", "gc", "u-gc")
		r.Conditions = []*watchv1.Condition{wcond("Accepted", status, "Accepted", 1)}
		return r
	}
	gwReport := report(KindGateway, "ns", "gw", "u-gw")
	gwReport.Conditions = []*watchv1.Condition{wcond("Programmed", "True", "Programmed", 1)}
	routeReport := report(KindHTTPRoute, "ns", "r", "u-r")
	routeReport.Parents = []*watchv1.RouteParentStatus{{ParentRef: &watchv1.ParentReference{Name: "gw"},
		Conditions: []*watchv1.Condition{wcond("Accepted", "True", "Accepted", 1)}}}
	ourParent := parent(ours, "gw", "", cond("Accepted", "False", "NotAllowedByListeners", 1, then))
	accepted := `{"conditions":[{"type":"Accepted","status":"True","observedGeneration":1,"lastTransitionTime":"2030-06-07T08:09:10Z","reason":"Accepted","message":"Accepted"}],"supportedFeatures":null}`

	cases := []struct {
		name            string
		kind            string
		obj             any
		reports         map[string]sourceReport
		classController string
		translatorClass string
		released        bool
		wantWhy         string
		wantStatus      string
	}{{
		name: "RefusedForAnotherClassTranslator", kind: KindGatewayClass, obj: gatewayClass(ours), translatorClass: served,
		reports: reportedBy("n", translatorOrigin("nginx"), classReport("True")), wantWhy: whyNotServed,
	}, {
		name: "AcceptedForTheConfiguredClass", kind: KindGatewayClass, obj: gatewayClass(ours), translatorClass: served,
		reports: reportedBy("s", translatorOrigin(served), classReport("True")), wantStatus: accepted,
	}, {
		name: "AcceptedForAnUncheckedOrigin", kind: KindGatewayClass, obj: gatewayClass(ours), translatorClass: served,
		reports: reportedBy("s", Origin{}, classReport("True")), wantStatus: accepted,
	}, {
		name: "AcceptedForAnUncheckedOriginWithoutATranslatorClass", kind: KindGatewayClass, obj: gatewayClass(ours),
		reports: reportedBy("s", Origin{}, classReport("True")), wantStatus: accepted,
	}, {
		name: "RefusedForEveryCheckedOriginWithoutATranslatorClass", kind: KindGatewayClass, obj: gatewayClass(ours),
		reports: reportedBy("s", translatorOrigin(served), classReport("True")), wantWhy: whyNotServed,
	}, {
		name: "RelayedForAnotherClassRefused", kind: KindGatewayClass, obj: gatewayClass(ours), translatorClass: served,
		reports: reportedBy("n", relayedOrigin(t, "nginx"), classReport("True")), wantWhy: whyNotServed,
	}, {
		name: "RelayedForTheConfiguredClassAccepted", kind: KindGatewayClass, obj: gatewayClass(ours), translatorClass: served,
		reports: reportedBy("s", relayedOrigin(t, served), classReport("True")), wantStatus: accepted,
	}, {
		name: "GatewayRefusedForAnotherClassTranslator", kind: KindGateway, classController: ours, obj: gateway(gwv1.GatewayStatus{}), translatorClass: served,
		reports: reportedBy("n", translatorOrigin("nginx"), gwReport), wantWhy: whyNotServed,
	}, {
		name: "RouteParentsRefusedForAnotherClassTranslator", kind: KindHTTPRoute, obj: route(ourParent), translatorClass: served,
		reports: reportedBy("n", translatorOrigin("nginx"), routeReport), wantWhy: whyNotServed,
	}, {
		// The refused report is passed over even with the smaller source name.
		name: "TheConfiguredClassDecidesOverASmallerRefusedSource", kind: KindGatewayClass, obj: gatewayClass(ours), translatorClass: served,
		reports: map[string]sourceReport{
			"a": {from: translatorOrigin("nginx"), status: classReport("False")},
			"z": {from: translatorOrigin(served), status: classReport("True")},
		}, wantStatus: accepted,
	}, {
		// A released route loses our entries: a refused report does not keep them.
		name: "ARefusedReportDoesNotHoldAReleasedRoute", kind: KindHTTPRoute, obj: route(ourParent), translatorClass: served, released: true,
		reports: reportedBy("n", translatorOrigin("nginx"), routeReport), wantStatus: `{"parents":[]}`,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := gatewayInput{kind: tc.kind, controller: ours, now: now, classController: tc.classController, obj: gwObject(t, tc.kind, tc.obj),
				reports: reportsOf(tc.reports), translatorClass: tc.translatorClass, released: tc.released}
			d := decideGateway(in)
			if tc.wantStatus == "" {
				if d.write || d.why != tc.wantWhy || d.report != nil {
					t.Fatalf("decision: write %v (%q), report %v; want no write, no report, because %q", d.write, d.why, d.report, tc.wantWhy)
				}
				return
			}
			if !d.write {
				t.Fatalf("no write (%s); want status %s", d.why, tc.wantStatus)
			}
			if got, err := json.Marshal(d.status); err != nil || string(got) != tc.wantStatus {
				t.Fatalf("status patch\n got %s (%v)\nwant %s", got, err, tc.wantStatus)
			}
		})
	}
}

// A translator of another class than --gateway-translator-class reports a GatewayClass
// status: it is refused (counted once per object, logged once per source naming the
// source, its class and why) and nothing is written; the same status from the configured
// class's translator is written.
func TestWriterBindsGatewayReportsToTheTranslatorClass(t *testing.T) {
	gcKind := &watchv1.GroupVersionKind{Group: GatewayGroup, Version: "v1", Kind: KindGatewayClass}
	st, err := store.New(store.Config{Kinds: []*watchv1.GroupVersionKind{ingressKind, gcKind}})
	if err != nil {
		t.Fatal(err)
	}
	src := storetest.New(st)
	raw, err := json.Marshal(gatewayClass(ours))
	if err != nil {
		t.Fatal(err)
	}
	src.Do(func(st *store.Store) {
		if _, err := st.Upsert(&watchv1.Object{Kind: gcKind, Name: "gc", Uid: "u-gc", ResourceVersion: "1", ContentType: watchstream.ContentTypeJSON, Raw: raw}); err != nil {
			t.Fatal(err)
		}
	})
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	logs := &statusLog{}
	m := newFakeMetrics()
	w := runWriter(t, Config{Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info}), Source: src, Client: fake.NewClientset(), Dynamic: dyn,
		Ingress: ingressKind, GatewayControllerName: ours, GatewayTranslatorClass: "sluice", Now: func() time.Time { return now.Time }, Metrics: m})
	classReport := func(status string) *watchv1.ObjectStatus {
		r := report(KindGatewayClass, "", "gc", "u-gc")
		r.Conditions = []*watchv1.Condition{wcond("Accepted", status, "Accepted", 1)}
		return r
	}
	patches := func() []string {
		var out []string
		for _, a := range dyn.Actions() {
			if p, ok := a.(clienttesting.PatchAction); ok {
				out = append(out, string(p.GetPatch()))
			}
		}
		return out
	}

	nginx := translatorOrigin("nginx")
	w.Report(nginx, &watchv1.ReportStatusRequest{Source: nginx.Source, Full: true, Objects: []*watchv1.ObjectStatus{classReport("False")}})
	w.Report(nginx, &watchv1.ReportStatusRequest{Source: nginx.Source, Objects: []*watchv1.ObjectStatus{classReport("False")}})
	m.eventually(t, "the refusal counted", func() bool { return m.write("refused") == 1 })
	sluice := translatorOrigin("sluice")
	w.Report(sluice, &watchv1.ReportStatusRequest{Source: sluice.Source, Full: true, Objects: []*watchv1.ObjectStatus{classReport("True")}})
	m.eventually(t, "the configured class's report written", func() bool { return len(patches()) == 1 })
	if p := patches(); !strings.Contains(p[0], `"status":"True"`) {
		t.Fatalf("patch %s; want the configured class's Accepted=True", p[0])
	}
	if n := m.write("refused"); n != 1 {
		t.Fatalf("%d refusals counted, want one (one object, one source)", n)
	}
	out := logs.String()
	if n := strings.Count(out, "gateway api status report refused"); n != 1 {
		t.Fatalf("the refusal was logged %d times, want once:\n%s", n, out)
	}
	for _, want := range []string{nginx.Source, "class=nginx", "--gateway-translator-class"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the refusal log does not say %q:\n%s", want, out)
		}
	}
}

// runWriter runs a Writer of cfg until the test ends and opens its term, as the leader
// does: each Gateway status test starts one this way.
func runWriter(t *testing.T, cfg Config) *Writer {
	t.Helper()
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	w.BeginTerm(ctx)
	return w
}

// The Gateway API's statuses: a BackendTLSPolicy keeps at most 16 ancestors (the CRD's
// bound). Ours come after every other controller's, so ours are the ones cut: beside 15 of
// theirs ours is written last; beside 16 of theirs nothing of ours fits and nothing is written.
func TestPolicyAncestorsAreCutToTheAPIsBound(t *testing.T) {
	theirs16 := make([]gwv1.RouteParentStatus, 0, maxPolicyAncestors)
	for i := range maxPolicyAncestors {
		theirs16 = append(theirs16, parent(theirs, fmt.Sprintf("other-gw-%d", i), "", cond("Accepted", "True", "Accepted", 7, then)))
	}
	r := report(KindBackendTLSPolicy, "ns", "p", "u-p")
	r.Parents = []*watchv1.RouteParentStatus{{ParentRef: &watchv1.ParentReference{Group: GatewayGroup, Kind: "Gateway", Namespace: "ns", Name: "gw"},
		Conditions: []*watchv1.Condition{wcond("Accepted", "True", "Accepted", 1)}}}
	decide := func(ancestors []gwv1.RouteParentStatus) gatewayDecision {
		in := gatewayInput{kind: KindBackendTLSPolicy, controller: ours, now: now, reports: reportsOf(reportedBy("s", Origin{}, r)),
			obj: gwObject(t, KindBackendTLSPolicy, policy(ancestors...))}
		return decideGateway(in)
	}
	d := decide(theirs16[:maxPolicyAncestors-1])
	got, _ := d.status["ancestors"].([]gwv1.PolicyAncestorStatus)
	if !d.write || len(got) != maxPolicyAncestors || string(got[len(got)-1].ControllerName) != ours {
		t.Fatalf("beside 15 of theirs: write %v, %d ancestors; want 16, ours last", d.write, len(got))
	}
	if d := decide(theirs16); d.write || d.why != whyEqual {
		t.Fatalf("beside 16 of theirs: write %v (%q), want nothing written: ours do not fit", d.write, d.why)
	}
}
