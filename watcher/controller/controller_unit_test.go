package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-io/sluice/internal/syncbuf"
	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/kinds"
	"github.com/sluice-io/sluice/watcher/store"
)

// Unit tests of the controller's rules (docs/design.md, "The watch stream", the barrier)
// beyond scenario 4 (TestLastInitialObjectIsInTheFirstSnapshot) and the epoch's end: the
// informers' callbacks only enqueue, changes reach the store in informer order (tombstones
// included), the barrier waits for every informer of every kind, and a sync timeout names
// what did not sync and never opens it. The controller has no requeue: the informers retry
// their list and watch themselves, and the store's changes are applied once, in order.

// watchdog bounds a wait for something the controller must do, so that a broken rule fails
// the test instead of hanging it; it is not a synchronisation.
const watchdog = 10 * time.Second

// scriptedInformer is an informer the test drives: it hands the test the handler and the
// watch error handler the controller registers, and reports synced when the test closes
// synced. It runs nothing itself.
type scriptedInformer struct {
	handlers chan cache.ResourceEventHandler
	watchErr chan cache.WatchErrorHandlerWithContext
	synced   chan struct{}
}

func newScriptedInformer() *scriptedInformer {
	return &scriptedInformer{handlers: make(chan cache.ResourceEventHandler, 1), watchErr: make(chan cache.WatchErrorHandlerWithContext, 1), synced: make(chan struct{})}
}

func (s *scriptedInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	s.handlers <- h
	return scriptedRegistration{s.synced}, nil
}

func (s *scriptedInformer) SetWatchErrorHandlerWithContext(h cache.WatchErrorHandlerWithContext) error {
	s.watchErr <- h
	return nil
}

func (s *scriptedInformer) RunWithContext(ctx context.Context) { <-ctx.Done() }

type scriptedRegistration struct{ synced chan struct{} }

func (r scriptedRegistration) HasSynced() bool {
	select {
	case <-r.synced:
		return true
	default:
		return false
	}
}
func (r scriptedRegistration) HasSyncedChecker() cache.DoneChecker { return r }
func (r scriptedRegistration) Name() string                        { return "scripted" }
func (r scriptedRegistration) Done() <-chan struct{}               { return r.synced }

// batchMetrics signals every batch the owner goroutine finished (it sets the revision after
// each), and records the sync failures and the seconds to sync.
type batchMetrics struct {
	nopMetrics
	batches chan uint64
	mu      sync.Mutex
	fails   []string
	seconds float64
}

func newBatchMetrics() *batchMetrics { return &batchMetrics{batches: make(chan uint64, 1024)} }

func (m *batchMetrics) SetRevision(rev uint64) { m.batches <- rev }
func (m *batchMetrics) SyncFailure(kind, cause string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fails = append(m.fails, kind+": "+cause)
}
func (m *batchMetrics) SetSyncSeconds(s float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seconds = s
}

// testKind is a required kind of the core group: resource "<name>s", kind name.
func testKind(name string) *kinds.Kind {
	gvk := schema.GroupVersionKind{Version: "v1", Kind: name}
	return &kinds.Kind{Spec: kinds.Spec{GVR: gvk.GroupVersion().WithResource(strings.ToLower(name) + "s"), Required: true}, GVK: gvk, Served: true}
}

// stored is an object as the informers' transform leaves it.
func stored(k *kinds.Kind, name, rv string) *kinds.Stored {
	return &kinds.Stored{Wire: &watchv1.Object{Kind: k.Wire(), Namespace: "ns", Name: name, Uid: "u-" + name, ResourceVersion: rv, ContentType: watchstream.ContentTypeJSON, Raw: []byte("{}")}}
}

// running is a controller under Run, with its informers' handlers.
type running struct {
	c        *Controller
	kinds    []*kinds.Kind
	infs     [][]*scriptedInformer
	handlers [][]cache.ResourceEventHandler
	watchErr [][]cache.WatchErrorHandlerWithContext
	metrics  *batchMetrics
	done     chan error
	cancel   context.CancelFunc
}

// startRunning runs a controller over one kind per entry of informers (that many informers
// each); edit may change its Config.
func startRunning(t *testing.T, informers []int, edit func(*Config)) *running {
	t.Helper()
	var names []string
	for i := range informers {
		names = append(names, fmt.Sprintf("Kind%c", 'A'+i))
	}
	return startRunningKinds(t, names, informers, edit)
}

