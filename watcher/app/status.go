package app

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/sluice-io/sluice/internal/cli"
	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/identity"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/kinds"
	"github.com/sluice-io/sluice/watcher/status"
)

// statusActor is the status write-back actor. For each epoch it waits for the epoch's
// barrier (its store's initial sync complete), and only then writes statuses from that store,
// until the epoch ends: a replica without a complete view neither writes nor campaigns for the
// lease, so it can never write from a partial view.
type statusActor struct {
	Logger hclog.Logger
	Epochs *epochs
	Writer epochWriter
}

// epochWriter writes statuses from one epoch whose barrier opened, until ctx (the epoch's)
// ends.
type epochWriter interface {
	writeEpoch(ctx context.Context, e *epoch) error
}

// Run follows each epoch until ctx ends.
func (a *statusActor) Run(ctx context.Context) error {
	var prev *epoch
	for {
		e, err := a.Epochs.next(ctx, prev)
		if err != nil {
			return nil // ctx ended
		}
		a.follow(e)
		e.release()
		prev = e
	}
}

func (a *statusActor) follow(e *epoch) {
	select {
	case <-e.ctx.Done():
		return
	case <-e.src.Synced():
	}
	// A failure here is logged, never fatal: the watch path does not depend on it.
	if err := a.Writer.writeEpoch(e.ctx, e); err != nil {
		a.Logger.Error("status writing stopped", "error", err)
	}
}

// statusWriter runs, for one epoch, a Writer on the epoch's store and the leadership that
// begins its terms: alone (--leader-elect=false) or through the Lease.
type statusWriter struct {
	Logger   hclog.Logger
	Settings *Settings
	// Rest is the base of the status writes' and the election's own clients.
	Rest    *rest.Config
	Metrics *metrics
	// Service hands translators' reports to the epoch's Writer while this replica leads.
	Service *status.Service
}

func (sw *statusWriter) writeEpoch(ctx context.Context, e *epoch) error {
	log, s, m := sw.Logger, sw.Settings, sw.Metrics
	var ingress, class *kinds.Kind
	for _, k := range e.decision.Watch {
		if k.GVK.Group == "networking.k8s.io" && k.GVK.Kind == "Ingress" && k.Served {
			ingress = k
		}
		if k.GVK.Group == "networking.k8s.io" && k.GVK.Kind == "IngressClass" && k.Served {
			class = k
		}
	}
	if ingress == nil {
		log.Warn("ingresses are not watched; no status is written")
		return nil
	}
	// Own clients, own rate limits: status writes and Events never take the informers' share,
	// and nothing delays a Lease renewal.
	statusCS, statusDyn, err := statusClients(sw.Rest, s.StatusQPS, s.StatusBurst)
	if err != nil {
		return err
	}
	var classKind *watchv1.GroupVersionKind
	if class != nil {
		classKind = class.Wire()
	}
	w, err := status.New(status.Config{Logger: log, Source: e.src, Client: statusCS, Ingress: ingress.Wire(), IngressClass: classKind, ControllerName: s.ControllerName,
		Dynamic: statusDyn, GatewayControllerName: s.GatewayControllerName, GatewayTranslatorClass: s.GatewayTranslatorClass,
		Workers: s.StatusWorkers, Component: "sluice-watcher", Metrics: m})
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := w.Run(wctx); err != nil {
			log.Error("status writer stopped", "error", err)
		}
	}()
	advertise := s.advertiseAddr()
	if !s.LeaderElect {
		lead := status.NewStatic(w, s.ID, advertise)
		lead.Begin(wctx)
		m.SetLeader(true)
		m.LeaderTransition()
		sw.Service.SetLeadership(lead, w)
		log.Info("writing statuses without leader election (--leader-elect=false)")
		<-ctx.Done()
		return nil
	}
	leCS, err := clientFor(sw.Rest, "leader-election", 5, 10)
	if err != nil {
		return err
	}
	el, err := status.NewElector(status.ElectorConfig{Logger: log.Named("election"), Client: leCS, Namespace: s.LeaseNamespace, Name: s.LeaseName,
		ID: s.ID, Address: advertise, LeaseDuration: s.LeaseDuration, RenewDeadline: s.LeaseRenewDeadline, RetryPeriod: s.LeaseRetryPeriod,
		Writer: w, Metrics: m})
	if err != nil {
		return err
	}
	sw.Service.SetLeadership(el, w)
	log.Info("campaigning for the lease", "lease", s.LeaseNamespace+"/"+s.LeaseName, "identity", status.Identity(s.ID, advertise))
	return el.Run(wctx)
}

func clientFor(base *rest.Config, purpose string, qps float32, burst int) (*kubeClients, error) {
	cfg := rest.CopyConfig(base)
	cfg.QPS, cfg.Burst = qps, burst
	cfg.UserAgent = "sluice-watcher/" + purpose
	return newKubeClients(cfg, purpose)
}

// statusClients are the clients of status writes: typed (Ingresses, Events) and dynamic
// (Gateway API statuses), sharing one rate limiter, so --status-qps bounds them together.
func statusClients(base *rest.Config, qps float32, burst int) (*kubeClients, dynamic.Interface, error) {
	cfg := rest.CopyConfig(base)
	cfg.QPS, cfg.Burst = qps, burst
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	cfg.UserAgent = "sluice-watcher/status"
	cs, err := newKubeClients(cfg, "status")
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes dynamic client for status: %w", err)
	}
	return cs, dyn, nil
}

// peers holds the connections to other replicas, for relaying status streams to the leader.
type peers struct {
	log   hclog.Logger
	cfg   grpcx.ClientConfig
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

func newPeers(log hclog.Logger, tls cli.TLSSettings, serverName string) *peers {
	tls.ServerName = serverName
	// The leader must be another watcher replica: a relayed stream carries translators' reports.
	return &peers{log: log, cfg: tls.Client(log, identity.Watcher), conns: map[string]*grpc.ClientConn{}}
}

func (p *peers) dial(addr string) (grpc.ClientConnInterface, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.conns[addr]; ok {
		return c, nil
	}
	if p.conns == nil {
		return nil, errors.New("shutting down")
	}
	c, err := grpcx.Dial(addr, p.cfg)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = c
	return c, nil
}

func (p *peers) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}
