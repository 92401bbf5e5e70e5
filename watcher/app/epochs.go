package app

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/sluice-io/sluice/watcher/controller"
	"github.com/sluice-io/sluice/watcher/kinds"
	"github.com/sluice-io/sluice/watcher/refs"
	"github.com/sluice-io/sluice/watcher/server"
	"github.com/sluice-io/sluice/watcher/status"
	"github.com/sluice-io/sluice/watcher/store"
)

// source is what the actors that follow an epoch need of its controller.
type source interface {
	status.Source
	// Synced is closed when the epoch's barrier opened.
	Synced() <-chan struct{}
	Epoch() string
}

// epoch is one controller with its own store, watching exactly the kinds of one discovery
// decision. Everything done for it runs under ctx, which ends when the epoch is retired.
type epoch struct {
	src      source
	decision kinds.Decision
	ctx      context.Context

	holders sync.WaitGroup // actors holding the epoch (epochs.next until release)
}

// release says the caller is done with the epoch: it holds nothing of it any more.
func (e *epoch) release() { e.holders.Done() }

// epochs hands the current epoch to the actors that follow it (the discovery poller and the
// status writer). The loop retires an epoch only once every actor holding it released it, so
// nothing of an old epoch outlives it.
type epochs struct {
	mu      sync.Mutex
	cur     *epoch
	changed chan struct{} // closed (and replaced) when cur changes
}

func newEpochs() *epochs { return &epochs{changed: make(chan struct{})} }

// next waits for a current epoch other than prev (nil: any) and holds it for the caller, who
// must release it; it fails only when ctx ends.
func (h *epochs) next(ctx context.Context, prev *epoch) (*epoch, error) {
	for {
		h.mu.Lock()
		cur, changed := h.cur, h.changed
		if cur != nil && cur != prev {
			// Under mu, and only while cur is current: end (which Waits) comes after.
			cur.holders.Add(1)
			h.mu.Unlock()
			return cur, nil
		}
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		}
	}
}

// begin makes e the current epoch.
func (h *epochs) begin(e *epoch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.setLocked(e)
}

// end makes e no longer current: nobody holds it from now on but those who already do.
func (h *epochs) end(e *epoch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cur == e {
		h.setLocked(nil)
	}
}

func (h *epochs) setLocked(e *epoch) {
	h.cur = e
	close(h.changed)
	h.changed = make(chan struct{})
}

// readiness is the part of the ops server that says whether this watcher is ready.
type readiness interface {
	SetReady()
	SetNotReady(reason string)
}

// streams is the Watch service as the epoch loop switches it from one epoch to the next.
type streams interface {
	SetSource(src server.Source)
	Pause(reason string) <-chan struct{}
}

// informerClients are the clients an epoch reads the cluster with: the typed informers' API
// groups and discovery.
type informerClients interface {
	kinds.Clients
	Discovery() discovery.DiscoveryInterface
}

// epochLoop is the actor that runs one epoch after another: it resolves the kinds, then runs
// each epoch's controller until ctx ends, an epoch's initial sync times out, or the discovery
// poller hands it another decision of the served kinds (Changes).
type epochLoop struct {
	Logger    hclog.Logger
	Settings  *Settings
	Plan      kindPlan
	Clients   informerClients
	Dynamic   dynamic.Interface
	Metrics   *metrics
	Streams   streams
	Readiness readiness
	Epochs    *epochs
	Changes   <-chan kinds.Decision
	// Started is when the process started: discovery and the first epoch's initial sync must
	// fit in SyncTimeout from it; each later epoch's sync is counted from its own start.
	Started time.Time
}

// Run resolves the kinds and runs the epochs.
func (l *epochLoop) Run(ctx context.Context) error {
	log, started := l.Logger, l.Started
	causes := &kinds.Causes{}
	dctx, cancel := context.WithTimeout(ctx, l.Settings.SyncTimeout)
	decision, err := kinds.Resolve(dctx, log.Named("discovery"), l.Clients.Discovery(), l.Plan.mode, l.Plan.specs, causes)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			log.Info("stopped before kinds were resolved; nothing was sent")
			return nil
		}
		return l.discoveryTimeout(causes)
	}
	for {
		next, err := l.epoch(ctx, started, decision, causes)
		if err != nil || next == nil {
			return err
		}
		decision, started = *next, time.Now()
		causes = &kinds.Causes{}
	}
}