// startRunningKinds is startRunning over kinds of the given names (testKind).
func startRunningKinds(t *testing.T, names []string, informers []int, edit func(*Config)) *running {
	t.Helper()
	r := &running{metrics: newBatchMetrics(), done: make(chan error, 1)}
	var watched []WatchedKind
	for i, n := range informers {
		k := testKind(names[i])
		r.kinds = append(r.kinds, k)
		wk := WatchedKind{Kind: k}
		var infs []*scriptedInformer
		for range n {
			inf := newScriptedInformer()
			infs = append(infs, inf)
			wk.Informers = append(wk.Informers, inf)
		}
		r.infs = append(r.infs, infs)
		watched = append(watched, wk)
	}
	cfg := Config{Logger: hclog.NewNullLogger(), Kinds: watched, SyncTimeout: time.Hour, Metrics: r.metrics, Store: store.Config{Epoch: "e1"}}
	if edit != nil {
		edit(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	for _, infs := range r.infs {
		var hs []cache.ResourceEventHandler
		var ws []cache.WatchErrorHandlerWithContext
		for _, inf := range infs {
			select {
			case w := <-inf.watchErr:
				ws = append(ws, w)
			case err := <-r.done:
				t.Fatalf("the controller stopped before registering its handlers: %v", err)
			}
			hs = append(hs, <-inf.handlers)
		}
		r.handlers = append(r.handlers, hs)
		r.watchErr = append(r.watchErr, ws)
	}
	return r
}

// batch waits until the owner goroutine finished one more batch. With nothing else queued,
// a push made while the owner waits is exactly one batch.
func (r *running) batch(t *testing.T) {
	t.Helper()
	select {
	case <-r.metrics.batches:
	case <-time.After(watchdog):
		t.Fatal("the controller did not process what was queued")
	}
}

func (r *running) open() bool {
	select {
	case <-r.c.Synced():
		return true
	default:
		return false
	}
}

// Informer callbacks only enqueue (the package doc): they never block on, or touch, the
// store, whose one owner is Run; without an owner running they return at once and the store
// is unchanged, and the queue holds every change in callback order.
func TestInformerCallbacksOnlyEnqueue(t *testing.T) {
	k := testKind("Service")
	c, err := New(Config{Logger: hclog.NewNullLogger(), Kinds: []WatchedKind{{Kind: k}}, SyncTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	h := c.handler(0)
	const n = 1000
	for i := range n {
		o := stored(k, fmt.Sprint("o", i), "1")
		h.OnAdd(o, true)
		h.OnUpdate(o, stored(k, fmt.Sprint("o", i), "2"))
		h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/" + o.Wire.Name, Obj: o})
	}
	if c.store.Revision() != 0 || c.store.Len() != 0 {
		t.Fatalf("callbacks without the owner running changed the store: revision %d, %d objects", c.store.Revision(), c.store.Len())
	}
	items := c.q.PopAll()
	if len(items) != 3*n {
		t.Fatalf("%d items queued for %d callbacks", len(items), 3*n)
	}
	for i, it := range items {
		wantRV, wantDeleted := []string{"1", "2", "1"}[i%3], i%3 == 2
		if it.kind != 0 || it.obj.Wire.Name != fmt.Sprint("o", i/3) || it.obj.Wire.ResourceVersion != wantRV || it.deleted != wantDeleted {
			t.Fatalf("item %d: %s@%s deleted %v; want o%d@%s deleted %v", i, it.obj.Wire.Name, it.obj.Wire.ResourceVersion, it.deleted, i/3, wantRV, wantDeleted)
		}
	}
}

// docs/design.md: deltas follow in store order, and the store's order is the informers':
// an update replaces, a delete (or a tombstone, cache.DeletedFinalStateUnknown, when the
// watch missed the delete) removes with the last stored state, a relist's unchanged
// redelivery and the delete of an object never stored are no change, and an object the
// informers' transform did not make is logged and dropped, not stored. The barrier is the
// last change, after all of them.
func TestChangesReachTheStoreInInformerOrder(t *testing.T) {
	type call func(k *kinds.Kind, h cache.ResourceEventHandler)
	add := func(name, rv string) call {
		return func(k *kinds.Kind, h cache.ResourceEventHandler) { h.OnAdd(stored(k, name, rv), true) }
	}
	update := func(name, oldRV, rv string) call {
		return func(k *kinds.Kind, h cache.ResourceEventHandler) {
			h.OnUpdate(stored(k, name, oldRV), stored(k, name, rv))
		}
	}
	del := func(name, rv string) call {
		return func(k *kinds.Kind, h cache.ResourceEventHandler) { h.OnDelete(stored(k, name, rv)) }
	}
	tombstone := func(name, rv string) call {
		return func(k *kinds.Kind, h cache.ResourceEventHandler) {
			h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/" + name, Obj: stored(k, name, rv)})
		}
	}
	untransformed := func(k *kinds.Kind, h cache.ResourceEventHandler) {
		h.OnAdd(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "raw"}}, true)
	}
	for _, tc := range []struct {
		name  string
		calls []call
		want  []string
		log   string
	}{
		{"add then update", []call{add("a", "1"), update("a", "1", "2")}, []string{"upsert a@1", "upsert a@2"}, ""},
		{"delete carries the last stored state", []call{add("a", "1"), update("a", "1", "2"), del("a", "1")}, []string{"upsert a@1", "upsert a@2", "delete a@2"}, ""},
		{"tombstone", []call{add("a", "1"), add("b", "1"), tombstone("a", "1")}, []string{"upsert a@1", "upsert b@1", "delete a@1"}, ""},
		{"delete of an object never stored", []call{del("x", "1"), tombstone("y", "1"), add("a", "1")}, []string{"upsert a@1"}, ""},
		{"relist redelivers unchanged", []call{add("a", "1"), update("a", "1", "1"), add("a", "1")}, []string{"upsert a@1"}, ""},
		{"deleted and created again", []call{add("a", "1"), del("a", "1"), add("a", "3")}, []string{"upsert a@1", "delete a@1", "upsert a@3"}, ""},
		{"untransformed object dropped", []call{untransformed, add("a", "1")}, []string{"upsert a@1"}, `informer delivered an untransformed object: type="*v1.Service"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &syncbuf.Buffer{}
			r := startRunning(t, []int{1}, func(cfg *Config) {
				cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})
			})
			sub, err := r.c.Subscribe(context.Background(), store.Request{})
			if err != nil {
				t.Fatal(err)
			}
			if sub.SyncedAtStart || len(sub.Snapshot()) != 0 {
				t.Fatal("a subscription before any change is not an empty, unsynced start")
			}
			for _, c := range tc.calls {
				c(r.kinds[0], r.handlers[0][0])
			}
			close(r.infs[0][0].synced)
			got := untilBarrier(t, sub, func(ev store.Event) string {
				return map[store.EventType]string{store.EventUpsert: "upsert ", store.EventDelete: "delete "}[ev.Type] + ev.Object.GetName() + "@" + ev.Object.GetResourceVersion()
			})
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("changes before the barrier: %v, want %v", got, tc.want)
			}
			if tc.log != "" && !strings.Contains(logs.String(), tc.log) {
				t.Fatalf("the log does not say %q:\n%s", tc.log, logs)
			}
		})
	}
}

// docs/design.md, the barrier: it holds only when, for every configured kind, every
// informer's handler registration synced (a kind may have several informers, one per
// namespace or field selector); a kind with zero objects syncs (scenario 3). Neither one
// kind's informers nor one informer of each kind open it. The seconds to sync are counted
// from the process start.
func TestBarrierWaitsForEveryInformerOfEveryKind(t *testing.T) {
	started := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := startRunning(t, []int{2, 1}, func(cfg *Config) {
		cfg.Started = started
		cfg.Now = func() time.Time { return started.Add(3 * time.Second) }
	})
	for _, step := range []struct {
		name     string
		inf      *scriptedInformer
		wantOpen bool
	}{
		{"the first of KindA's two informers", r.infs[0][0], false},
		{"KindB's only informer", r.infs[1][0], false},
		{"KindA's second informer", r.infs[0][1], true},
	} {
		close(step.inf.synced)
		r.batch(t)
		if r.open() != step.wantOpen {
			t.Fatalf("after %s synced: barrier open %v, want %v", step.name, r.open(), step.wantOpen)
		}
	}
	sub, err := r.c.Subscribe(context.Background(), store.Request{})
	if err != nil {
		t.Fatal(err)
	}
	inv := sub.StartInventory()
	if !sub.SyncedAtStart || len(inv) != 2 || inv[0].GetCount() != 0 || inv[1].GetCount() != 0 {
		t.Fatalf("after the barrier: synced at start %v, inventory %v; want synced, two kinds of zero objects", sub.SyncedAtStart, inv)
	}
	r.metrics.mu.Lock()
	defer r.metrics.mu.Unlock()
	if r.metrics.seconds != 3 {
		t.Fatalf("seconds to sync: %v, want 3 (from the process start)", r.metrics.seconds)
	}
}

// docs/design.md, scenario 1 and the barrier: nothing opens the barrier on a timeout. After
// SyncTimeout, counted from the process start, Run fails naming every kind that did not
// sync with the cause its informer reported (or that none was), sorted, and not the kinds
// that synced; no marker was ever due, and the subscriptions end as at a shutdown.
func TestSyncTimeoutNamesEveryKindNotSyncedAndNeverOpensTheBarrier(t *testing.T) {
	started := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fire := make(chan time.Time, 1)
	asked := make(chan time.Duration, 1)
	r := startRunning(t, []int{1, 1, 1}, func(cfg *Config) {
		cfg.SyncTimeout = time.Minute
		cfg.Started = started
		cfg.Now = func() time.Time { return started.Add(10 * time.Second) }
		cfg.After = func(d time.Duration) <-chan time.Time { asked <- d; return fire }
	})
	sub, err := r.c.Subscribe(context.Background(), store.Request{})
	if err != nil {
		t.Fatal(err)
	}
	r.batch(t)
	close(r.infs[0][0].synced) // KindA syncs
	r.batch(t)
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "kindbs"}, "", errors.New("rbac says no"))
	r.watchErr[1][0](context.Background(), nil, forbidden) // KindB's list is forbidden; KindC says nothing
	fire <- time.Time{}

	var err2 error
	select {
	case err2 = <-r.done:
		r.done <- err2 // for the cleanup
	case <-time.After(watchdog):
		t.Fatal("Run did not end when the sync timeout fired")
	}
	if d := <-asked; d != 50*time.Second {
		t.Fatalf("the timer was set for %s, want 50s: the timeout counts from the process start", d)
	}
	var te *SyncTimeoutError
	if !errors.As(err2, &te) {
		t.Fatalf("Run ended with %v, want a *SyncTimeoutError", err2)
	}
	if te.Timeout != time.Minute || len(te.Kinds) != 2 ||
		!strings.HasPrefix(te.Kinds[0], "v1/kindbs: forbidden (403): ") || !strings.Contains(te.Kinds[0], "rbac says no") ||
		te.Kinds[1] != "v1/kindcs: initial list not complete (no error reported)" {
		t.Fatalf("timeout error %q, want KindB forbidden and KindC without a cause, not KindA", te.Error())
	}
	if !strings.Contains(te.Error(), "initial sync did not complete within 1m0s; kinds not synced: v1/kindbs: forbidden (403)") {
		t.Fatalf("the timeout error says %q", te.Error())
	}
	if r.open() {
		t.Fatal("the barrier opened on a sync timeout")
	}
	<-sub.Done()
	if !errors.Is(sub.Err(), ErrShutdown) {
		t.Fatalf("the subscription ended with %v, want ErrShutdown", sub.Err())
	}
	for ev := range drainEvents(sub) {
		if ev.Type == store.EventSynced {
			t.Fatal("a subscriber saw the barrier open on a sync timeout")
		}
	}
	r.metrics.mu.Lock()
	defer r.metrics.mu.Unlock()
	if fmt.Sprint(r.metrics.fails) != "[v1/kindbs: forbidden (403)]" {
		t.Fatalf("sync failures counted: %v, want KindB forbidden", r.metrics.fails)
	}
}

// untilBarrier takes sub's changes until the barrier, each written by describe, failing the
// test when the subscription ends or no barrier comes.
func untilBarrier(t *testing.T, sub *store.Subscription, describe func(store.Event) string) []string {
	t.Helper()
	var got []string
	for {
		select {
		case <-sub.Ready():
			for _, ev := range sub.Take() {
				if ev.Type == store.EventSynced {
					return got
				}
				got = append(got, describe(ev))
			}
		case <-sub.Done():
			t.Fatalf("the subscription ended: %v", sub.Err())
		case <-time.After(watchdog):
			t.Fatalf("no barrier after %v", got)
		}
	}
}

// drainEvents yields what is buffered for sub without waiting.
func drainEvents(sub *store.Subscription) func(func(store.Event) bool) {
	return func(yield func(store.Event) bool) {
		for _, ev := range sub.Take() {
			if !yield(ev) {
				return
			}
		}
	}
}

// Scenario 5 (docs/design.md): a watcher stopped during the initial sync sends no marker.
// Run never opens the barrier once its context ended, even with every kind's synced report
// already queued. (Run's loop chooses between the end and the queue at random: repeated.)
func TestBarrierNeverOpensOnceTheContextEnded(t *testing.T) {
	for run := range 64 {
		k := testKind("Service")
		c, err := New(Config{Logger: hclog.NewNullLogger(), Kinds: []WatchedKind{{Kind: k, Informers: []Informer{newScriptedInformer()}}}, SyncTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		c.q.Push(item{kind: 0, obj: stored(k, "a", "1")})
		c.q.Push(item{kind: 0, synced: true}) // as the informer's registration would
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := c.Run(ctx); err != nil {
			t.Fatalf("run %d: Run ended with %v, want nil for a stop", run, err)
		}
		select {
		case <-c.Synced():
			t.Fatalf("run %d: the barrier opened after the context ended", run)
		default:
		}
		if c.store.Synced() {
			t.Fatalf("run %d: the store was marked synced after the context ended", run)
		}
	}
}

// New rejects a Config without what it needs.
func TestNewRejectsAnIncompleteConfig(t *testing.T) {
	k := WatchedKind{Kind: testKind("Service")}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no logger", Config{Kinds: []WatchedKind{k}, SyncTimeout: time.Minute}, "Logger is required"},
		{"no kinds", Config{Logger: hclog.NewNullLogger(), SyncTimeout: time.Minute}, "no kinds to watch"},
		{"no sync timeout", Config{Logger: hclog.NewNullLogger(), Kinds: []WatchedKind{k}}, "SyncTimeout must be positive"},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// The sync timeout and the logs name the cause of a list or watch failure: what RBAC, a
// missing CRD, an unreachable apiserver, throttling or an expired resourceVersion look like.
func TestClassifyNamesTheCauseOfAListOrWatchFailure(t *testing.T) {
	gr := schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{apierrors.NewForbidden(gr, "", errors.New("no")), "forbidden (403)"},
		{apierrors.NewUnauthorized("who are you"), "unauthorized (401)"},
		{apierrors.NewNotFound(gr, ""), "not served (404)"},
		{fmt.Errorf("list: %w", syscall.ECONNREFUSED), "apiserver unreachable"},
		{fmt.Errorf("watch: %w", syscall.ECONNRESET), "apiserver unreachable"},
		{&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("i/o timeout")}, "apiserver unreachable"},
		{apierrors.NewTooManyRequests("slow down", 1), "throttled (429)"},
		{apierrors.NewResourceExpired("too old resource version"), "resource version expired"},
		{&apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonGone, Message: "410 gone"}}, "resource version expired"},
		{io.ErrUnexpectedEOF, "error"},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// docs/design.md, "Cold start": the informers list concurrently, but a stream carries a
// route object after what it refers to. Ingresses listed (and synced) before the Services
// reach the store, and so every subscriber, only after the Services, then the barrier; a
// sync that times out names the kind that did not list, not the one held behind it.
func TestRoutesReachTheStoreAfterTheirReferents(t *testing.T) {
	t.Run("order", func(t *testing.T) {
		r := startRunningKinds(t, []string{"Ingress", "Service"}, []int{1, 1}, nil)
		sub, err := r.c.Subscribe(context.Background(), store.Request{})
		if err != nil {
			t.Fatal(err)
		}
		ing, svc := r.kinds[0], r.kinds[1]
		r.handlers[0][0].OnAdd(stored(ing, "i1", "1"), true)
		r.handlers[0][0].OnAdd(stored(ing, "i2", "2"), true)
		close(r.infs[0][0].synced)
		r.handlers[1][0].OnAdd(stored(svc, "s1", "3"), true)
		close(r.infs[1][0].synced)
		got := append(untilBarrier(t, sub, func(ev store.Event) string { return ev.Object.GetKind().GetKind() + "/" + ev.Object.GetName() }), "barrier")
		if want := "[Service/s1 Ingress/i1 Ingress/i2 barrier]"; fmt.Sprint(got) != want {
			t.Fatalf("the stream carried %v, want %s", got, want)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		fire := make(chan time.Time, 1)
		r := startRunningKinds(t, []string{"Ingress", "Service"}, []int{1, 1}, func(cfg *Config) {
			cfg.After = func(time.Duration) <-chan time.Time { return fire }
		})
		r.handlers[0][0].OnAdd(stored(r.kinds[0], "i1", "1"), true)
		r.batch(t)
		close(r.infs[0][0].synced) // the Ingresses listed; the Services never do
		r.batch(t)
		fire <- time.Time{}
		var te *SyncTimeoutError
		select {
		case err := <-r.done:
			r.done <- err
			if !errors.As(err, &te) {
				t.Fatalf("Run ended with %v, want a *SyncTimeoutError", err)
			}
		case <-time.After(watchdog):
			t.Fatal("Run did not end when the sync timeout fired")
		}
		if len(te.Kinds) != 1 || !strings.HasPrefix(te.Kinds[0], "v1/services: ") {
			t.Fatalf("the timeout names %q, want the Services only", te.Kinds)
		}
		if r.c.store.Len() != 0 {
			t.Fatalf("the store holds %d objects: an Ingress passed before its referents synced", r.c.store.Len())
		}
	})
}
