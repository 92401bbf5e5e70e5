package status

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/hashicorp/go-hclog"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/store"
	"github.com/sluice-io/sluice/watcher/store/storetest"
)

var ingressKind = &watchv1.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}

// fakeSource is the watcher's store behind a lock, as the controller serves it.
type fakeSource struct{ *storetest.Locked }

func newFakeSource(t *testing.T) *fakeSource {
	t.Helper()
	st, err := store.New(store.Config{Kinds: []*watchv1.GroupVersionKind{ingressKind}})
	if err != nil {
		t.Fatal(err)
	}
	return &fakeSource{storetest.New(st)}
}

func (s *fakeSource) upsert(t *testing.T, ing *networkingv1.Ingress) {
	t.Helper()
	c := ing.DeepCopy()
	c.APIVersion, c.Kind = "networking.k8s.io/v1", "Ingress"
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	s.Do(func(st *store.Store) {
		if _, err := st.Upsert(&watchv1.Object{Kind: ingressKind, Namespace: ing.Namespace, Name: ing.Name, Uid: string(ing.UID),
			ResourceVersion: ing.ResourceVersion, ContentType: watchstream.ContentTypeJSON, Raw: raw}); err != nil {
			t.Fatal(err)
		}
	})
}

// fakeMetrics counts the Writer's outcomes and wakes the test on each.
type fakeMetrics struct {
	mu      sync.Mutex
	writes  map[string]int
	events  map[string]int
	changed chan struct{}
}

func newFakeMetrics() *fakeMetrics {
	return &fakeMetrics{writes: map[string]int{}, events: map[string]int{}, changed: make(chan struct{}, 1)}
}

func (m *fakeMetrics) SetStatusPending(int) {}
func (m *fakeMetrics) StatusWrite(r string) { m.count(m.writes, r) }
func (m *fakeMetrics) Event(typ, r string)  { m.count(m.events, typ+"/"+r) }

func (m *fakeMetrics) count(c map[string]int, k string) {
	m.mu.Lock()
	c[k]++
	m.mu.Unlock()
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

func (m *fakeMetrics) write(r string) int { m.mu.Lock(); defer m.mu.Unlock(); return m.writes[r] }

// eventually waits for cond, checking it again after each outcome of the Writer: every write
// and Event reaches the fake clientset before it is counted.
func (m *fakeMetrics) eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-m.changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func ingress(name, uid, rv string, ips ...string) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), ResourceVersion: rv}}
	for _, ip := range ips {
		ing.Status.LoadBalancer.Ingress = append(ing.Status.LoadBalancer.Ingress, networkingv1.IngressLoadBalancerIngress{IP: ip})
	}
	return ing
}

func desired(name, uid string, ips ...string) *watchv1.ObjectStatus {
	st := &watchv1.ObjectStatus{Key: &watchv1.ObjectKey{Kind: KindIngress, Namespace: "ns", Name: name}, Uid: uid, ManageAddresses: true}
	for _, ip := range ips {
		st.Addresses = append(st.Addresses, &watchv1.GatewayAddress{Type: "IPAddress", Value: ip})
	}
	return st
}

// patches records the status patches the Writer sent, and answers them like the apiserver:
// a patch that names a resourceVersion other than the object's is a conflict.
type patches struct {
	mu   sync.Mutex
	seen []recordedPatch
}

type recordedPatch struct {
	name, resourceVersion string
	ips                   []string
}

func (p *patches) install(cs *fake.Clientset) {
	gvr := schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}
	cs.PrependReactor("patch", "ingresses", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pa := a.(k8stesting.PatchAction)
		var body struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
			Status struct {
				LoadBalancer struct {
					Ingress []struct {
						IP string `json:"ip"`
					} `json:"ingress"`
				} `json:"loadBalancer"`
			} `json:"status"`
		}
		if err := json.Unmarshal(pa.GetPatch(), &body); err != nil {
			return true, nil, err
		}
		rec := recordedPatch{name: pa.GetName(), resourceVersion: body.Metadata.ResourceVersion}
		for _, i := range body.Status.LoadBalancer.Ingress {
			rec.ips = append(rec.ips, i.IP)
		}
		p.mu.Lock()
		p.seen = append(p.seen, rec)
		p.mu.Unlock()
		if pa.GetSubresource() != "status" {
			return true, nil, fmt.Errorf("patch of %q, not of the status subresource", pa.GetSubresource())
		}
		cur, err := cs.Tracker().Get(gvr, pa.GetNamespace(), pa.GetName())
		if err != nil {
			return true, nil, err
		}
		if rv := cur.(*networkingv1.Ingress).ResourceVersion; rv != rec.resourceVersion {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), pa.GetName(), fmt.Errorf("at %s, not %s", rv, rec.resourceVersion))
		}
		return false, nil, nil // the tracker applies it
	})
}