// epoch runs one epoch: it returns the next epoch's decision when the served kinds changed,
// nil when ctx ended, or the error that ends the watcher. Nothing of this epoch is sent once
// it returns a decision: its streams have all ended (UNAVAILABLE, naming the epoch), and the
// actors that followed it have let go of it.
func (l *epochLoop) epoch(ctx context.Context, started time.Time, decision kinds.Decision, causes *kinds.Causes) (*kinds.Decision, error) {
	log, s := l.Logger, l.Settings
	resolved := decision.Watch
	var watched []controller.WatchedKind
	for _, k := range resolved {
		infs, err := k.Informers(l.Clients, l.Dynamic, s.Namespaces)
		if err != nil {
			return nil, fmt.Errorf("informers for %s: %w", k.Spec.String(), err)
		}
		wk := controller.WatchedKind{Kind: k}
		for _, inf := range infs {
			wk.Informers = append(wk.Informers, inf)
		}
		watched = append(watched, wk)
		log.Info("watching kind", "kind", k.Spec.String(), "gvk", k.GVK.String(), "required", k.Required, "namespaces", s.Namespaces)
	}
	ctrl, err := controller.New(controller.Config{
		Logger: log.Named("controller"), Kinds: watched, SyncTimeout: s.SyncTimeout,
		Store:  store.Config{HistorySize: s.HistorySize, SubscriberBuffer: s.ClientBuffer},
		Causes: causes, Metrics: l.Metrics, Started: started, ServedSecrets: servedSecrets(s.DefaultCertificates),
	})
	if err != nil {
		return nil, err
	}
	log.Info("store ready", "epoch", ctrl.Epoch(), "kinds", len(resolved))
	l.Streams.SetSource(ctrl)

	// Everything of this epoch runs under ectx; ending it with store.ErrEpochEnded retires
	// the epoch's store and so ends its streams.
	ectx, retire := context.WithCancelCause(ctx)
	e := &epoch{src: ctrl, decision: decision, ctx: ectx}
	l.Epochs.begin(e)
	// retired ends the epoch for good: once it returns, no actor holds anything of it.
	retired := func(cause error) {
		l.Epochs.end(e)
		retire(cause)
		e.holders.Wait()
	}
	runDone := make(chan error, 1)
	go func() { runDone <- ctrl.Run(ectx) }()

	synced := ctrl.Synced()
	var next kinds.Decision
	for waiting := true; waiting; {
		select {
		case <-synced:
			l.Readiness.SetReady()
			synced = nil
		case err := <-runDone:
			if err == nil && ctx.Err() != nil {
				select {
				case <-ctrl.Synced():
				default:
					log.Info("stopped during the initial sync; no marker was sent", "epoch", ctrl.Epoch())
				}
			}
			retired(nil)
			return nil, err
		case next = <-l.Changes:
			waiting = false
		}
	}
	// The served kinds changed: no new stream joins this epoch, its store ends every stream,
	// and only once they all ended does the next epoch serve anyone.
	drained := l.Streams.Pause("watcher is starting a new epoch: the set of served kinds changed")
	l.Epochs.end(e)
	retire(store.ErrEpochEnded)
	if err := <-runDone; err != nil {
		e.holders.Wait()
		return nil, err
	}
	e.holders.Wait() // the status writer and the discovery poller let go of this epoch
	l.Readiness.SetNotReady("new epoch: initial sync of the kinds now served not complete")
	select {
	case <-drained:
	case <-ctx.Done():
		return nil, nil
	}
	added, removed := kindsDiff(resolved, next.Watch)
	log.Info("served kinds changed; starting a new epoch", "old_epoch", ctrl.Epoch(), "added", added, "removed", removed)
	return &next, nil
}

func (l *epochLoop) discoveryTimeout(causes *kinds.Causes) error {
	var ks []string
	for _, sp := range kinds.WithGateway(l.Plan.mode, l.Plan.specs) {
		if c := causes.Get(sp.String()); c != nil {
			ks = append(ks, sp.String()+": "+c.Error())
		}
	}
	sort.Strings(ks)
	if len(ks) == 0 {
		return errors.New("discovery did not complete within the sync timeout")
	}
	return &controller.SyncTimeoutError{Timeout: l.Settings.SyncTimeout, Kinds: ks}
}

// discoveryPoller is the actor that asks discovery, every Interval, which kinds the current
// epoch should watch, and hands the epoch loop (Changes) the first decision that differs from
// the epoch's and was the same on two answers in a row: a set of CRDs being installed (or
// deleted) one by one then starts one new epoch, not one per CRD. A discovery that fails
// decides nothing: the epoch goes on with the kinds it has.
type discoveryPoller struct {
	Logger    hclog.Logger
	Discovery discovery.DiscoveryInterface
	Plan      kindPlan
	Interval  time.Duration
	Epochs    *epochs
	Changes   chan<- kinds.Decision
}

// Run follows each epoch until ctx ends.
func (p *discoveryPoller) Run(ctx context.Context) error {
	var prev *epoch
	for {
		e, err := p.Epochs.next(ctx, prev)
		if err != nil {
			return nil // ctx ended
		}
		p.poll(e)
		e.release()
		prev = e
	}
}

// poll asks discovery until the epoch ends or a change was handed over.
func (p *discoveryPoller) poll(e *epoch) {
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	gvs := kinds.GroupVersions(kinds.WithGateway(p.Plan.mode, p.Plan.specs))
	current := e.decision.Key()
	seen := current // the last answer's key
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
		}
		d := kinds.Decide(p.Plan.mode, p.Plan.specs, kinds.Probe(p.Discovery, gvs))
		if !d.Decided() {
			for k, err := range d.Pending {
				p.Logger.Debug("discovery undecided; keeping the kinds watched", "kind", k, "cause", err)
			}
			continue
		}
		key := d.Key()
		if key != current && key == seen {
			select {
			case p.Changes <- d:
			case <-e.ctx.Done():
			}
			return
		}
		if key != seen {
			p.Logger.Debug("served kinds changed; waiting one interval for them to settle", "kinds", len(d.Watch), "interval", p.Interval)
		}
		seen = key
	}
}

// kindsDiff names the kinds of next not in prev, and those of prev not in next.
func kindsDiff(prev, next []*kinds.Kind) (added, removed []string) {
	names := func(ks []*kinds.Kind) map[string]bool {
		m := map[string]bool{}
		for _, k := range ks {
			m[k.Spec.String()] = true
		}
		return m
	}
	p, n := names(prev), names(next)
	for k := range n {
		if !p[k] {
			added = append(added, k)
		}
	}
	for k := range p {
		if !n[k] {
			removed = append(removed, k)
		}
	}
	sort.Strings(added)
	sort.Strings(removed)
	return added, removed
}

// servedSecrets are the --default-certificate Secrets, checked by Validate.
func servedSecrets(names []string) []refs.SecretKey {
	var out []refs.SecretKey
	for _, n := range names {
		ns, name, _ := strings.Cut(n, "/")
		out = append(out, refs.SecretKey{Namespace: ns, Name: name})
	}
	return out
}
