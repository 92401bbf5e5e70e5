// Package controller owns the watcher's state: it runs the informers, whose callbacks only
// enqueue, and one goroutine that applies their changes to the store in order, decides when
// the barrier opens, and hands out subscriptions. The barrier opens only when, for every
// configured kind, each informer's handler registration has synced (every item of the
// initial list went through the handler) and the queue has been drained up to that point.
// Nothing opens it on a timeout: after SyncTimeout the controller fails instead, naming the
// kinds that did not sync and why.
package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-io/sluice/internal/fifo"
	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/kinds"
	"github.com/sluice-io/sluice/watcher/refs"
	"github.com/sluice-io/sluice/watcher/store"
)

// Informer is the part of a client-go shared informer the controller uses.
type Informer interface {
	AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
	SetWatchErrorHandlerWithContext(handler cache.WatchErrorHandlerWithContext) error
	RunWithContext(ctx context.Context)
}

// WatchedKind is one kind with its informers.
type WatchedKind struct {
	Kind      *kinds.Kind
	Informers []Informer
}

// Metrics receives the controller's measurements.
type Metrics interface {
	SetObjects(kind string, n int)
	SetRevision(rev uint64)
	SetSyncSeconds(s float64)
	SyncFailure(kind, cause string)
}

// Config configures a Controller.
type Config struct {
	Logger hclog.Logger
	Kinds  []WatchedKind
	Store  store.Config
	// SyncTimeout bounds the initial sync, counted from Started.
	SyncTimeout time.Duration
	// Causes is where discovery already recorded why kinds were pending; may be nil.
	Causes  *kinds.Causes
	Metrics Metrics
	// Now is the clock (time.Now in production).
	Now func() time.Time
	// After is the timer (time.After in production).
	After func(time.Duration) <-chan time.Time
	// Started is when the process started, for the seconds-to-sync figure.
	Started time.Time
	// ServedSecrets are Secrets the stream carries whatever references them (the
	// translators' default certificates, which the operator named).
	ServedSecrets []refs.SecretKey
}

// Controller is the watcher's owner of state.
type Controller struct {
	cfg    Config
	log    hclog.Logger
	store  *store.Store
	q      *fifo.Queue[item]
	synced chan struct{}
	causes *kinds.Causes

	// stopped is closed when Run returned: nobody drains q any more, so Subscribe answers
	// stopErr (set before the close) instead of waiting for the owner.
	stopped chan struct{}
	stopErr error

	// The Secrets the stream may carry are those a watched route object references
	// (package refs). held are all the Secrets the informers delivered; the store holds only
	// the referenced ones, so the snapshot, the marker's inventory, resumes and the
	// redacted view all count exactly the Secrets served.
	secretKind int // index in cfg.Kinds of the Secrets, -1 when none are watched
	tracked    []bool
	held       map[refs.SecretKey]*watchv1.Object
	refs       *refs.Index

	// stages holds back, before the barrier, the changes of route objects until what they
	// refer to has synced.
	stages *stages
}

