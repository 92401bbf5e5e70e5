package engine

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"bytes"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/syncbuf"
	"github.com/sluice-io/sluice/internal/watchstream"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/translator/translate"
)

var svcKind = &watchv1.GroupVersionKind{Version: "v1", Kind: "Service"}

// fakeWatcher is a scripted WatchService: each stream gets the next script, which sends
// messages on the stream and may end it.
type fakeWatcher struct {
	watchv1.UnimplementedWatchServiceServer
	mu       sync.Mutex
	requests []*watchv1.WatchRequest
	scripts  chan func(send func(*watchv1.WatchResponse)) error
	onWatch  func() // called when a stream opens
}

func (f *fakeWatcher) Watch(req *watchv1.WatchRequest, stream watchv1.WatchService_WatchServer) error {
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	f.onWatch()
	select {
	case script := <-f.scripts:
		err := script(func(m *watchv1.WatchResponse) { _ = stream.Send(m) })
		if err != nil {
			return err
		}
		<-stream.Context().Done()
		return nil
	case <-stream.Context().Done():
		return nil
	}
}

func (f *fakeWatcher) reqs() []*watchv1.WatchRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*watchv1.WatchRequest(nil), f.requests...)
}

// recorder is a Publisher that records calls.
type recorder struct {
	mu      sync.Mutex
	epochs  []string
	configs []*configv1.Config
	firsts  []bool
	objects int
	chain   contract.Chain
	errs    []error // configs that did not follow from the one before
	changed chan struct{}
	// unpublished is closed on the first build whose hash was unchanged.
	unpublished     chan struct{}
	unpublishedOnce sync.Once
}

func (r *recorder) StreamRestarted(string) {}
func (r *recorder) SetQuarantined(int)     {}
func (r *recorder) ConfigBuilt(_ time.Duration, published bool) {
	if !published {
		r.unpublishedOnce.Do(func() { close(r.unpublished) })
	}
}
func (r *recorder) SetObjects(n int) {
	r.mu.Lock()
	r.objects = n
	r.mu.Unlock()
	r.signal()
}

func (r *recorder) objectCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.objects
}

func (r *recorder) NewEpoch(e string) {
	r.mu.Lock()
	r.epochs = append(r.epochs, e)
	r.mu.Unlock()
	r.signal()
}

func (r *recorder) Publish(c *configv1.Config, _ *contract.State) {
	r.follow(&configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Config{Config: c}}, true)
}

// PublishDelta applies d onto the last config, so that the tests see complete configs and
// every delta is checked to apply onto its base with its hash.
func (r *recorder) PublishDelta(d *configv1.ConfigDelta, _ contract.Digests) {
	r.follow(&configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Delta{Delta: d}}, false)
}

// follow takes what the engine published as a pusher would (contract.Chain; a complete
// config is checked against its hash too) and records the complete config it makes.
func (r *recorder) follow(m *configv1.StreamConfigResponse, first bool) {
	r.mu.Lock()
	if v, err := r.chain.Receive(m); err != nil {
		r.errs = append(r.errs, err)
	} else {
		c := contract.RefOf(v)
		c.Resources = r.chain.State.Resources()
		r.configs, r.firsts = append(r.configs, c), append(r.firsts, first)
	}
	r.mu.Unlock()
	r.signal()
}

func (r *recorder) signal() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) snapshot() ([]string, []*configv1.Config, []bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.epochs...), append([]*configv1.Config(nil), r.configs...), append([]bool(nil), r.firsts...)
}

// waitUntil waits for the recorder to satisfy cond.
func (r *recorder) waitUntil(t *testing.T, what string, cond func(epochs []string, cfgs []*configv1.Config) bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		e, c, _ := r.snapshot()
		if cond(e, c) {
			return
		}
		select {
		case <-r.changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s (epochs %d, configs %d)", what, len(e), len(c))
		}
	}
}

func setup(t *testing.T) (*fakeWatcher, *recorder) {
	t.Helper()
	return setupWith(t, func(*Config) {})
}

// setupWith is setup with changes to the engine's Config.
func setupWith(t *testing.T, change func(*Config)) (*fakeWatcher, *recorder) {
	t.Helper()
	fw := &fakeWatcher{scripts: make(chan func(func(*watchv1.WatchResponse)) error, 10)}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	watchv1.RegisterWatchServiceServer(gs, fw)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	rec := &recorder{changed: make(chan struct{}, 1), unpublished: make(chan struct{})}
	fw.onWatch = rec.signal
	t.Cleanup(func() {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, err := range rec.errs {
			t.Errorf("the engine published a config that does not follow from the one before: %v", err)
		}
	})
	cfg := Config{Logger: hclog.NewNullLogger(), Client: watchv1.NewWatchServiceClient(conn), Publisher: rec, Metrics: rec,
		Options: translate.Options{IngressClass: "sluice", ControllerName: "sluice.io/ingress-controller", WatchIngressWithoutClass: true},
		Holdoff: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond, BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond}
	change(&cfg)
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return fw, rec
}