func (p *patches) all() []recordedPatch {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]recordedPatch(nil), p.seen...)
}

type writerFixture struct {
	src *fakeSource
	cs  *fake.Clientset
	m   *fakeMetrics
	p   *patches
	w   *Writer
}

func startWriter(t *testing.T, objs ...*networkingv1.Ingress) *writerFixture {
	t.Helper()
	f := &writerFixture{src: newFakeSource(t), cs: fake.NewClientset(), m: newFakeMetrics(), p: &patches{}}
	for _, o := range objs {
		f.src.upsert(t, o)
		if err := f.cs.Tracker().Add(o.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	f.p.install(f.cs)
	w, err := New(Config{Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: testWriter{t}}), Source: f.src, Client: f.cs, Ingress: ingressKind, Workers: 2, Metrics: f.m})
	if err != nil {
		t.Fatal(err)
	}
	f.w = w
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

func (f *writerFixture) statusOf(t *testing.T, name string) []string {
	t.Helper()
	ing, err := f.cs.NetworkingV1().Ingresses("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, i := range ing.Status.LoadBalancer.Ingress {
		ips = append(ips, i.IP)
	}
	return ips
}

func TestNewRejectsMissingDependencies(t *testing.T) {
	if _, err := New(Config{Logger: hclog.NewNullLogger()}); err == nil {
		t.Fatal("New accepted a Config without Source, Client and Ingress")
	}
}

// docs/operations.md, "Status write-back and leader election": statuses are written only in a term of leadership, only where they differ, and
// a term starts from nothing: a report that arrived while this replica did not lead is
// never written.
func TestWriterWritesOnlyDifferencesAndOnlyInATerm(t *testing.T) {
	f := startWriter(t, ingress("a", "ua", "1"), ingress("b", "ub", "1", "10.0.0.1"))
	ctx1, end1 := context.WithCancel(context.Background())
	f.w.BeginTerm(ctx1)
	f.w.Report(Origin{}, &watchv1.ReportStatusRequest{Source: "s", Full: true, Objects: []*watchv1.ObjectStatus{
		desired("a", "ua", "10.0.0.1"), desired("b", "ub", "10.0.0.1")}})
	// b already shows the address: skipped, not written.
	f.m.eventually(t, "a's status written and b's skipped", func() bool { return f.m.write("done") == 1 && f.m.write("skipped") == 1 })
	if got := f.statusOf(t, "a"); len(got) != 1 || got[0] != "10.0.0.1" {
		t.Fatalf("a's status = %v, want [10.0.0.1]", got)
	}
	ps := f.p.all()
	if len(ps) != 1 || ps[0].name != "a" || ps[0].resourceVersion != "1" {
		t.Fatalf("patches = %+v, want one of a at resourceVersion 1 (b already had the address)", ps)
	}

	// The lease is lost: a report now is not written, not even once a new term begins.
	end1()
	f.w.EndTerm()
	f.w.Report(Origin{}, &watchv1.ReportStatusRequest{Source: "s", Objects: []*watchv1.ObjectStatus{desired("b", "ub", "10.0.0.2")}})
	ctx2, end2 := context.WithCancel(context.Background())
	defer end2()
	f.w.BeginTerm(ctx2)
	// The translator reports in full to the new leader; only that is written.
	f.w.Report(Origin{}, &watchv1.ReportStatusRequest{Source: "s", Full: true, Objects: []*watchv1.ObjectStatus{
		desired("a", "ua", "10.0.0.1"), desired("b", "ub", "10.0.0.3")}})
	f.m.eventually(t, "b's status written", func() bool {
		got := f.statusOf(t, "b")
		return len(got) == 1 && got[0] == "10.0.0.3"
	})
	for _, p := range f.p.all() {
		if len(p.ips) == 1 && p.ips[0] == "10.0.0.2" {
			t.Fatalf("patches = %+v: the report made outside a term was written", f.p.all())
		}
	}
}

// docs/operations.md, "Status write-back and leader election": a conflict is decided again on a fresh read: the write is retried on the new
// resourceVersion, or skipped when the object already has the wanted status.
func TestWriterRetriesConflictsOnAFreshRead(t *testing.T) {
	f := startWriter(t, ingress("a", "ua", "4"), ingress("b", "ub", "4"))
	// The apiserver moved on (resourceVersion 5) while the store still holds 4; b meanwhile
	// got the wanted address from someone else.
	for _, ing := range []*networkingv1.Ingress{ingress("a", "ua", "5"), ingress("b", "ub", "5", "10.0.0.9")} {
		if _, err := f.cs.NetworkingV1().Ingresses("ns").UpdateStatus(context.Background(), ing, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, end := context.WithCancel(context.Background())
	defer end()
	f.w.BeginTerm(ctx)
	f.w.Report(Origin{}, &watchv1.ReportStatusRequest{Source: "s", Full: true, Objects: []*watchv1.ObjectStatus{
		desired("a", "ua", "10.0.0.9"), desired("b", "ub", "10.0.0.9")}})
	f.m.eventually(t, "a written and b skipped", func() bool { return f.m.write("done") == 1 && f.m.write("skipped") == 1 })
	if got := f.statusOf(t, "a"); len(got) != 1 || got[0] != "10.0.0.9" {
		t.Fatalf("a's status = %v, want [10.0.0.9]", got)
	}
	var rvs []string
	for _, p := range f.p.all() {
		rvs = append(rvs, p.name+"@"+p.resourceVersion)
	}
	if f.m.write("conflict") != 2 || len(rvs) != 3 {
		t.Fatalf("patches %v, conflicts %d; want a@4 and b@4 conflicting, then a@5 alone", rvs, f.m.write("conflict"))
	}
	if f.m.write("failed") != 0 {
		t.Fatalf("%d writes failed", f.m.write("failed"))
	}
}

// docs/operations.md, "Status write-back and leader election": when no translator serves an Ingress any more, the address it published is
// taken back; an address someone else set is left alone.
func TestWriterTakesBackReleasedAddresses(t *testing.T) {
	f := startWriter(t, ingress("a", "ua", "1"), ingress("b", "ub", "1", "192.0.2.7"))
	ctx, end := context.WithCancel(context.Background())
	defer end()
	f.w.BeginTerm(ctx)
	f.w.Report(Origin{}, &watchv1.ReportStatusRequest{Source: "s", Full: true, Objects: []*watchv1.ObjectStatus{desired("a", "ua", "10.0.0.1")}})
	f.m.eventually(t, "a's status written", func() bool { return f.m.write("done") == 1 })
	// The store sees the write, as the informer would.
	written, err := f.cs.NetworkingV1().Ingresses("ns").Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	written.ResourceVersion = "2"
	if _, err := f.cs.NetworkingV1().Ingresses("ns").UpdateStatus(context.Background(), written, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.src.upsert(t, written)
	f.w.Report(Origin{}, &watchv1.ReportStatusRequest{Source: "s", RemovedObjects: []*watchv1.ObjectKey{{Kind: "Ingress", Namespace: "ns", Name: "a"}}})
	f.m.eventually(t, "a's status cleared", func() bool { return f.m.write("done") == 2 })
	if got := f.statusOf(t, "a"); len(got) != 0 {
		t.Fatalf("a's status = %v after its translator let go of it, want none", got)
	}
	if got := f.statusOf(t, "b"); len(got) != 1 || got[0] != "192.0.2.7" {
		t.Fatalf("b's status = %v, want the address nobody here set, [192.0.2.7]", got)
	}
}

// docs/operations.md, "Status write-back and leader election": a finding becomes one Warning Event naming the cause; a repeat of the same
// report says nothing again; fixing it is announced once.
func TestWriterAnnouncesFindingsOnce(t *testing.T) {
	f := startWriter(t, ingress("a", "ua", "1"))
	ctx, end := context.WithCancel(context.Background())
	defer end()
	f.w.BeginTerm(ctx)
	bad := desired("a", "ua")
	bad.ManageAddresses = false
	bad.Findings = []*watchv1.StatusFinding{{Reason: "ServiceNotFound", Field: "spec.rules[0].http.paths[0].backend", Message: `service "web" not found`, Warning: true}}
	for range 3 {
		f.w.Report(Origin{}, &watchv1.ReportStatusRequest{Source: "s", Full: true, Objects: []*watchv1.ObjectStatus{bad}})
	}
	events := func() []corev1.Event {
		l, err := f.cs.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	f.m.eventually(t, "a Warning Event", func() bool { return len(events()) == 1 })
	e := events()[0]
	if e.Type != corev1.EventTypeWarning || e.Reason != "ServiceNotFound" || e.InvolvedObject.Name != "a" || e.InvolvedObject.UID != "ua" ||
		e.Message != `spec.rules[0].http.paths[0].backend: service "web" not found` || e.Count != 1 {
		t.Fatalf("event = %s %s on %s (%s) x%d: %q", e.Type, e.Reason, e.InvolvedObject.Name, e.InvolvedObject.UID, e.Count, e.Message)
	}
	fixed := desired("a", "ua")
	fixed.ManageAddresses = false
	f.w.Report(Origin{}, &watchv1.ReportStatusRequest{Source: "s", Objects: []*watchv1.ObjectStatus{fixed}})
	f.m.eventually(t, "a FindingsResolved Event", func() bool {
		for _, e := range events() {
			if e.Reason == "FindingsResolved" && e.Type == corev1.EventTypeNormal {
				return true
			}
		}
		return false
	})
	if n := len(events()); n != 2 {
		t.Fatalf("%d events, want the Warning and the FindingsResolved", n)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// docs/design.md, "Who may do what": a translator's report is acted on only for Ingresses of the class its identity
// names; a report about another controller's Ingress is refused (logged and counted) and
// that Ingress's status is never written.
func TestWriterHoldsATranslatorToItsClass(t *testing.T) {
	ours, theirs := "sluice", "nginx"
	a, b := ingress("a", "ua", "1"), ingress("b", "ub", "1")
	a.Spec.IngressClassName, b.Spec.IngressClassName = &ours, &theirs
	f := startWriter(t, a, b)
	ctx, end := context.WithCancel(context.Background())
	defer end()
	f.w.BeginTerm(ctx)
	from := Origin{Source: "spiffe://cluster.local/sluice/translator/sluice", Class: "sluice", Checked: true}
	f.w.Report(from, &watchv1.ReportStatusRequest{Source: from.Source, Full: true, Objects: []*watchv1.ObjectStatus{
		desired("a", "ua", "10.0.0.1"), desired("b", "ub", "10.0.0.66")}})
	f.m.eventually(t, "a written and b refused", func() bool { return f.m.write("done") == 1 && f.m.write("refused") == 1 })
	if got := f.statusOf(t, "b"); len(got) != 0 {
		t.Fatalf("b (class nginx) got status %v from a translator of class sluice", got)
	}
	for _, p := range f.p.all() {
		if p.name == "b" {
			t.Fatalf("b was patched: %+v", p)
		}
	}
}

// Conflicts (docs/operations.md, "Status write-back and leader election": a conflict is
// decided again on a fresh read): the fresh read goes through the same decision as the
// store's view, so taking back released addresses that meanwhile someone else replaced
// leaves theirs alone, as it would had the store seen them first.
func TestWriterDecidesAConflictAgainWithTheSameRules(t *testing.T) {
	f := startWriter(t, ingress("a", "ua", "1", "10.0.0.1"))
	// Someone else sets their address; the store has not seen it yet.
	if _, err := f.cs.NetworkingV1().Ingresses("ns").UpdateStatus(context.Background(), ingress("a", "ua", "2", "192.0.2.7"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, end := context.WithCancel(context.Background())
	defer end()
	f.w.BeginTerm(ctx)
	f.w.Report(Origin{}, &watchv1.ReportStatusRequest{Source: "s", Full: true, Objects: []*watchv1.ObjectStatus{desired("a", "ua", "10.0.0.1")}})
	f.w.Report(Origin{}, &watchv1.ReportStatusRequest{Source: "s", RemovedObjects: []*watchv1.ObjectKey{{Kind: "Ingress", Namespace: "ns", Name: "a"}}})
	f.m.eventually(t, "the take-back to conflict and be decided again", func() bool {
		return f.m.write("conflict") == 1 && (f.m.write("skipped") == 2 || f.m.write("done") > 0)
	})
	if got := f.statusOf(t, "a"); len(got) != 1 || got[0] != "192.0.2.7" {
		t.Fatalf("a's status = %v, want the address someone else set, [192.0.2.7]", got)
	}
	if ps := f.p.all(); len(ps) != 1 || ps[0].resourceVersion != "1" {
		t.Fatalf("patches = %+v, want only the take-back at resourceVersion 1, which conflicted", ps)
	}
}

// The watcher keeps each object once (docs/design.md, "Cold start"): the status the writer
// keeps of an Ingress names it with the stored object's strings, not the decoded report's,
// and the statuses of one source share one list of addresses while it is the same.
func TestWriterKeepsReportsSharingWhatTheyRepeat(t *testing.T) {
	view := &ingressView{namespace: "ns", name: "web", uid: "u1"}
	w := &Writer{ingresses: map[key]*ingressView{{"ns", "web"}: view}}
	// Strings of their own, as a decoded report's are.
	a := desired(strings.Clone("web"), strings.Clone("u1"), "192.0.2.1")
	a.Key.Namespace = strings.Clone("ns")
	b := desired("api", "u2", "192.0.2.1")
	c := desired("old", "u3", "192.0.2.9")
	for _, st := range []*watchv1.ObjectStatus{a, b, c} {
		w.share(st)
	}
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	if !same(a.GetKey().GetName(), view.name) || !same(a.GetKey().GetNamespace(), view.namespace) || !same(a.GetUid(), string(view.uid)) {
		t.Fatal("the status of a stored Ingress keeps strings of its own")
	}
	if &a.GetAddresses()[0] != &b.GetAddresses()[0] {
		t.Fatal("two statuses with the same addresses hold two lists")
	}
	if got := c.GetAddresses()[0].GetValue(); got != "192.0.2.9" {
		t.Fatalf("a status with other addresses now carries %s", got)
	}
}
