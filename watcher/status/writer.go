// Package status owns what the watcher writes back to Kubernetes: the status.loadBalancer of
// the Ingresses that translators serve, the status of the Gateway API objects (GatewayClass,
// Gateway, ListenerSet, HTTPRoute, BackendTLSPolicy) of the watcher's Gateway controller
// name, and Events for their findings. Translators report what they want over the
// StatusService stream (Service), every kind of object in one shape (watchv1.ObjectStatus);
// the Writer keeps those reports and its own view of the objects (a subscription to the
// store, like any Watch client), and writes only the differences, latest-wins per object,
// through one queue and its own rate-limited client, and only while its replica holds the
// lease (Elector). What to write is decided by pure functions, one per API (decideIngress,
// decideGateway); the Writer keeps the state they decide on and does the I/O around them.
// Nothing on the watch or config path waits for it.
package status

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	networkingv1client "k8s.io/client-go/kubernetes/typed/networking/v1"
	"k8s.io/client-go/util/workqueue"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/fifo"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/store"
)

// FieldManager is the field manager of every status write.
const FieldManager = "sluice-watcher"

// KindIngress is the kind of an Ingress's key on the status stream (group networking.k8s.io).
const KindIngress = "Ingress"

// Source is the watcher's store, as the Writer follows it; the controller is one.
type Source interface {
	Subscribe(ctx context.Context, req store.Request) (*store.Subscription, error)
	Unsubscribe(sub *store.Subscription)
}

// Metrics receives the Writer's measurements.
type Metrics interface {
	SetStatusPending(n int)
	// StatusWrite counts one outcome, one of WriteResults.
	StatusWrite(result string)
	// Event counts one Event: its type, and whether it was sent or failed.
	Event(typ, result string)
}

// WriteResults are every outcome Metrics.StatusWrite is given, so that the metric can show
// each at zero before the first write: done, conflict (decided again on a fresh read),
// failed (retried with backoff), skipped (already right), gone (object deleted), refused (a
// report the reporter may not act on).
var WriteResults = []string{"done", "conflict", "failed", "skipped", "gone", "refused"}

// Client is what the Writer asks of the typed API: Ingresses' statuses and Events.
// client-go's clientset has it.
type Client interface {
	NetworkingV1() networkingv1client.NetworkingV1Interface
	CoreV1() corev1client.CoreV1Interface
}

// Config configures a Writer.
type Config struct {
	Logger hclog.Logger
	Source Source
	// Client writes statuses and Events; give it its own QPS and burst, so that status
	// writes never take the informers' share of the apiserver.
	Client Client
	// Ingress is the Ingress kind as the store holds it.
	Ingress *watchv1.GroupVersionKind
	// IngressClass is the IngressClass kind as the store holds it; the Writer needs the
	// classes to hold a translator to its own class (contract.MayReport). Without it, a
	// report from a checked origin is acted on only for Ingresses that name its class or
	// no class at all.
	IngressClass *watchv1.GroupVersionKind
	// ControllerName is the translators' Ingress controller name (their --controller-name):
	// a checked origin may act on Ingresses of any IngressClass with it (contract.MayReport).
	// Empty: only its own class and the classes of that class's controller.
	ControllerName string
	// Dynamic writes the statuses of Gateway API objects, through the same rate limiter as
	// Client. Required with GatewayControllerName.
	Dynamic dynamic.Interface
	// GatewayControllerName is the watcher's Gateway controller name: a report of Gateway API
	// statuses must name it, and only objects of GatewayClasses with it are written. Empty:
	// Gateway API statuses are not written (and their reports refused).
	GatewayControllerName string
	// GatewayTranslatorClass is the IngressClass of the translator whose identity serves
	// GatewayControllerName: a report from a checked origin (mTLS) of another class has its
	// Gateway API statuses kept but never written. Empty: no checked origin may report them.
	GatewayTranslatorClass string
	// Now is the clock of conditions' lastTransitionTime (default time.Now).
	Now func() time.Time
	// Workers write concurrently (the client's rate limit still applies).
	Workers int
	// Component names the Events' source.
	Component string
	Metrics   Metrics
}