func svcObject(t testing.TB, name, rv string) *watchv1.Object {
	s := &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: rv},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(s, &buf); err != nil {
		t.Fatal(err)
	}
	return &watchv1.Object{Kind: svcKind, Namespace: "ns", Name: name, ResourceVersion: rv, ContentType: watchstream.ContentTypeProtobuf, Raw: buf.Bytes()}
}

func ingressObject(t testing.TB, name, rv string) *watchv1.Object {
	raw := fmt.Sprintf(`{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":%q,"namespace":"ns","resourceVersion":%q},
		"spec":{"rules":[{"host":"%s.example.com","http":{"paths":[{"path":"/","pathType":"Prefix","backend":{"service":{"name":"web","port":{"number":80}}}}]}}]}}`, name, rv, name)
	return &watchv1.Object{Kind: &watchv1.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}, Namespace: "ns", Name: name,
		ResourceVersion: rv, ContentType: watchstream.ContentTypeJSON, Raw: []byte(raw)}
}

var ingKind = &watchv1.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}

func msg(epoch string, rev uint64, ev any) *watchv1.WatchResponse {
	m := &watchv1.WatchResponse{Epoch: epoch, Revision: rev}
	switch e := ev.(type) {
	case *watchv1.SnapshotStart:
		m.Event = &watchv1.WatchResponse_SnapshotStart{SnapshotStart: e}
	case *watchv1.Upsert:
		m.Event = &watchv1.WatchResponse_Upsert{Upsert: e}
	case *watchv1.Delete:
		m.Event = &watchv1.WatchResponse_Delete{Delete: e}
	case *watchv1.SnapshotEnd:
		m.Event = &watchv1.WatchResponse_SnapshotEnd{SnapshotEnd: e}
	case *watchv1.InitialSyncComplete:
		m.Event = &watchv1.WatchResponse_InitialSyncComplete{InitialSyncComplete: e}
	}
	return m
}

func marker(objs map[*watchv1.GroupVersionKind][]*watchv1.Object) *watchv1.InitialSyncComplete {
	return &watchv1.InitialSyncComplete{Inventory: []*watchv1.KindInventory{
		watchstream.InventoryOf(svcKind, objs[svcKind]), watchstream.InventoryOf(ingKind, objs[ingKind])}}
}

// snapshot sends a snapshot of objs at revision rev.
func snapshot(send func(*watchv1.WatchResponse), epoch string, rev uint64, objs []*watchv1.Object) {
	send(msg(epoch, rev, &watchv1.SnapshotStart{Count: uint64(len(objs)), Kinds: []*watchv1.GroupVersionKind{svcKind, ingKind}}))
	for _, o := range objs {
		send(msg(epoch, rev, &watchv1.Upsert{Object: o}))
	}
	send(msg(epoch, rev, &watchv1.SnapshotEnd{}))
}

// Invariant: the translator builds nothing until its watch stream's marker has been
// verified; then the first config is published as the first complete one.
func TestNoConfigBeforeTheMarker(t *testing.T) {
	fw, rec := setup(t)
	svc, ing := svcObject(t, "web", "1"), ingressObject(t, "a", "2")
	release := make(chan struct{})
	fw.scripts <- func(send func(*watchv1.WatchResponse)) error {
		snapshot(send, "w1", 2, []*watchv1.Object{svc, ing})
		<-release
		send(msg("w1", 2, marker(map[*watchv1.GroupVersionKind][]*watchv1.Object{svcKind: {svc}, ingKind: {ing}})))
		return nil
	}
	// Wait until the engine holds both objects of the snapshot, then check nothing was built.
	rec.waitUntil(t, "the snapshot applied", func([]string, []*configv1.Config) bool { return rec.objectCount() == 2 })
	if _, cfgs, _ := rec.snapshot(); len(cfgs) != 0 {
		t.Fatalf("%d configs before the marker", len(cfgs))
	}
	close(release)
	rec.waitUntil(t, "the first config", func(_ []string, c []*configv1.Config) bool { return len(c) == 1 })
	_, cfgs, firsts := rec.snapshot()
	if !firsts[0] || cfgs[0].GetWatcherEpoch() != "w1" || cfgs[0].GetWatcherRevision() != 2 || len(cfgs[0].GetResources().GetVirtualHosts()) != 1 {
		t.Fatalf("first config %v (first=%v)", cfgs[0], firsts[0])
	}
}