// New returns a controller; Run starts it.
func New(cfg Config) (*Controller, error) {
	if cfg.Logger == nil {
		return nil, errors.New("controller: Logger is required")
	}
	if len(cfg.Kinds) == 0 {
		return nil, errors.New("controller: no kinds to watch")
	}
	if cfg.SyncTimeout <= 0 {
		return nil, errors.New("controller: SyncTimeout must be positive")
	}
	if cfg.Metrics == nil {
		cfg.Metrics = nopMetrics{}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	if cfg.Started.IsZero() {
		cfg.Started = cfg.Now()
	}
	if cfg.Causes == nil {
		cfg.Causes = &kinds.Causes{}
	}
	cfg.Store.Kinds = nil
	for _, k := range cfg.Kinds {
		cfg.Store.Kinds = append(cfg.Store.Kinds, k.Kind.Wire())
	}
	st, err := store.New(cfg.Store)
	if err != nil {
		return nil, err
	}
	c := &Controller{cfg: cfg, log: cfg.Logger, store: st, synced: make(chan struct{}), causes: cfg.Causes, q: fifo.New[item](),
		stopped: make(chan struct{}), stopErr: ErrShutdown,
		secretKind: -1, tracked: make([]bool, len(cfg.Kinds)), held: map[refs.SecretKey]*watchv1.Object{}, refs: refs.NewIndex()}
	stage, informers := make([]int, len(cfg.Kinds)), make([]int, len(cfg.Kinds))
	for i, k := range cfg.Kinds {
		stage[i], informers[i] = k.Kind.Stage(), len(k.Informers)
	}
	c.stages = newStages(stage, informers)
	for _, k := range cfg.ServedSecrets {
		// Referenced by the operator's flag, in the Secret's own namespace: always served.
		c.refs.Set(refs.Owner{Kind: "DefaultCertificate", Namespace: k.Namespace, Name: k.Name}, &refs.Refs{Secrets: []refs.SecretKey{k}})
	}
	for i, k := range cfg.Kinds {
		gk := k.Kind.GVK.GroupKind()
		if gk.Group == "" && gk.Kind == "Secret" {
			c.secretKind = i
		}
		c.tracked[i] = refs.Tracked(gk)
	}
	return c, nil
}

// Epoch is the store's epoch.
func (c *Controller) Epoch() string { return c.store.Epoch() }

// Synced is closed when the barrier opened.
func (c *Controller) Synced() <-chan struct{} { return c.synced }

// item is one entry of the owner's queue.
type item struct {
	kind    int
	obj     *kinds.Stored
	deleted bool
	// synced: informer `kind` reports its handler registration synced.
	synced bool
	sub    *subscribeReq
	unsub  *store.Subscription
}

type subscribeReq struct {
	req   store.Request
	reply chan subscribeReply
}

type subscribeReply struct {
	sub *store.Subscription
	err error
}

// SyncTimeoutError is the barrier not opening in time.
type SyncTimeoutError struct {
	Timeout time.Duration
	Kinds   []string // "kind: cause"
}

func (e *SyncTimeoutError) Error() string {
	return fmt.Sprintf("initial sync did not complete within %s; kinds not synced: %s", e.Timeout, strings.Join(e.Kinds, "; "))
}

// ErrShutdown ends subscriptions when the watcher stops.
var ErrShutdown = errors.New("watcher is shutting down")

// Run starts the informers and owns the store until ctx ends (nil) or the initial sync times
// out (*SyncTimeoutError). It never opens the barrier after ctx ended. When ctx ends with the
// cause store.ErrEpochEnded, every subscription ends with that error, else with ErrShutdown;
// a Subscribe still waiting when Run returns, or made after, gets the same error at once.
// Run is called once.
func (c *Controller) Run(ctx context.Context) error {
	// Registered first, so it runs last: after the store ended every subscription.
	defer close(c.stopped)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()

	pending := make([]int, len(c.cfg.Kinds)) // informers per kind not yet synced
	for i, wk := range c.cfg.Kinds {
		pending[i] = len(wk.Informers)
		name := wk.Kind.Spec.String()
		for _, inf := range wk.Informers {
			if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
				cause := Classify(err)
				c.causes.Set(name, fmt.Errorf("%s: %w", cause, err))
				c.cfg.Metrics.SyncFailure(name, cause)
				c.log.Warn("list or watch failed", "kind", name, "cause", cause, "error", err)
			}); err != nil {
				return fmt.Errorf("set watch error handler for %s: %w", name, err)
			}
			reg, err := inf.AddEventHandler(c.handler(i))
			if err != nil {
				return fmt.Errorf("add event handler for %s: %w", name, err)
			}
			wg.Add(2)
			go func() { defer wg.Done(); inf.RunWithContext(ctx) }()
			go func() {
				defer wg.Done()
				select {
				case <-reg.HasSyncedChecker().Done():
					// Every item of the initial list was handed to the handler, so it is in the
					// queue ahead of this token.
					c.q.Push(item{kind: i, synced: true})
				case <-ctx.Done():
				}
			}()
		}
	}

	remaining := len(c.cfg.Kinds)
	timeout := c.cfg.After(c.cfg.SyncTimeout - c.cfg.Now().Sub(c.cfg.Started))
	apply := c.applier(pending, &remaining, &timeout)
	defer func() {
		// A context ended with store.ErrEpochEnded retires this epoch: its subscribers are
		// told so (and reconnect to the next one), not that the watcher is stopping.
		why := ErrShutdown
		if cause := context.Cause(ctx); errors.Is(cause, store.ErrEpochEnded) {
			why = cause
		}
		c.stopErr = why // read only after stopped is closed
		c.store.Close(why)
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timeout:
			return c.timeoutError(pending)
		case <-c.q.Notify():
		}
		for _, it := range c.q.PopAll() {
			if ctx.Err() != nil {
				return nil
			}
			switch {
			case it.sub != nil:
				sub, err := c.store.Subscribe(it.sub.req)
				it.sub.reply <- subscribeReply{sub, err}
				continue
			case it.unsub != nil:
				c.store.Unsubscribe(it.unsub)
				continue
			}
			for _, x := range c.stages.take(it) {
				apply(x)
			}
		}
		c.cfg.Metrics.SetRevision(c.store.Revision())
		for _, wk := range c.cfg.Kinds {
			kk := watchstream.KindKey(wk.Kind.Wire())
			c.cfg.Metrics.SetObjects(kk, c.store.Count(kk))
		}
	}
}