type key struct{ ns, name string }

func (k key) String() string { return k.ns + "/" + k.name }

// objKey names an object of either API, on the one queue and in every map of reports: kind
// is KindIngress or a Gateway API kind (namespace empty for a GatewayClass).
type objKey struct {
	kind string
	key
}

func (k objKey) String() string {
	if k.ns == "" {
		return k.kind + " " + k.name
	}
	return k.kind + " " + k.key.String()
}

func objKeyOf(k *watchv1.ObjectKey) objKey {
	return objKey{kind: k.GetKind(), key: key{k.GetNamespace(), k.GetName()}}
}

// item is one thing for the Writer's owner goroutine: a report, or a term beginning or ending.
type item struct {
	report *watchv1.ReportStatusRequest
	from   Origin
	begin  context.Context
	end    bool
}

// pendingWrite is one decided status write, of an object of any kind: what it was decided
// on and what to write, with its kind's way of writing it (ingressWrite, gatewayWrite).
type pendingWrite interface {
	// patch writes the status onto the version of the object it was decided on, so that a
	// concurrent change of the object is a conflict.
	patch(ctx context.Context, w *Writer, k objKey) error
	// again reads the object afresh after a conflict and decides on that read (with the same
	// reports): the write to try next, or nil and the outcome that ends the write ("gone",
	// "skipped").
	again(ctx context.Context, w *Writer, k objKey) (pendingWrite, string, error)
}

// Writer writes the statuses of Ingresses and Gateway API objects, and Events. One goroutine
// (Run) owns the reports and the view of the objects; the workers of the current term take
// pending writes from one queue.
type Writer struct {
	cfg Config
	log hclog.Logger

	inbox *fifo.Queue[item]

	// Owned by Run. Reports of either API, by source and object.
	sources map[string]map[objKey]*watchv1.ObjectStatus
	// addresses is the last list of addresses a status carried, which the next ones that
	// carry the same share (share). Never modified: statuses hold it.
	addresses []*watchv1.GatewayAddress
	origins   map[string]Origin // by source: whose class limits it
	// released are the statuses sources reported and then let go of, while what they set
	// may still have to be taken back.
	released map[objKey]*watchv1.ObjectStatus
	said     map[objKey]announced
	// refused are, by source, the objects already counted (and, for an Ingress, logged) as
	// refused; refusedLogged the refusals logged once per source (and controller name).
	refused       map[string]map[objKey]bool
	refusedLogged map[string]bool
	// The objects as the store shows them: Ingresses (and the IngressClasses that decide
	// whose they are), and Gateway API objects.
	ingresses map[key]*ingressView
	classes   map[string]contract.IngressClassInfo // replaced, never changed: writes hold it
	gateways  map[objKey]*gatewayObject
	term      *term

	mu      sync.Mutex
	pending map[objKey]pendingWrite
}

type announced struct {
	uid      types.UID
	findings map[string]bool
}

// tell records what an object has been told. One told nothing is not kept: nearly every
// object of a large cluster has no findings, and announce takes an absent entry as it takes
// one with none (docs/design.md, "Cold start": the status writer keeps of each Ingress only
// what it decides on).
func (w *Writer) tell(k objKey, a announced) {
	if len(a.findings) == 0 {
		delete(w.said, k)
		return
	}
	w.said[k] = a
}

// term is one period of leadership: its context ends the moment the lease is lost.
type term struct {
	ctx      context.Context
	queue    workqueue.TypedRateLimitingInterface[objKey]
	recorder *recorder
	done     sync.WaitGroup
}