// docs/design.md, "Cold start": the translator links and decodes only the API groups it
// reads. A built-in kind of another group that the watcher carries for other clients (an
// apps/v1 Deployment, sent as protobuf) is held for the marker's inventory, which verifies,
// and is neither decoded nor reported as an object that does not decode.
func TestAKindTheTranslatorDoesNotReadIsCarriedNotDecoded(t *testing.T) {
	fw, rec := setup(t)
	svc, ing := svcObject(t, "web", "1"), ingressObject(t, "a", "2")
	d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", ResourceVersion: "3"}}
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(d, &buf); err != nil {
		t.Fatal(err)
	}
	deployKind := &watchv1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	deploy := &watchv1.Object{Kind: deployKind, Namespace: "ns", Name: "web", ResourceVersion: "3", ContentType: watchstream.ContentTypeProtobuf, Raw: buf.Bytes()}
	fw.scripts <- func(send func(*watchv1.WatchResponse)) error {
		send(msg("w1", 3, &watchv1.SnapshotStart{Count: 3, Kinds: []*watchv1.GroupVersionKind{deployKind, svcKind, ingKind}}))
		for _, o := range []*watchv1.Object{deploy, svc, ing} {
			send(msg("w1", 3, &watchv1.Upsert{Object: o}))
		}
		send(msg("w1", 3, &watchv1.SnapshotEnd{}))
		send(msg("w1", 3, &watchv1.InitialSyncComplete{Inventory: []*watchv1.KindInventory{watchstream.InventoryOf(deployKind, []*watchv1.Object{deploy}),
			watchstream.InventoryOf(svcKind, []*watchv1.Object{svc}), watchstream.InventoryOf(ingKind, []*watchv1.Object{ing})}}))
		return nil
	}
	rec.waitUntil(t, "the first config", func(_ []string, c []*configv1.Config) bool { return len(c) == 1 })
	_, cfgs, _ := rec.snapshot()
	if n := len(cfgs[0].GetResources().GetVirtualHosts()); n != 1 {
		t.Fatalf("first config has %d virtual hosts, want the Ingress's one", n)
	}
	for _, f := range cfgs[0].GetResources().GetFindings() {
		if f.GetObject().GetKind() == "Deployment" {
			t.Errorf("a finding about the Deployment the translator does not read: %v", f)
		}
	}
}

// Invariant: a marker whose inventory does not match what the stream delivered yields no
// config; the stream is dropped and started over with a fresh snapshot (no resume).
func TestInventoryMismatchYieldsNoConfig(t *testing.T) {
	fw, rec := setup(t)
	svc := svcObject(t, "web", "1")
	lying := marker(map[*watchv1.GroupVersionKind][]*watchv1.Object{svcKind: {svc, svcObject(t, "ghost", "9")}})
	fw.scripts <- func(send func(*watchv1.WatchResponse)) error {
		snapshot(send, "w1", 1, []*watchv1.Object{svc})
		send(msg("w1", 1, lying))
		return nil
	}
	rec.waitUntil(t, "a new epoch after the mismatch", func(e []string, _ []*configv1.Config) bool { return len(e) >= 2 })
	if _, cfgs, _ := rec.snapshot(); len(cfgs) != 0 {
		t.Fatalf("%d configs from a stream whose inventory did not match", len(cfgs))
	}
	rec.waitUntil(t, "the second stream", func([]string, []*configv1.Config) bool { return len(fw.reqs()) >= 2 })
	if r := fw.reqs()[1]; r.GetResumeEpoch() != "" {
		t.Fatalf("resumed (%s/%d) after an inventory mismatch; want a fresh snapshot", r.GetResumeEpoch(), r.GetResumeRevision())
	}
}

