package engine

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/translator/translate"
)

// qev is one input to the quarantine, and what it must answer: the keys a NACK quarantines
// ("a,b"), or whether a change lifts one ("lift" or "").
type qev struct {
	op         string // "see", "gone", "restart", "prune", "nack"
	key, stamp string
	epoch      string
	version    uint64 // see: the first version carrying the stamp; nack: the version rejected
	uid        string
	objs       []*configv1.ObjectRef
	want       string
	held       string // after the event: the keys held, sorted
}

func ref(kind, name, uid string) *configv1.ObjectRef {
	return &configv1.ObjectRef{Kind: kind, Namespace: "ns", Name: name, Uid: uid}
}

func (q *quarantine) heldKeys() string {
	var out []string
	for k := range q.held {
		out = append(out, k.String())
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// parseName is the object a findings key ("Ingress/ns/name") names.
func parseName(key string) objectName {
	kind, rest, _ := strings.Cut(key, "/")
	ns, name, _ := strings.Cut(rest, "/")
	return objectName{kind, ns, name}
}

// nopClient opens no stream: the test drives the engine's state directly.
type nopClient struct{}

func (nopClient) Watch(context.Context, *watchv1.WatchRequest, ...grpc.CallOption) (grpc.ServerStreamingClient[watchv1.WatchResponse], error) {
	return nil, errors.New("no watcher")
}

// The quarantine's rules: a NACK quarantines the objects it names that exist as the
// rejected version carried them; an object that changed (another stamp) or went away is
// tried again; the same object seen again (a status write, a new snapshot) stays out; a NACK
// of an earlier version than an object's change, or naming another object of the same name
// (another UID), or a kind that cannot be left out, quarantines nothing.
func TestQuarantineTable(t *testing.T) {
	ing := func(name string) *configv1.ObjectRef { return ref("Ingress", name, "") }
	for _, tc := range []struct {
		name string
		evs  []qev
	}{
		{"ANackQuarantinesTheNamedObjectsOnce", []qev{
			{op: "see", key: "Ingress/ns/a", stamp: "s1", epoch: "e1", version: 1},
			{op: "see", key: "Secret/ns/tls", stamp: "s1", epoch: "e1", version: 1},
			{op: "nack", epoch: "e1", version: 2, objs: []*configv1.ObjectRef{ing("a"), ref("Secret", "tls", ""), ing("a")}, want: "Ingress/ns/a,Secret/ns/tls", held: "Ingress/ns/a,Secret/ns/tls"},
			{op: "nack", epoch: "e1", version: 3, objs: []*configv1.ObjectRef{ing("a")}, want: "", held: "Ingress/ns/a,Secret/ns/tls"},
		}},
		{"AChangeLiftsIt", []qev{
			{op: "see", key: "Ingress/ns/a", stamp: "s1", epoch: "e1", version: 1},
			{op: "nack", epoch: "e1", version: 1, objs: []*configv1.ObjectRef{ing("a")}, want: "Ingress/ns/a", held: "Ingress/ns/a"},
			{op: "see", key: "Ingress/ns/a", stamp: "s1", epoch: "e1", version: 5, want: "", held: "Ingress/ns/a"}, // a status write
			{op: "see", key: "Ingress/ns/a", stamp: "s2", epoch: "e1", version: 6, want: "lift", held: ""},
			{op: "nack", epoch: "e1", version: 5, objs: []*configv1.ObjectRef{ing("a")}, want: "", held: ""}, // rejected before the change
			{op: "nack", epoch: "e1", version: 6, objs: []*configv1.ObjectRef{ing("a")}, want: "Ingress/ns/a", held: "Ingress/ns/a"},
		}},
		{"ADeletionLiftsIt", []qev{
			{op: "see", key: "Ingress/ns/a", stamp: "s1", epoch: "e1", version: 1},
			{op: "nack", epoch: "e1", version: 1, objs: []*configv1.ObjectRef{ing("a")}, want: "Ingress/ns/a", held: "Ingress/ns/a"},
			{op: "gone", key: "Ingress/ns/a", want: "lift", held: ""},
			{op: "nack", epoch: "e1", version: 2, objs: []*configv1.ObjectRef{ing("a")}, want: "", held: ""},
		}},
		{"NothingUnknownOrOfAnotherKindOrAnotherUID", []qev{
			{op: "see", key: "Ingress/ns/a", stamp: "s1", epoch: "e1", version: 1, uid: "u1"},
			{op: "see", key: "Service/ns/web", stamp: "s1", epoch: "e1", version: 1},
			{op: "nack", epoch: "e1", version: 1, objs: []*configv1.ObjectRef{ing("zzz"), ref("Service", "web", ""), ref("Ingress", "a", "u0")}, want: "", held: ""},
			{op: "nack", epoch: "e1", version: 1, objs: []*configv1.ObjectRef{ref("Ingress", "a", "u1")}, want: "Ingress/ns/a", held: "Ingress/ns/a"},
		}},
		{"ASnapshotKeepsWhatItStillHoldsUnchanged", []qev{
			{op: "see", key: "Ingress/ns/a", stamp: "s1", epoch: "e1", version: 1},
			{op: "see", key: "Ingress/ns/b", stamp: "s1", epoch: "e1", version: 1},
			{op: "see", key: "Ingress/ns/c", stamp: "s1", epoch: "e1", version: 1},
			{op: "nack", epoch: "e1", version: 1, objs: []*configv1.ObjectRef{ing("a"), ing("b"), ing("c")}, want: "Ingress/ns/a,Ingress/ns/b,Ingress/ns/c", held: "Ingress/ns/a,Ingress/ns/b,Ingress/ns/c"},
			{op: "restart"},
			{op: "see", key: "Ingress/ns/a", stamp: "s1", epoch: "e2", version: 1, want: "", held: "Ingress/ns/a,Ingress/ns/b,Ingress/ns/c"},
			{op: "see", key: "Ingress/ns/b", stamp: "s2", epoch: "e2", version: 1, want: "lift", held: "Ingress/ns/a,Ingress/ns/c"},
			{op: "prune", held: "Ingress/ns/a"}, // c is not in the new snapshot
		}},
		{"AnObjectSeenAgainInANewEpochIsInEveryVersionOfIt", []qev{
			{op: "see", key: "Ingress/ns/a", stamp: "s1", epoch: "e1", version: 7},
			{op: "see", key: "Ingress/ns/a", stamp: "s1", epoch: "e2", version: 3},
			{op: "nack", epoch: "e2", version: 1, objs: []*configv1.ObjectRef{ing("a")}, want: "Ingress/ns/a", held: "Ingress/ns/a"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newQuarantine()
			for i, ev := range tc.evs {
				var got string
				switch ev.op {
				case "see":
					if q.changed(parseName(ev.key), stampSum(ev.stamp), ev.uid, ev.epoch, ev.version) {
						got = "lift"
					}
				case "gone":
					if q.removed(parseName(ev.key)) {
						got = "lift"
					}
				case "restart":
					q.restart()
				case "prune":
					q.prune()
				case "nack":
					var keys []string
					for _, k := range q.nack(ev.epoch, ev.version, "refused", ev.objs) {
						keys = append(keys, k.String())
					}
					got = strings.Join(keys, ",")
				}
				if got != ev.want {
					t.Fatalf("event %d (%s %s): got %q, want %q", i+1, ev.op, ev.key, got, ev.want)
				}
				if ev.op != "restart" && q.heldKeys() != ev.held {
					t.Fatalf("event %d (%s %s): held %q, want %q", i+1, ev.op, ev.key, q.heldKeys(), ev.held)
				}
			}
		})
	}
}

// A status write changes an Ingress's resourceVersion, not its generation: it does not lift
// the quarantine; a spec or annotation change does; an object without generation (a Secret)
// changes with its resourceVersion.
func TestStampOf(t *testing.T) {
	mk := func(gen int64, ann map[string]string) *networkingv1.Ingress {
		return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{UID: "u", Generation: gen, Annotations: ann}}
	}
	a, _ := stampOf(mk(1, nil), "10")
	statusWrite, _ := stampOf(mk(1, nil), "11")
	edited, _ := stampOf(mk(2, nil), "12")
	annotated, _ := stampOf(mk(1, map[string]string{"sluice.io/path-regex": "true"}), "13")
	if a != statusWrite || a == edited || a == annotated {
		t.Fatalf("stamps: %q, status write %q, edited %q, annotated %q", a, statusWrite, edited, annotated)
	}
	s1, _ := stampOf(mk(0, nil), "10")
	s2, _ := stampOf(mk(0, nil), "11")
	if s1 == s2 {
		t.Fatalf("an object without generation keeps its stamp across resourceVersions: %q", s1)
	}
}

// The engine takes a NACK naming an Ingress: the Ingress is left out of the next version,
// built at once, with its finding; an edit of it brings it back.
func TestEngineQuarantinesWhatANackNames(t *testing.T) {
	rec := &recorder{changed: make(chan struct{}, 1), unpublished: make(chan struct{})}
	e, err := New(Config{Logger: hclog.NewNullLogger(), Client: nopClient{}, Publisher: rec, Metrics: rec,
		Options: translate.Options{IngressClass: "sluice", ControllerName: "sluice.io/ingress-controller", WatchIngressWithoutClass: true}, Holdoff: 0, MaxDelay: 0, NewEpoch: func() string { return "t1" }})
	if err != nil {
		t.Fatal(err)
	}
	e.startEpoch()
	e.mirror.StartStream()
	svc, a, b := svcObject(t, "web", "1"), ingressObject(t, "a", "2"), ingressObject(t, "b", "3")
	for _, m := range []*watchv1.WatchResponse{
		msg("w1", 3, &watchv1.SnapshotStart{Count: 3, Kinds: []*watchv1.GroupVersionKind{svcKind, ingKind}}),
		msg("w1", 3, &watchv1.Upsert{Object: svc}), msg("w1", 3, &watchv1.Upsert{Object: a}), msg("w1", 3, &watchv1.Upsert{Object: b}),
		msg("w1", 3, &watchv1.SnapshotEnd{}),
	} {
		if _, err := e.apply(m); err != nil {
			t.Fatal(err)
		}
	}
	e.build(true)
	hosts := func() string {
		_, cfgs, _ := rec.snapshot()
		var out []string
		for _, vh := range cfgs[len(cfgs)-1].GetResources().GetVirtualHosts() {
			out = append(out, vh.GetHostname())
		}
		return strings.Join(out, ",")
	}
	if got := hosts(); got != "a.example.com,b.example.com" {
		t.Fatalf("first version serves %q", got)
	}
	nack := &configv1.Nack{Config: &configv1.ConfigRef{Epoch: "t1", Version: 1}, Error: "route ns/a/rules[0]/paths[0]: refused",
		ObjectsAtFault: []*configv1.ObjectRef{{Group: "networking.k8s.io", Kind: "Ingress", Namespace: "ns", Name: "a"}}}
	if e.takeNack(&configv1.Nack{Config: &configv1.ConfigRef{Epoch: "t0", Version: 1}, ObjectsAtFault: nack.ObjectsAtFault}) {
		t.Fatal("a NACK of another epoch quarantined something")
	}
	if !e.takeNack(nack) {
		t.Fatal("the NACK quarantined nothing")
	}
	e.build(false)
	if got := hosts(); got != "b.example.com" {
		t.Fatalf("after the NACK the version serves %q, want b only", got)
	}
	_, cfgs, _ := rec.snapshot()
	var rejected []string
	for _, f := range cfgs[len(cfgs)-1].GetResources().GetFindings() {
		if contract.KeyOfObject(f.GetObject()) == "Ingress/ns/a" {
			rejected = append(rejected, f.GetReason()+": "+f.GetCause())
		}
	}
	if len(rejected) != 1 || !strings.HasPrefix(rejected[0], "RejectedByDataPlane: rejected by the data plane: route ns/a") {
		t.Fatalf("findings of Ingress ns/a: %q, want only its rejection by the data plane", rejected)
	}

	// A status write (same generation, no generation here: the same resourceVersion) keeps
	// it out; an edit tries it again.
	if _, err := e.apply(msg("w1", 4, &watchv1.Upsert{Object: ingressObject(t, "a", "2")})); err != nil {
		t.Fatal(err)
	}
	e.build(false)
	if got := hosts(); got != "b.example.com" {
		t.Fatalf("the same object again: the version serves %q, want b only", got)
	}
	if _, err := e.apply(msg("w1", 5, &watchv1.Upsert{Object: ingressObject(t, "a", "9")})); err != nil {
		t.Fatal(err)
	}
	e.build(false)
	if got := hosts(); got != "a.example.com,b.example.com" {
		t.Fatalf("after the edit the version serves %q, want a again", got)
	}
}