// New returns a Writer; Run starts it.
func New(cfg Config) (*Writer, error) {
	if cfg.Logger == nil || cfg.Source == nil || cfg.Client == nil || cfg.Ingress == nil {
		return nil, errors.New("status: Logger, Source, Client and Ingress are required")
	}
	if cfg.GatewayControllerName != "" && cfg.Dynamic == nil {
		return nil, errors.New("status: Dynamic is required with GatewayControllerName")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	if cfg.Component == "" {
		cfg.Component = "sluice-watcher"
	}
	if cfg.Metrics == nil {
		cfg.Metrics = nopMetrics{}
	}
	w := &Writer{cfg: cfg, log: cfg.Logger, inbox: fifo.New[item](), refused: map[string]map[objKey]bool{}, refusedLogged: map[string]bool{},
		origins: map[string]Origin{}, classes: map[string]contract.IngressClassInfo{}, ingresses: map[key]*ingressView{},
		gateways: map[objKey]*gatewayObject{}}
	w.forgetReports()
	return w, nil
}

// forgetReports starts from no report: translators report in full again to whichever
// replica leads, so the reports of an earlier term may be stale.
func (w *Writer) forgetReports() {
	w.sources = map[string]map[objKey]*watchv1.ObjectStatus{}
	w.released = map[objKey]*watchv1.ObjectStatus{}
	w.said = map[objKey]announced{}
}

// Report hands a translator's report to the Writer. It never blocks.
func (w *Writer) Report(from Origin, req *watchv1.ReportStatusRequest) {
	w.inbox.Push(item{report: req, from: from})
}

// BeginTerm starts writing: ctx is the term of leadership and ends when the lease is lost.
// Reports that arrive after BeginTerm are applied after the term began.
func (w *Writer) BeginTerm(ctx context.Context) { w.inbox.Push(item{begin: ctx}) }

// EndTerm stops writing at once; in-flight requests are cancelled with the term's context.
func (w *Writer) EndTerm() { w.inbox.Push(item{end: true}) }

// Run owns the Writer's state until ctx ends.
func (w *Writer) Run(ctx context.Context) error {
	defer w.endTerm()
	for ctx.Err() == nil {
		kinds := []*watchv1.GroupVersionKind{w.cfg.Ingress}
		if w.cfg.IngressClass != nil {
			kinds = append(kinds, w.cfg.IngressClass)
		}
		gwKinds, err := w.gatewayKinds(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("status writer: ask the store for its kinds: %w", err)
		}
		kinds = append(kinds, gwKinds...)
		sub, err := w.cfg.Source.Subscribe(ctx, store.Request{Kinds: kinds})
		if errors.Is(err, store.ErrUnknownKind) {
			// The store changed (a new epoch without a Gateway API kind) between the two
			// subscriptions: ask again.
			w.log.Debug("store kinds changed while subscribing; subscribing again", "error", err)
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("status writer: subscribe to the store: %w", err)
		}
		w.resync(sub.Snapshot())
		err = w.follow(ctx, sub)
		w.cfg.Source.Unsubscribe(sub)
		if ctx.Err() != nil {
			return nil
		}
		w.log.Warn("store subscription ended; subscribing again", "error", err)
	}
	return nil
}

func (w *Writer) follow(ctx context.Context, sub *store.Subscription) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sub.Done():
			return sub.Err()
		case <-sub.Ready():
			for _, ev := range sub.Take() {
				w.storeEvent(ev)
			}
		case <-w.inbox.Notify():
			for _, it := range w.inbox.PopAll() {
				switch {
				case it.report != nil:
					w.report(it.from, it.report)
				case it.begin != nil:
					w.beginTerm(it.begin)
				case it.end:
					w.endTerm()
				}
			}
		}
	}
}

// resync replaces the view of the objects with a subscription's snapshot (the Writer never
// resumes, so a subscription always starts with one) and decides again every object it held
// or holds now.
func (w *Writer) resync(snapshot []*watchv1.Object) {
	held := w.objectKeys()
	w.ingresses = map[key]*ingressView{}
	w.classes = map[string]contract.IngressClassInfo{}
	w.gateways = map[objKey]*gatewayObject{}
	for _, o := range snapshot {
		if isGatewayKind(o.GetKind()) {
			w.gatewayUpsert(o)
		} else {
			w.ingressUpsert(o)
		}
	}
	for _, k := range held {
		if !w.holds(k) { // gone with the snapshot; the others are decided below
			w.evaluate(k, false)
		}
	}
	for _, k := range w.objectKeys() {
		w.evaluate(k, false)
	}
}