// Bursts are coalesced, a config whose hash did not change is not republished, and a broken
// stream starts a new epoch whose first config comes only after the new marker; the
// reconnect asks to resume.
// docs/design.md, "Cold start": the translator keeps each object once, attached to the
// mirror's entry; a delete must still take the object out of the translation, and an upsert
// must replace what it held.
func TestDeleteAndReplaceReachTheTranslation(t *testing.T) {
	fw, rec := setup(t)
	svc := svcObject(t, "web", "1")
	a, b := ingressObject(t, "a", "2"), ingressObject(t, "b", "3")
	open := make(chan struct{})
	t.Cleanup(func() { close(open) })
	fw.scripts <- func(send func(*watchv1.WatchResponse)) error {
		snapshot(send, "w1", 3, []*watchv1.Object{svc, a, b})
		send(msg("w1", 3, marker(map[*watchv1.GroupVersionKind][]*watchv1.Object{svcKind: {svc}, ingKind: {a, b}})))
		send(msg("w1", 4, &watchv1.Delete{Object: &watchv1.Object{Kind: ingKind, Namespace: "ns", Name: "a", ResourceVersion: "4"}}))
		send(msg("w1", 5, &watchv1.Upsert{Object: ingressObject(t, "b", "5")}))
		<-open // the stream stays open until the test ends
		return nil
	}
	hosts := func(c *configv1.Config) []string {
		var out []string
		for _, vh := range c.GetResources().GetVirtualHosts() {
			out = append(out, vh.GetHostname())
		}
		return out
	}
	rec.waitUntil(t, "the snapshot's two hosts", func(_ []string, c []*configv1.Config) bool {
		return len(c) > 0 && len(hosts(c[0])) == 2
	})
	rec.waitUntil(t, "a's host gone after its delete", func(_ []string, c []*configv1.Config) bool {
		return fmt.Sprint(hosts(c[len(c)-1])) == "[b.example.com]"
	})
	if n := rec.objectCount(); n != 2 {
		t.Fatalf("the engine reports %d objects, want 2 (the Service and Ingress b)", n)
	}
}

func TestCoalescingDedupAndNewEpochOnBreak(t *testing.T) {
	fw, rec := setup(t)
	svc := svcObject(t, "web", "1")
	end := make(chan struct{})
	unpublished := rec.unpublished
	fw.scripts <- func(send func(*watchv1.WatchResponse)) error {
		snapshot(send, "w1", 1, []*watchv1.Object{svc})
		send(msg("w1", 1, marker(map[*watchv1.GroupVersionKind][]*watchv1.Object{svcKind: {svc}})))
		rev := uint64(1)
		for i := 0; i < 200; i++ {
			rev++
			send(msg("w1", rev, &watchv1.Upsert{Object: ingressObject(t, fmt.Sprintf("ing%d", i), fmt.Sprint(rev))}))
		}
		<-end
		// A change that does not alter the config: same Service, new resourceVersion.
		rev++
		send(msg("w1", rev, &watchv1.Upsert{Object: svcObject(t, "web", fmt.Sprint(rev))}))
		<-unpublished // the engine built it and found the hash unchanged
		return fmt.Errorf("stream broken by the test")
	}
	rec.waitUntil(t, "all 200 ingresses", func(_ []string, c []*configv1.Config) bool {
		return len(c) > 0 && len(c[len(c)-1].GetResources().GetVirtualHosts()) == 200
	})
	_, cfgs, _ := rec.snapshot()
	if len(cfgs) > 20 {
		t.Fatalf("%d configs for a burst of 200 changes; want them coalesced", len(cfgs))
	}
	fw.scripts <- func(send func(*watchv1.WatchResponse)) error { return nil } // the reconnect: no marker yet
	close(end)
	rec.waitUntil(t, "a new epoch", func(e []string, _ []*configv1.Config) bool { return len(e) == 2 })
	rec.waitUntil(t, "the reconnect", func([]string, []*configv1.Config) bool { return len(fw.reqs()) >= 2 })
	_, after, _ := rec.snapshot()
	if len(after) != len(cfgs) {
		t.Fatalf("a config was published for a change that did not alter it, or before the new marker")
	}
	if r := fw.reqs()[1]; r.GetResumeEpoch() != "w1" || r.GetResumeRevision() != 202 {
		t.Fatalf("reconnect asked for %s/%d, want to resume at w1/202", r.GetResumeEpoch(), r.GetResumeRevision())
	}
}

// statusSink holds the statuses the engine hands over, as the reporter does: Ingresses and
// Gateway API objects, in one shape.
type statusSink struct {
	mu      sync.Mutex
	desired map[string]*watchv1.ObjectStatus
}

func keyString(k *watchv1.ObjectKey) string {
	return k.GetKind() + "/" + k.GetNamespace() + "/" + k.GetName()
}

func (s *statusSink) Replace(sts []*watchv1.ObjectStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.desired = map[string]*watchv1.ObjectStatus{}
	for _, st := range sts {
		s.desired[keyString(st.GetKey())] = st
	}
}

