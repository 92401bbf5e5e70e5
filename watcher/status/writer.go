// Package status owns what the watcher writes back to Kubernetes: the status.loadBalancer of
// the Ingresses that translators serve, the status of the Gateway API objects (GatewayClass,
// Gateway, HTTPRoute) of the watcher's Gateway controller name, and Events for their findings. Translators report
// what they want over the StatusService stream (Service); the Writer keeps those reports and
// its own view of the Ingresses (a subscription to the store, like any Watch client), and
// writes only the differences, latest-wins per Ingress, through its own rate-limited client,
// and only while its replica holds the lease (Elector). What to write is decided by pure
// functions (decideIngress, decideGateway); the Writer keeps the state they decide on and does
// the I/O around them. Nothing on the watch or config path waits for it.
package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/fifo"
	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/store"
)

// FieldManager is the field manager of every status write.
const FieldManager = "sluice-watcher"

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

// Config configures a Writer.
type Config struct {
	Logger hclog.Logger
	Source Source
	// Client writes statuses and Events; give it its own QPS and burst, so that status
	// writes never take the informers' share of the apiserver.
	Client kubernetes.Interface
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

// item is one thing for the Writer's owner goroutine: a report, or a term beginning or ending.
type item struct {
	report *watchv1.ReportStatusRequest
	from   Origin
	begin  context.Context
	end    bool
}

// intent is one pending write: set the Ingress's status.loadBalancer.ingress to lb, as
// decided on in (whose obj is the version the decision was made on).
type intent struct {
	in ingressInput
	lb []*watchv1.LoadBalancerIngress
}

// Writer writes Ingress statuses and Events. One goroutine (Run) owns the reports and the
// view of the Ingresses; the workers of the current term take pending intents.
type Writer struct {
	cfg Config
	log hclog.Logger

	inbox *fifo.Queue[item]

	// Owned by Run.
	sources  map[string]map[key]*watchv1.IngressStatus
	origins  map[string]Origin // by source: whose class limits it
	refused  map[string]map[key]bool
	classes  map[string]contract.IngressClassInfo // replaced, never changed: intents hold it
	actual   map[key]*ingressView
	released map[key][]*watchv1.LoadBalancerIngress // addresses a source set and then let go of
	said     map[key]announced
	term     *term
	gw       gatewayState // Gateway API objects and reports (gatewaywriter.go)

	mu        sync.Mutex
	pending   map[key]intent
	gwPending map[objKey]gwIntent
}

type announced struct {
	uid      types.UID
	findings map[string]bool
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
	return &Writer{cfg: cfg, log: cfg.Logger, inbox: fifo.New[item](), sources: map[string]map[key]*watchv1.IngressStatus{},
		origins: map[string]Origin{}, refused: map[string]map[key]bool{}, classes: map[string]contract.IngressClassInfo{},
		actual: map[key]*ingressView{}, released: map[key][]*watchv1.LoadBalancerIngress{}, said: map[key]announced{},
		pending: map[key]intent{}, gw: newGatewayState(), gwPending: map[objKey]gwIntent{}}, nil
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

// resync replaces the view of the Ingresses with a subscription's snapshot (the Writer never
// resumes, so a subscription always starts with one) and decides again every Ingress it
// held or holds now.
func (w *Writer) resync(snapshot []*watchv1.Object) {
	old := w.actual
	w.actual = map[key]*ingressView{}
	w.classes = map[string]contract.IngressClassInfo{}
	oldGW := w.gw.objects
	w.gw.objects = map[objKey]*gatewayObject{}
	for _, o := range snapshot {
		if isGatewayKind(o.GetKind()) {
			w.gatewayUpsert(o)
			continue
		}
		w.upsert(o)
	}
	w.gatewayResync(oldGW)
	for k := range old {
		if _, ok := w.actual[k]; !ok {
			w.evaluate(k, false)
		}
	}
	for k := range w.actual {
		w.evaluate(k, false)
	}
}

func (w *Writer) storeEvent(ev store.Event) {
	if isGatewayKind(ev.Object.GetKind()) {
		w.gatewayStoreEvent(ev)
		return
	}
	switch ev.Type {
	case store.EventUpsert:
		if k, ok := w.upsert(ev.Object); ok {
			w.evaluate(k, false)
		} else if ev.Object.GetKind().GetKind() == "IngressClass" {
			w.classesChanged()
		}
	case store.EventDelete:
		if ev.Object.GetKind().GetKind() == "IngressClass" {
			w.classes = maps.Clone(w.classes)
			delete(w.classes, ev.Object.GetName())
			w.classesChanged()
			return
		}
		k := key{ev.Object.GetNamespace(), ev.Object.GetName()}
		delete(w.actual, k)
		delete(w.said, k)
		delete(w.released, k)
		w.evaluate(k, false)
	}
}

func (w *Writer) upsert(o *watchv1.Object) (key, bool) {
	k := key{o.GetNamespace(), o.GetName()}
	obj, err := watchstream.Decode(o)
	if err != nil {
		w.log.Error("ingress does not decode; its status is not written", "ingress", k.String(), "error", err)
		delete(w.actual, k)
		return k, true
	}
	if c, ok := obj.(*networkingv1.IngressClass); ok {
		// The caller decides again what the class may change (resync decides everything).
		w.classes = maps.Clone(w.classes)
		w.classes[c.Name] = contract.IngressClassInfo{Controller: c.Spec.Controller, Default: c.Annotations[contract.AnnotationDefaultClass] == "true"}
		return k, false
	}
	ing, ok := obj.(*networkingv1.Ingress)
	if !ok {
		return k, false
	}
	w.actual[k] = statusView(ing)
	return k, true
}

// ingressView is what the writer reads of an Ingress: its identity, its class and the
// addresses its status shows. The writer holds one per Ingress of the cluster: the whole
// Ingress was about a fifth of the watcher's heap at 10k Ingresses, and an Ingress struct
// with only those fields set still 37 MB at 100k (docs/design.md, "Cold start").
type ingressView struct {
	namespace, name string
	uid             types.UID
	resourceVersion string
	className       *string // spec.ingressClassName
	classAnnotation string  // the kubernetes.io/ingress.class annotation; "" when unset
	lb              []networkingv1.IngressLoadBalancerIngress
}

// statusView is the writer's view of ing.
func statusView(ing *networkingv1.Ingress) *ingressView {
	return &ingressView{namespace: ing.Namespace, name: ing.Name, uid: ing.UID, resourceVersion: ing.ResourceVersion,
		className: ing.Spec.IngressClassName, classAnnotation: ing.Annotations[contract.AnnotationIngressClass],
		lb: ing.Status.LoadBalancer.Ingress}
}

// classesChanged decides every Ingress again: which reports may act on it can change.
func (w *Writer) classesChanged() {
	if w.term == nil {
		return
	}
	for k := range w.actual {
		w.evaluate(k, false)
	}
}

// checkClasses logs, once per source and Ingress, a report about an Ingress of another
// class: it is kept (the Ingress may change class) but never acted on while it is not of
// the reporter's class.
func (w *Writer) checkClasses(src string, sts []*watchv1.IngressStatus) {
	for _, st := range sts {
		k := key{st.GetKey().GetNamespace(), st.GetKey().GetName()}
		ing := w.actual[k]
		if ing == nil || mayAct(w.origins[src], ing, w.cfg.ControllerName, w.classes) || w.refused[src][k] {
			continue
		}
		if w.refused[src] == nil {
			w.refused[src] = map[key]bool{}
		}
		w.refused[src][k] = true
		w.cfg.Metrics.StatusWrite("refused")
		w.log.Warn("status report refused: the ingress is not of the reporter's class", "source", src, "class", w.origins[src].Class, "ingress", k.String())
	}
}

// report applies a translator's report.
func (w *Writer) report(from Origin, req *watchv1.ReportStatusRequest) {
	src := req.GetSource()
	w.origins[src] = from
	w.gatewayReport(src, from, req)
	w.checkClasses(src, req.GetStatuses())
	cur := w.sources[src]
	if cur == nil || req.GetFull() {
		next := make(map[key]*watchv1.IngressStatus, len(req.GetStatuses()))
		for _, st := range req.GetStatuses() {
			next[key{st.GetKey().GetNamespace(), st.GetKey().GetName()}] = st
		}
		w.sources[src] = next
		for k, st := range cur {
			if _, ok := next[k]; !ok {
				w.release(k, st)
			}
		}
		for k, st := range next {
			if old, ok := cur[k]; !ok || !proto.Equal(old, st) {
				w.evaluate(k, true)
			}
		}
		return
	}
	for _, st := range req.GetStatuses() {
		k := key{st.GetKey().GetNamespace(), st.GetKey().GetName()}
		cur[k] = st
		w.evaluate(k, true)
	}
	for _, r := range req.GetRemoved() {
		k := key{r.GetNamespace(), r.GetName()}
		if st, ok := cur[k]; ok {
			delete(cur, k)
			w.release(k, st)
		}
	}
}

// release notes that a source no longer serves an Ingress: the addresses it set are taken
// back, unless another source serves it.
func (w *Writer) release(k key, st *watchv1.IngressStatus) {
	if st.GetManageLoadBalancer() && len(st.GetLoadBalancer()) > 0 {
		w.released[k] = st.GetLoadBalancer()
	}
	delete(w.said, k)
	w.evaluate(k, true)
}

// input is what decides an Ingress now (decideIngress).
func (w *Writer) input(k key) ingressInput {
	in := ingressInput{obj: w.actual[k], classes: w.classes, controller: w.cfg.ControllerName, released: w.released[k], told: w.said[k]}
	for src, m := range w.sources {
		if st, ok := m[k]; ok {
			if in.reports == nil {
				in.reports = map[string]sourceReport{}
			}
			in.reports[src] = sourceReport{from: w.origins[src], status: st}
		}
	}
	return in
}

// evaluate decides what one Ingress needs (decideIngress) and acts on it: a status write
// (queued, latest wins), Events, or nothing. fromReport says a report asked, for the
// skipped count. Only in a term: a replica that is not the leader says nothing.
func (w *Writer) evaluate(k key, fromReport bool) {
	if w.term == nil {
		return // beginTerm evaluates every Ingress again
	}
	in := w.input(k)
	dec := decideIngress(in)
	w.log.Trace("ingress status decided", "ingress", k.String(), "write", dec.write, "why", dec.why)
	if dec.forgetReleased {
		delete(w.released, k)
	}
	if dec.told != nil {
		w.said[k] = *dec.told
	}
	w.record(dec.events)
	w.mu.Lock()
	if dec.write {
		w.pending[k] = intent{in: in, lb: dec.lb}
	} else {
		delete(w.pending, k)
	}
	n := w.pendingLen()
	w.mu.Unlock()
	w.cfg.Metrics.SetStatusPending(n)
	if dec.write {
		w.term.queue.Add(objKey{key: k})
	} else if fromReport && in.obj != nil && dec.report != nil && dec.report.GetManageLoadBalancer() {
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
	// Reports from an earlier term may be stale: translators report in full again to
	// whichever replica leads, so start from nothing.
	w.sources = map[string]map[key]*watchv1.IngressStatus{}
	w.released = map[key][]*watchv1.LoadBalancerIngress{}
	w.said = map[key]announced{}
	w.gw.resetTerm()
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
	w.pending = map[key]intent{}
	w.gwPending = map[objKey]gwIntent{}
	w.mu.Unlock()
	for k := range w.actual {
		w.evaluate(k, false)
	}
	for k := range w.gw.objects {
		w.gatewayEvaluate(k, false)
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
	w.pending = map[key]intent{}
	w.gwPending = map[objKey]gwIntent{}
	w.mu.Unlock()
	w.cfg.Metrics.SetStatusPending(0)
	w.log.Info("status writing stopped")
}

// work takes one key and writes its newest intent; false when the term is over.
func (w *Writer) work(t *term) bool {
	qk, shutdown := t.queue.Get()
	if shutdown {
		return false
	}
	defer t.queue.Done(qk)
	if qk.kind != "" {
		return w.gatewayWork(t, qk)
	}
	k := qk.key
	w.mu.Lock()
	in, ok := w.pending[k]
	delete(w.pending, k)
	n := w.pendingLen()
	w.mu.Unlock()
	if !ok {
		return true
	}
	err := w.write(t.ctx, k, in)
	switch {
	case err == nil:
		t.queue.Forget(qk)
	case t.ctx.Err() != nil:
		return false // the lease is gone: this replica writes nothing more
	default:
		w.log.Warn("status write failed; retrying", "ingress", k.String(), "error", err)
		w.mu.Lock()
		if _, newer := w.pending[k]; !newer {
			w.pending[k] = in
		}
		n = w.pendingLen()
		w.mu.Unlock()
		t.queue.AddRateLimited(qk)
	}
	w.cfg.Metrics.SetStatusPending(n)
	return true
}

// write sets one Ingress's status.loadBalancer.ingress. The patch names the resourceVersion
// the decision was made on, so a concurrent change is a conflict, and a conflict is decided
// again (decideIngress, on the same reports) on a fresh read.
func (w *Writer) write(ctx context.Context, k key, in intent) error {
	for attempt := 0; ; attempt++ {
		body, err := statusPatch(in.in.obj.resourceVersion, in.lb)
		if err != nil {
			return err
		}
		_, err = w.cfg.Client.NetworkingV1().Ingresses(k.ns).Patch(ctx, k.name, types.MergePatchType, body,
			metav1.PatchOptions{FieldManager: FieldManager}, "status")
		switch {
		case err == nil:
			w.cfg.Metrics.StatusWrite("done")
			return nil
		case apierrors.IsNotFound(err):
			w.cfg.Metrics.StatusWrite("gone")
			return nil
		case !apierrors.IsConflict(err) || attempt >= 4:
			w.cfg.Metrics.StatusWrite("failed")
			return fmt.Errorf("patch status of ingress %s: %w", k, err)
		}
		w.cfg.Metrics.StatusWrite("conflict")
		fresh, gerr := w.cfg.Client.NetworkingV1().Ingresses(k.ns).Get(ctx, k.name, metav1.GetOptions{})
		if apierrors.IsNotFound(gerr) {
			w.cfg.Metrics.StatusWrite("gone")
			return nil
		}
		if gerr != nil {
			w.cfg.Metrics.StatusWrite("failed")
			return fmt.Errorf("read ingress %s after a conflict: %w", k, gerr)
		}
		if fresh.UID != in.in.obj.uid {
			w.cfg.Metrics.StatusWrite("gone")
			return nil
		}
		next := in.in
		next.obj = statusView(fresh)
		dec := decideIngress(next)
		if !dec.write {
			w.cfg.Metrics.StatusWrite("skipped")
			return nil
		}
		in = intent{in: next, lb: dec.lb}
	}
}

func statusPatch(resourceVersion string, lb []*watchv1.LoadBalancerIngress) ([]byte, error) {
	type lbIngress struct {
		IP       string `json:"ip,omitempty"`
		Hostname string `json:"hostname,omitempty"`
	}
	var list any // null removes the field
	if len(lb) > 0 {
		l := make([]lbIngress, 0, len(lb))
		for _, a := range lb {
			l = append(l, lbIngress{IP: a.GetIp(), Hostname: a.GetHostname()})
		}
		list = l
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": resourceVersion},
		"status":   map[string]any{"loadBalancer": map[string]any{"ingress": list}},
	})
}

// pendingLen is the number of pending writes; the caller holds mu.
func (w *Writer) pendingLen() int { return len(w.pending) + len(w.gwPending) }

type nopMetrics struct{}

func (nopMetrics) SetStatusPending(int)     {}
func (nopMetrics) StatusWrite(string)       {}
func (nopMetrics) Event(typ, result string) {}