// objectKeys are the keys of every object in the view.
func (w *Writer) objectKeys() []objKey {
	out := make([]objKey, 0, len(w.ingresses)+len(w.gateways))
	for k := range w.ingresses {
		out = append(out, ingressKey(k))
	}
	for k := range w.gateways {
		out = append(out, k)
	}
	return out
}

// holds says whether the view holds the object k names.
func (w *Writer) holds(k objKey) bool {
	if k.kind == KindIngress {
		return w.ingresses[k.key] != nil
	}
	return w.gateways[k] != nil
}

func (w *Writer) storeEvent(ev store.Event) {
	if isGatewayKind(ev.Object.GetKind()) {
		w.gatewayStoreEvent(ev)
	} else {
		w.ingressStoreEvent(ev)
	}
}

// forget drops what the Writer told and took back of an object that is gone.
func (w *Writer) forget(k objKey) {
	delete(w.said, k)
	delete(w.released, k)
}

// report applies a translator's report: every kind of object alike, but for what admit
// refuses (a Gateway API status naming another controller is taken as not reported).
func (w *Writer) report(from Origin, req *watchv1.ReportStatusRequest) {
	src := req.GetSource()
	w.origins[src] = from
	sts, gone := w.admit(src, from, req.GetObjects())
	for _, r := range req.GetRemovedObjects() {
		gone = append(gone, objKeyOf(r))
	}
	cur := w.sources[src]
	if cur == nil || req.GetFull() {
		next := make(map[objKey]*watchv1.ObjectStatus, len(sts))
		for _, st := range sts {
			next[objKeyOf(st.GetKey())] = st
		}
		w.sources[src] = next
		for k, st := range cur {
			if _, ok := next[k]; !ok {
				w.release(src, k, st)
			}
		}
		for k, st := range next {
			if old, ok := cur[k]; (!ok || !proto.Equal(old, st)) && w.mayDecide(src, k) {
				w.evaluate(k, true)
			}
		}
		return
	}
	for _, st := range sts {
		k := objKeyOf(st.GetKey())
		cur[k] = st
		if w.mayDecide(src, k) {
			w.evaluate(k, true)
		}
	}
	for _, k := range gone {
		if st, ok := cur[k]; ok {
			delete(cur, k)
			w.release(src, k, st)
		}
	}
}

// admit returns the statuses of a report the Writer keeps, and the keys of those it refuses
// (taken as if the source no longer reported them). It counts and logs refusals once: a
// report about an Ingress of another class (kept, as the Ingress may change class), a
// Gateway API status naming another controller (refused), a source that may not decide
// Gateway API statuses (kept but never acted on).
// share makes a status as the writer keeps it share what it repeats of what the writer
// holds already: an Ingress's identity is the stored object's strings (the view's), and the
// addresses, the same for nearly every status of a source, are one list. The writer keeps a
// status of every Ingress of the cluster, and each decoded one came with its own copy of
// each (docs/design.md, "Cold start": the watcher keeps each object once).
func (w *Writer) share(st *watchv1.ObjectStatus) {
	if k := st.GetKey(); k.GetKind() == KindIngress {
		k.Kind = KindIngress
		if v, ok := w.ingresses[key{k.GetNamespace(), k.GetName()}]; ok {
			k.Namespace, k.Name = v.namespace, v.name
			if st.GetUid() == string(v.uid) {
				st.Uid = string(v.uid)
			}
		}
	}
	a := st.GetAddresses()
	if len(a) == 0 {
		return
	}
	if slices.EqualFunc(a, w.addresses, func(x, y *watchv1.GatewayAddress) bool {
		return x.GetType() == y.GetType() && x.GetValue() == y.GetValue()
	}) {
		st.Addresses = w.addresses
		return
	}
	w.addresses = a
}