func (s *statusSink) Update(changed []*watchv1.ObjectStatus, removed []*watchv1.ObjectKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range changed {
		s.desired[keyString(st.GetKey())] = st
	}
	for _, k := range removed {
		delete(s.desired, keyString(k))
	}
}

// last is the complete desired statuses of kind, sorted.
func (s *statusSink) last(kind string) []*watchv1.ObjectStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*watchv1.ObjectStatus
	for _, st := range s.desired {
		if st.GetKey().GetKind() == kind {
			out = append(out, st)
		}
	}
	translate.SortStatuses(out)
	return out
}

// get is the desired status of the object key ("Kind/namespace/name"), nil when none.
func (s *statusSink) get(key string) *watchv1.ObjectStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.desired[key]
}

// lockedBuffer is a log output the test reads while the code under test writes.
type lockedBuffer = syncbuf.Buffer

// docs/operations.md, "Status write-back and leader election": every build of a complete view offers the served Ingresses' statuses, sorted. A
// --publish-service the view lacks leaves the addresses alone and is said once, not on
// every build.
func TestStatusesOfferedAfterEveryBuild(t *testing.T) {
	sink, logs := &statusSink{}, &lockedBuffer{}
	fw, rec := setupWith(t, func(c *Config) {
		c.Status = sink
		c.Logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})
		c.Options.PublishService = "sluice-system/sluice-proxy"
	})
	svc, a, b := svcObject(t, "web", "1"), ingressObject(t, "a", "2"), ingressObject(t, "b", "3")
	fw.scripts <- func(send func(*watchv1.WatchResponse)) error {
		snapshot(send, "w1", 2, []*watchv1.Object{svc, a})
		send(msg("w1", 2, marker(map[*watchv1.GroupVersionKind][]*watchv1.Object{svcKind: {svc}, ingKind: {a}})))
		send(&watchv1.WatchResponse{Epoch: "w1", Revision: 3, Event: &watchv1.WatchResponse_Upsert{Upsert: &watchv1.Upsert{Object: b}}})
		return nil
	}
	rec.waitUntil(t, "a config with both Ingresses", func(_ []string, c []*configv1.Config) bool {
		return len(c) > 0 && len(c[len(c)-1].GetResources().GetVirtualHosts()) == 2
	})
	sts := sink.last("Ingress")
	if len(sts) != 2 || sts[0].GetKey().GetName() != "a" || sts[1].GetKey().GetName() != "b" {
		t.Fatalf("last offer = %v, want a and b, sorted", sts)
	}
	for _, st := range sts {
		if st.GetManageAddresses() {
			t.Fatalf("%v: the publish Service is not in the view, yet the address is managed", st)
		}
	}
	if n := strings.Count(logs.String(), "publish service not found"); n != 1 {
		t.Fatalf("the missing publish Service was logged %d times over two builds, want once:\n%s", n, logs)
	}
}

// Scenario (docs/design.md, "Cold start"): the translator translates a snapshot while it
// arrives, in the stream's idle moments, and still publishes nothing before the marker; the
// first config after it holds everything, as a build at the marker alone would.
func TestSnapshotTranslatedAheadOfTheMarker(t *testing.T) {
	fw, rec := setup(t)
	var objs, svcs []*watchv1.Object
	for i := range prebuildBatch + 100 {
		s := svcObject(t, fmt.Sprintf("svc%d", i), fmt.Sprint(i+1))
		objs, svcs = append(objs, s), append(svcs, s)
	}
	ing := ingressObject(t, "a", "100000")
	objs = append(objs, ing)
	release := make(chan struct{})
	fw.scripts <- func(send func(*watchv1.WatchResponse)) error {
		snapshot(send, "w1", 2, objs)
		<-release
		send(msg("w1", 2, marker(map[*watchv1.GroupVersionKind][]*watchv1.Object{svcKind: svcs, ingKind: {ing}})))
		return nil
	}
	select {
	case <-rec.unpublished: // a build that published nothing: the snapshot translated ahead
	case <-time.After(10 * time.Second):
		t.Fatal("the snapshot was not translated while the stream was idle")
	}
	if _, cfgs, _ := rec.snapshot(); len(cfgs) != 0 {
		t.Fatalf("%d configs before the marker", len(cfgs))
	}
	close(release)
	rec.waitUntil(t, "the first config", func(_ []string, c []*configv1.Config) bool { return len(c) == 1 })
	_, cfgs, firsts := rec.snapshot()
	if !firsts[0] || len(cfgs[0].GetResources().GetVirtualHosts()) != 1 {
		t.Fatalf("first config %v (first=%v)", cfgs[0], firsts[0])
	}
}