// applier returns Run's handling of one change, or of a kind's sync token, once stages let
// it pass.
func (c *Controller) applier(pending []int, remaining *int, timeout *<-chan time.Time) func(item) {
	return func(it item) {
		switch {
		case it.synced:
			pending[it.kind]--
			if pending[it.kind] == 0 {
				*remaining--
				name := c.cfg.Kinds[it.kind].Kind.Spec.String()
				c.causes.Set(name, nil)
				kv := []any{"kind", name, "objects", c.store.Count(watchstream.KindKey(c.cfg.Kinds[it.kind].Kind.Wire()))}
				if it.kind == c.secretKind {
					// The store holds only the referenced Secrets; say how many were read.
					kv = append(kv, "read", len(c.held))
				}
				c.log.Info("kind synced", kv...)
			}
			if *remaining == 0 && !c.store.Synced() {
				c.openBarrier()
				*timeout = nil
			}
		case it.kind == c.secretKind:
			c.secret(it.obj.Wire, it.deleted)
		case it.obj.Withheld:
			// Not streamed (a ConfigMap without ca.crt); one that lost what made it streamed
			// leaves the store.
			c.store.Delete(it.obj.Wire)
		default:
			c.object(it)
		}
	}
}

// secret records a TLS Secret the informers delivered; the store (and so the stream) gets it
// only while a route object references it.
func (c *Controller) secret(o *watchv1.Object, deleted bool) {
	k := refs.SecretKey{Namespace: o.GetNamespace(), Name: o.GetName()}
	if deleted {
		delete(c.held, k)
		c.store.Delete(o)
		return
	}
	c.held[k] = o
	if c.refs.Served(k) {
		c.upsert(o)
	}
}

// object applies a change of any other object. A change of what a route object references
// brings the Secrets it now references onto the stream before the change itself, and takes
// the ones nothing references any more off it after: a receiver never holds a reference
// whose Secret it was not told about while the Secret exists.
func (c *Controller) object(it item) {
	var ch refs.Change
	if c.tracked[it.kind] {
		w := it.obj.Wire
		owner := refs.Owner{Kind: w.GetKind().GetKind(), Namespace: w.GetNamespace(), Name: w.GetName()}
		if it.deleted {
			ch = c.refs.Delete(owner)
		} else {
			if it.obj.RefsErr != nil {
				c.log.Warn("references not read; the secrets this object names are not served", "object", owner.String(), "error", it.obj.RefsErr)
			}
			ch = c.refs.Set(owner, it.obj.Refs)
		}
	}
	for _, k := range ch.Added {
		if s, ok := c.held[k]; ok {
			c.upsert(s)
		}
	}
	if it.deleted {
		c.store.Delete(it.obj.Wire)
	} else {
		c.upsert(it.obj.Wire)
	}
	for _, k := range ch.Removed {
		if s, ok := c.held[k]; ok {
			c.store.Delete(s)
		}
	}
}