func (w *Writer) admit(src string, from Origin, sts []*watchv1.ObjectStatus) (kept []*watchv1.ObjectStatus, refused []objKey) {
	why := gatewayRefusal(from, w.cfg.GatewayTranslatorClass)
	for _, st := range sts {
		w.share(st)
		k := objKeyOf(st.GetKey())
		if k.kind == KindIngress {
			w.checkClass(src, k)
			kept = append(kept, st)
			continue
		}
		if c := st.GetControllerName(); c != w.cfg.GatewayControllerName || c == "" {
			refused = append(refused, k)
			w.cfg.Metrics.StatusWrite("refused")
			if once := src + "\x00" + c; !w.refusedLogged[once] {
				w.refusedLogged[once] = true
				w.log.Warn("gateway api status report refused: it names another controller than this watcher's --gateway-controller-name",
					"source", src, "controller", c, "want", w.cfg.GatewayControllerName, "object", k.String())
			}
			continue
		}
		if why != "" {
			if !w.refusedLogged[src] {
				w.refusedLogged[src] = true
				w.log.Warn("gateway api status report refused: its Gateway API statuses are kept but never written",
					"source", src, "class", from.Class, "why", why)
			}
			w.countRefused(src, k)
		}
		kept = append(kept, st)
	}
	return kept, refused
}

// countRefused counts a refused report about k once per source; false when it was counted
// before.
func (w *Writer) countRefused(src string, k objKey) bool {
	if w.refused[src][k] {
		return false
	}
	if w.refused[src] == nil {
		w.refused[src] = map[objKey]bool{}
	}
	w.refused[src][k] = true
	w.cfg.Metrics.StatusWrite("refused")
	return true
}

// mayDecide says whether src's report about k may change what k shows: a Gateway API status
// only from a source that may decide them (gatewayRefusal); an Ingress's from any source,
// as decideIngress holds each report to its class.
func (w *Writer) mayDecide(src string, k objKey) bool {
	return k.kind == KindIngress || gatewayRefusal(w.origins[src], w.cfg.GatewayTranslatorClass) == ""
}

// release notes that a source no longer serves an object: what it set is taken back unless
// another source serves it (an Ingress's addresses, while it shows exactly those; an
// HTTPRoute's parents entries of ours); a GatewayClass or a Gateway keeps its status
// (decideGateway says why).
func (w *Writer) release(src string, k objKey, st *watchv1.ObjectStatus) {
	if !w.mayDecide(src, k) {
		return
	}
	if k.kind != KindIngress || (st.GetManageAddresses() && len(st.GetAddresses()) > 0) {
		w.released[k] = st
	}
	delete(w.said, k)
	w.evaluate(k, true)
}

// reports are the reports about an object, in source name order, with their origins (the
// decision chooses among them). The slice is new: a pending write holds it.
func (w *Writer) reports(k objKey) sourceReports {
	var out sourceReports
	for src, m := range w.sources {
		if st, ok := m[k]; ok {
			out = append(out, namedReport{source: src, sourceReport: sourceReport{from: w.origins[src], status: st}})
		}
	}
	if len(out) > 1 {
		slices.SortFunc(out, func(a, b namedReport) int { return strings.Compare(a.source, b.source) })
	}
	return out
}

// evaluate decides what one object needs (decideIngress, decideGateway) and acts on it: a
// status write (queued, latest wins), Events, or nothing. fromReport says a report asked,
// for the skipped count. Only in a term: a replica that is not the leader says nothing.
func (w *Writer) evaluate(k objKey, fromReport bool) {
	if w.term == nil {
		return // beginTerm evaluates every object again
	}
	var p pendingWrite
	var skipped bool
	if k.kind == KindIngress {
		p, skipped = w.evaluateIngress(k)
	} else {
		p, skipped = w.evaluateGateway(k)
	}
	w.mu.Lock()
	if p != nil {
		w.pending[k] = p
	} else {
		delete(w.pending, k)
	}
	n := len(w.pending)
	w.mu.Unlock()
	w.cfg.Metrics.SetStatusPending(n)
	if p != nil {
		w.term.queue.Add(k)
	} else if fromReport && skipped {
		w.cfg.Metrics.StatusWrite("skipped")
	}
}

// announceTo records the Events of findings on ref (announce), given what it was told before
// (prev), and returns what it has been told now. Only in a term.
func (w *Writer) announceTo(prev announced, ref *corev1.ObjectReference, findings []*watchv1.StatusFinding) announced {
	next, events := announce(prev, ref, findings)
	w.record(events)
	return next
}

// record records Events through the term's recorder.
func (w *Writer) record(events []event) {
	for _, e := range events {
		w.term.recorder.event(e.ref, e.typ, e.reason, e.message)
	}
}

func (w *Writer) beginTerm(ctx context.Context) {
	w.endTerm()
	w.forgetReports()
	t := &term{ctx: ctx, queue: workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[objKey](100*time.Millisecond, 30*time.Second),
		workqueue.TypedRateLimitingQueueConfig[objKey]{Name: "status"})}
	t.recorder = newRecorder(ctx, w.cfg.Client, w.cfg.Component, w.cfg.Metrics, w.log)
	w.term = t
	for i := 0; i < w.cfg.Workers; i++ {
		t.done.Add(1)
		go func() {
			defer t.done.Done()
			for w.work(t) {
			}
		}()
	}
	go func() {
		<-ctx.Done()
		t.queue.ShutDown()
	}()
	w.mu.Lock()
	w.pending = map[objKey]pendingWrite{}
	w.mu.Unlock()
	for _, k := range w.objectKeys() {
		w.evaluate(k, false)
	}
	w.log.Info("status writing started")
}

func (w *Writer) endTerm() {
	t := w.term
	if t == nil {
		return
	}
	w.term = nil
	t.queue.ShutDown()
	t.recorder.shutdown()
	w.mu.Lock()
	w.pending = map[objKey]pendingWrite{}
	w.mu.Unlock()
	w.cfg.Metrics.SetStatusPending(0)
	w.log.Info("status writing stopped")
}

// work takes one key and writes its newest pending write; false when the term is over.
func (w *Writer) work(t *term) bool {
	k, shutdown := t.queue.Get()
	if shutdown {
		return false
	}
	defer t.queue.Done(k)
	w.mu.Lock()
	p, ok := w.pending[k]
	delete(w.pending, k)
	n := len(w.pending)
	w.mu.Unlock()
	if !ok {
		return true
	}
	err := w.write(t.ctx, k, p)
	switch {
	case err == nil:
		t.queue.Forget(k)
	case t.ctx.Err() != nil:
		return false // the lease is gone: this replica writes nothing more
	default:
		w.log.Warn("status write failed; retrying", "object", k.String(), "error", err)
		w.mu.Lock()
		if _, newer := w.pending[k]; !newer {
			w.pending[k] = p
		}
		n = len(w.pending)
		w.mu.Unlock()
		t.queue.AddRateLimited(k)
	}
	w.cfg.Metrics.SetStatusPending(n)
	return true
}

// maxConflicts is how many conflicts in a row one write decides again on a fresh read
// before it is retried through the queue, with backoff.
const maxConflicts = 4

// write writes one object's status. The write names the version the decision was made on,
// so a concurrent change is a conflict, and a conflict is decided again (with the same
// reports) on a fresh read: the same for every kind, whose pendingWrite says how.
func (w *Writer) write(ctx context.Context, k objKey, p pendingWrite) error {
	for attempt := 0; ; attempt++ {
		err := p.patch(ctx, w, k)
		switch {
		case err == nil:
			w.cfg.Metrics.StatusWrite("done")
			return nil
		case apierrors.IsNotFound(err):
			w.cfg.Metrics.StatusWrite("gone")
			return nil
		case !apierrors.IsConflict(err) || attempt >= maxConflicts:
			w.cfg.Metrics.StatusWrite("failed")
			return fmt.Errorf("patch status of %s: %w", k, err)
		}
		w.cfg.Metrics.StatusWrite("conflict")
		next, outcome, err := p.again(ctx, w, k)
		switch {
		case apierrors.IsNotFound(err):
			w.cfg.Metrics.StatusWrite("gone")
			return nil
		case err != nil:
			w.cfg.Metrics.StatusWrite("failed")
			return fmt.Errorf("read %s after a conflict: %w", k, err)
		case next == nil:
			w.cfg.Metrics.StatusWrite(outcome)
			return nil
		}
		p = next
	}
}

type nopMetrics struct{}

func (nopMetrics) SetStatusPending(int)     {}
func (nopMetrics) StatusWrite(string)       {}
func (nopMetrics) Event(typ, result string) {}