func (c *Controller) upsert(o *watchv1.Object) {
	if _, err := c.store.Upsert(o); err != nil {
		c.log.Error("object not stored", "error", err)
	}
}

func (c *Controller) openBarrier() {
	c.store.MarkSynced()
	took := c.cfg.Now().Sub(c.cfg.Started)
	c.cfg.Metrics.SetSyncSeconds(took.Seconds())
	c.log.Info("initial sync complete; barrier open", "revision", c.store.Revision(), "objects", c.store.Len(), "took", took.Round(time.Millisecond))
	close(c.synced)
}

func (c *Controller) timeoutError(pending []int) error {
	var ks []string
	for i, n := range pending {
		if n == 0 || c.stages.listed(i, len(c.cfg.Kinds[i].Informers)) {
			continue // synced, or listed and held behind a kind that did not sync
		}
		name := c.cfg.Kinds[i].Kind.Spec.String()
		cause := c.causes.Get(name)
		if cause == nil {
			cause = errors.New("initial list not complete (no error reported)")
		}
		ks = append(ks, name+": "+cause.Error())
	}
	sort.Strings(ks)
	return &SyncTimeoutError{Timeout: c.cfg.SyncTimeout, Kinds: ks}
}

// handler enqueues every change of kind i; it never blocks the informer.
func (c *Controller) handler(i int) cache.ResourceEventHandler {
	enqueue := func(obj any, deleted bool) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		s, ok := obj.(*kinds.Stored)
		if !ok {
			c.log.Error("informer delivered an untransformed object", "type", fmt.Sprintf("%T", obj))
			return
		}
		c.q.Push(item{kind: i, obj: s, deleted: deleted})
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { enqueue(obj, false) },
		UpdateFunc: func(_, obj any) { enqueue(obj, false) },
		DeleteFunc: func(obj any) { enqueue(obj, true) },
	}
}

// Subscribe asks the owner for a subscription at the current revision. Once Run returned
// (the epoch retired or the watcher is stopping), nobody will answer the request: Subscribe
// then returns the error that ended the store's subscriptions (store.ErrEpochEnded or
// ErrShutdown) at once, whether the request was made before Run returned or after.
func (c *Controller) Subscribe(ctx context.Context, req store.Request) (*store.Subscription, error) {
	select {
	case <-c.stopped:
		return nil, c.stopErr
	default:
	}
	r := &subscribeReq{req: req, reply: make(chan subscribeReply, 1)}
	c.q.Push(item{sub: r})
	select {
	case rep := <-r.reply:
		return rep.sub, rep.err
	case <-c.stopped:
		// Run answers before it returns or never: an answer not here now will not come.
		select {
		case rep := <-r.reply:
			return rep.sub, rep.err
		default:
			return nil, c.stopErr
		}
	case <-ctx.Done():
		// The owner may still answer; release the subscription if it does.
		go func() {
			select {
			case rep := <-r.reply:
				if rep.sub != nil {
					c.Unsubscribe(rep.sub)
				}
			case <-c.stopped:
			}
		}()
		return nil, ctx.Err()
	}
}

// Unsubscribe releases a subscription. Once Run returned there is nothing to release: the
// store ended every subscription.
func (c *Controller) Unsubscribe(sub *store.Subscription) {
	select {
	case <-c.stopped:
	default:
		c.q.Push(item{unsub: sub})
	}
}

type nopMetrics struct{}

func (nopMetrics) SetObjects(string, int)     {}
func (nopMetrics) SetRevision(uint64)         {}
func (nopMetrics) SetSyncSeconds(float64)     {}
func (nopMetrics) SyncFailure(string, string) {}
