// Package app wires the watcher process: its settings, the Kubernetes client, the informers,
// the store, the barrier and the Watch service, and the endpoints that expose them.
package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sluice-io/sluice/internal/cli"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/identity"
	"github.com/sluice-io/sluice/internal/run"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/controller"
	"github.com/sluice-io/sluice/watcher/kinds"
	"github.com/sluice-io/sluice/watcher/server"
	"github.com/sluice-io/sluice/watcher/status"
	"github.com/sluice-io/sluice/watcher/store"
)

// Settings are the watcher's settings.
type Settings struct {
	Kubeconfig    string
	Listen        string
	HTTPListen    string
	Namespaces    []string
	SyncTimeout   time.Duration
	Kinds         []string
	OptionalKinds []string
	// GatewayAPI is --gateway-api (auto, on, off); DiscoveryInterval how often optional kinds
	// are looked up again.
	GatewayAPI        string
	DiscoveryInterval time.Duration
	HistorySize       int
	ClientBuffer      int
	Heartbeat         time.Duration
	KubeQPS           float32
	KubeBurst         int
	TLS               cli.TLSSettings
	MaxStreams        int
	Pprof             string
	SendTimeout       time.Duration
	MaxMessageSize    int

	StatusWrites       bool
	StatusQPS          float32
	StatusBurst        int
	StatusWorkers      int
	ID                 string
	AdvertiseAddr      string
	PeerTLSServerName  string
	LeaderElect        bool
	LeaseNamespace     string
	LeaseName          string
	LeaseDuration      time.Duration
	LeaseRenewDeadline time.Duration
	LeaseRetryPeriod   time.Duration

	// GatewayControllerName is the Gateway controller whose Gateway API statuses are written.
	GatewayControllerName string

	specs       []kinds.Spec
	gatewayMode kinds.GatewayAPIMode
}

// Register adds the settings to fs.
func (s *Settings) Register(fs *pflag.FlagSet) {
	fs.StringVar(&s.Kubeconfig, "kubeconfig", "", "kubeconfig file (empty: in-cluster configuration)")
	fs.StringVar(&s.Listen, "listen", "127.0.0.1:18000", "gRPC address of the Watch service")
	fs.StringVar(&s.HTTPListen, "http-listen", "127.0.0.1:18001", "address of /healthz, /readyz and /metrics")
	fs.StringSliceVar(&s.Namespaces, "namespaces", nil, "namespaces to watch, comma-separated (empty: all)")
	fs.DurationVar(&s.SyncTimeout, "sync-timeout", 2*time.Minute, "how long the initial sync may take before the watcher gives up and exits non-zero")
	fs.StringSliceVar(&s.Kinds, "kinds", kinds.DefaultRequired, "required kinds, as group/version/resource[?fieldSelector] (v1/resource for the core group)")
	fs.StringSliceVar(&s.OptionalKinds, "optional-kinds", nil, "optional kinds: watched while discovery serves them, skipped (and logged) otherwise; a change starts a new epoch")
	fs.StringVar(&s.GatewayAPI, "gateway-api", string(kinds.GatewayAPIAuto), "Gateway API kinds (GatewayClass, Gateway, HTTPRoute, ReferenceGrant): auto (watched while their CRDs are served), on (required: no marker without them), off (never watched)")
	fs.DurationVar(&s.DiscoveryInterval, "discovery-interval", 15*time.Second, "how often discovery is asked again whether optional kinds (and --gateway-api=auto's) appeared or disappeared; a change starts a new epoch")
	fs.IntVar(&s.HistorySize, "history-size", 16384, "changes kept so that a reconnecting client can resume without a snapshot")
	fs.IntVar(&s.ClientBuffer, "client-buffer", 16384, "changes a client may lag behind before it is dropped with RESOURCE_EXHAUSTED")
	fs.DurationVar(&s.Heartbeat, "heartbeat", 10*time.Second, "heartbeat interval on idle streams")
	fs.Float32Var(&s.KubeQPS, "kube-qps", 50, "client-side queries per second to the apiserver")
	fs.IntVar(&s.KubeBurst, "kube-burst", 100, "client-side burst to the apiserver")
	s.TLS.Register(fs, false)
	fs.IntVar(&s.MaxStreams, "max-streams", 64, "concurrent Watch streams, and concurrent status streams, this watcher serves; more get RESOURCE_EXHAUSTED")
	cli.RegisterPprof(fs, &s.Pprof)
	cli.RegisterMaxMessageSize(fs, &s.MaxMessageSize)
	fs.DurationVar(&s.SendTimeout, "send-timeout", 30*time.Second, "longest one send on a Watch stream may take; a client that stopped reading for longer is dropped (RESOURCE_EXHAUSTED) and must reconnect")
	host, _ := os.Hostname()
	fs.BoolVar(&s.StatusWrites, "status-writes", true, "write the statuses and Events that translators report (only the leader writes when --leader-elect is on)")
	fs.Float32Var(&s.StatusQPS, "status-qps", 10, "client-side queries per second for status writes and Events, apart from --kube-qps")
	fs.IntVar(&s.StatusBurst, "status-burst", 20, "client-side burst for status writes and Events")
	fs.IntVar(&s.StatusWorkers, "status-workers", 2, "concurrent status writes")
	fs.StringVar(&s.GatewayControllerName, "gateway-controller-name", "sluice.io/gateway-controller", "Gateway controller name (as the translator's): only GatewayClasses with it, their Gateways and our HTTPRoute parents entries get the Gateway API statuses translators report, and only reports naming it are taken (empty: none)")
	fs.StringVar(&s.ID, "id", host, "this replica's name in the Lease")
	fs.StringVar(&s.AdvertiseAddr, "advertise-addr", "", "address where the other replicas reach this one's gRPC to relay status streams (default: --listen, or $POD_IP with --listen's port when --listen is 0.0.0.0)")
	fs.StringVar(&s.PeerTLSServerName, "peer-tls-server-name", "", "name to verify in the leader's certificate when relaying to it (default: the dialled host)")
	fs.BoolVar(&s.LeaderElect, "leader-elect", false, "elect one replica with a Lease to write statuses; every replica serves Watch streams")
	fs.StringVar(&s.LeaseNamespace, "leader-elect-namespace", envOr("POD_NAMESPACE", "sluice-system"), "namespace of the Lease")
	fs.StringVar(&s.LeaseName, "leader-elect-lease-name", "sluice-watcher", "name of the Lease")
	fs.DurationVar(&s.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long followers wait before taking a lease that is not renewed")
	fs.DurationVar(&s.LeaseRenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader tries to renew before it stops writing")
	fs.DurationVar(&s.LeaseRetryPeriod, "leader-elect-retry-period", 2*time.Second, "interval between attempts to acquire or renew the lease")
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Validate checks the settings.
func (s *Settings) Validate() error {
	if err := config.CheckHostPort("listen", s.Listen, false); err != nil {
		return err
	}
	if err := config.CheckHostPort("http-listen", s.HTTPListen, false); err != nil {
		return err
	}
	if err := config.CheckReadable("kubeconfig", s.Kubeconfig); err != nil {
		return err
	}
	if s.SyncTimeout <= 0 {
		return config.Errorf("sync-timeout", s.SyncTimeout.String(), "must be positive")
	}
	specs, err := kinds.ParseSpecs(s.Kinds, s.OptionalKinds)
	if err != nil {
		return &config.Error{Setting: "kinds", Cause: err}
	}
	if len(specs) == 0 {
		return config.Errorf("kinds", "", "no kind to watch")
	}
	for _, l := range []struct {
		setting string
		names   []string
	}{{"kinds", s.Kinds}, {"optional-kinds", s.OptionalKinds}} {
		listed, _ := kinds.ParseSpecs(l.names, nil) // parsed above
		if err := kinds.CheckNoGatewayKinds(listed); err != nil {
			return &config.Error{Setting: l.setting, Cause: err}
		}
	}
	mode, err := kinds.ParseGatewayAPIMode(s.GatewayAPI)
	if err != nil {
		return config.Errorf("gateway-api", s.GatewayAPI, "%v", err)
	}
	if s.DiscoveryInterval <= 0 {
		return config.Errorf("discovery-interval", s.DiscoveryInterval.String(), "must be positive")
	}
	s.specs, s.gatewayMode = specs, mode
	for _, n := range []struct {
		name string
		v    int
	}{{"history-size", s.HistorySize}, {"client-buffer", s.ClientBuffer}, {"kube-burst", s.KubeBurst}, {"max-streams", s.MaxStreams}} {
		if n.v <= 0 {
			return config.Errorf(n.name, fmt.Sprint(n.v), "must be positive")
		}
	}
	if s.Heartbeat <= 0 {
		return config.Errorf("heartbeat", s.Heartbeat.String(), "must be positive")
	}
	if s.KubeQPS <= 0 {
		return config.Errorf("kube-qps", fmt.Sprint(s.KubeQPS), "must be positive")
	}
	if s.StatusQPS <= 0 {
		return config.Errorf("status-qps", fmt.Sprint(s.StatusQPS), "must be positive")
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"status-burst", s.StatusBurst}, {"status-workers", s.StatusWorkers}} {
		if n.v <= 0 {
			return config.Errorf(n.name, fmt.Sprint(n.v), "must be positive")
		}
	}
	if s.AdvertiseAddr == "" {
		host, port, _ := net.SplitHostPort(s.Listen)
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			if pod := os.Getenv("POD_IP"); pod != "" {
				host = pod
			}
		}
		s.AdvertiseAddr = net.JoinHostPort(host, port)
	}
	if err := config.CheckHostPort("advertise-addr", s.AdvertiseAddr, false); err != nil {
		return err
	}
	if s.LeaderElect {
		if s.ID == "" || strings.Contains(s.ID, "@") {
			return config.Errorf("id", s.ID, "must be set and must not contain @")
		}
		if ip := net.ParseIP(hostOf(s.AdvertiseAddr)); ip != nil && ip.IsUnspecified() {
			return config.Errorf("advertise-addr", s.AdvertiseAddr, "must be an address the other replicas can reach (set it, or $POD_IP)")
		}
		if s.LeaseNamespace == "" || s.LeaseName == "" {
			return config.Errorf("leader-elect-lease-name", s.LeaseNamespace+"/"+s.LeaseName, "namespace and name must be set")
		}
		// client-go's own rule: renewals must fail before followers may take over.
		if s.LeaseDuration <= s.LeaseRenewDeadline {
			return config.Errorf("leader-elect-lease-duration", s.LeaseDuration.String(), "must be longer than --leader-elect-renew-deadline (%s)", s.LeaseRenewDeadline)
		}
		if s.LeaseRetryPeriod <= 0 || float64(s.LeaseRenewDeadline) <= 1.2*float64(s.LeaseRetryPeriod) {
			return config.Errorf("leader-elect-renew-deadline", s.LeaseRenewDeadline.String(), "must be longer than 1.2 x --leader-elect-retry-period (%s)", s.LeaseRetryPeriod)
		}
	}
	if err := cli.CheckPprof(s.Pprof); err != nil {
		return err
	}
	if err := cli.CheckMaxMessageSize(s.MaxMessageSize); err != nil {
		return err
	}
	if err := s.TLS.CheckServing("listen", s.Listen); err != nil {
		return err
	}
	if s.SendTimeout <= 0 {
		return config.Errorf("send-timeout", s.SendTimeout.String(), "must be positive")
	}
	return s.TLS.Validate()
}

// Run runs the watcher until ctx is done or it fails.
func (s *Settings) Run(ctx context.Context, log hclog.Logger) error {
	started := time.Now()
	restCfg, err := s.restConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("kubernetes dynamic client: %w", err)
	}
	var m *metrics // set below, before anything is served
	if err := s.TLS.CheckIdentity(identity.Identity{Role: identity.Watcher}); err != nil {
		return err
	}
	srv, err := cli.NewServing(cli.ServingConfig{Logger: log, Listen: s.Listen, HTTPListen: s.HTTPListen, TLS: s.TLS.Files(),
		Insecure: s.TLS.Insecure, Pprof: s.Pprof, MaxMessageSize: s.MaxMessageSize,
		StreamLimits: map[string]int{watchv1.WatchService_Watch_FullMethodName: s.MaxStreams, watchv1.StatusService_ReportStatus_FullMethodName: s.MaxStreams},
		CountSent: func(method string, n int) {
			if method == watchv1.WatchService_Watch_FullMethodName {
				m.sentBytes.Add(float64(n))
			}
		}})
	if err != nil {
		return err
	}
	srv.Ops.SetNotReady("initial sync not complete")
	m = newMetrics(srv.Registry)
	watchSrv, err := server.New(server.Config{Logger: log.Named("watch"), Heartbeat: s.Heartbeat, Stopping: ctx.Done(), Metrics: m, SendTimeout: s.SendTimeout})
	if err != nil {
		return err
	}
	watchv1.RegisterWatchServiceServer(srv.GRPC.Server, watchSrv)
	peers := newPeers(log, s.TLS, s.PeerTLSServerName)
	defer peers.close()
	statusSrv, err := status.NewService(status.ServiceConfig{Logger: log.Named("status"), Dial: peers.dial, Stopping: ctx.Done()})
	if err != nil {
		return err
	}
	watchv1.RegisterStatusServiceServer(srv.GRPC.Server, statusSrv)

	var g run.Group
	srv.Add(&g)
	g.Add("sync", func(ctx context.Context) error {
		return s.watch(ctx, log, started, cs, dyn, m, watchSrv, srv.Ops, func(ctx context.Context, ctrl *controller.Controller, resolved []*kinds.Kind) {
			if !s.StatusWrites {
				log.Info("status writing is off (--status-writes=false)")
				return
			}
			// A failure here is logged, never fatal: the watch path does not depend on it.
			if err := s.writeStatus(ctx, log.Named("status"), restCfg, ctrl, resolved, m, statusSrv); err != nil {
				log.Error("status writing stopped", "error", err)
			}
		})
	})
	return g.Run(ctx)
}

// readiness is the part of the ops server that says whether this watcher is ready.
type readiness interface {
	SetReady()
	SetNotReady(reason string)
}

// watch resolves the kinds and runs one epoch after another until ctx ends or an epoch's
// initial sync times out. Each epoch is a controller with its own store (a new epoch name),
// watching exactly the kinds discovery served when it began; the whole of discovery and the
// first epoch's initial sync must fit in SyncTimeout, and so must each later epoch's sync,
// counted from its start.
func (s *Settings) watch(ctx context.Context, log hclog.Logger, started time.Time, cs kubernetes.Interface, dyn dynamic.Interface,
	m *metrics, watchSrv *server.Server, ready readiness, writeStatus func(context.Context, *controller.Controller, []*kinds.Kind)) error {
	causes := &kinds.Causes{}
	dctx, cancel := context.WithTimeout(ctx, s.SyncTimeout)
	decision, err := kinds.Resolve(dctx, log.Named("discovery"), cs.Discovery(), s.gatewayMode, s.specs, causes)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			log.Info("stopped before kinds were resolved; nothing was sent")
			return nil
		}
		return s.discoveryTimeout(causes)
	}
	for {
		next, err := s.epoch(ctx, log, started, cs, dyn, m, watchSrv, ready, writeStatus, decision, causes)
		if err != nil || next == nil {
			return err
		}
		decision, started = *next, time.Now()
		causes = &kinds.Causes{}
	}
}

// epoch runs one epoch: it returns the next epoch's decision when the served kinds changed,
// nil when ctx ended, or the error that ends the watcher. Nothing of this epoch is sent once
// it returns a decision: its streams have all ended (UNAVAILABLE, naming the epoch).
func (s *Settings) epoch(ctx context.Context, log hclog.Logger, started time.Time, cs kubernetes.Interface, dyn dynamic.Interface,
	m *metrics, watchSrv *server.Server, ready readiness, writeStatus func(context.Context, *controller.Controller, []*kinds.Kind),
	decision kinds.Decision, causes *kinds.Causes) (*kinds.Decision, error) {
	resolved := decision.Watch
	var watched []controller.WatchedKind
	for _, k := range resolved {
		infs, err := k.Informers(cs, dyn, s.Namespaces)
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
		Causes: causes, Metrics: m, Started: started,
	})
	if err != nil {
		return nil, err
	}
	log.Info("store ready", "epoch", ctrl.Epoch(), "kinds", len(resolved))
	watchSrv.SetSource(ctrl)

	// Everything of this epoch runs under ectx; ending it with store.ErrEpochEnded retires
	// the epoch's store and so ends its streams.
	ectx, retire := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	defer func() { retire(nil); wg.Wait() }()
	wg.Add(2)
	go func() {
		defer wg.Done()
		writeStatus(ectx, ctrl, resolved)
	}()
	go func() {
		defer wg.Done()
		select {
		case <-ctrl.Synced():
			ready.SetReady()
		case <-ectx.Done():
		}
	}()
	changed := make(chan kinds.Decision, 1)
	if s.gatewayMode == kinds.GatewayAPIAuto || len(s.OptionalKinds) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.watchDiscovery(ectx, log.Named("discovery"), cs, decision, changed)
		}()
	}
	runDone := make(chan error, 1)
	go func() { runDone <- ctrl.Run(ectx) }()

	var next kinds.Decision
	select {
	case err := <-runDone:
		if err == nil && ctx.Err() != nil {
			select {
			case <-ctrl.Synced():
			default:
				log.Info("stopped during the initial sync; no marker was sent", "epoch", ctrl.Epoch())
			}
		}
		return nil, err
	case next = <-changed:
	}
	// The served kinds changed: no new stream joins this epoch, its store ends every stream,
	// and only once they all ended does the next epoch serve anyone.
	drained := watchSrv.Pause("watcher is starting a new epoch: the set of served kinds changed")
	retire(store.ErrEpochEnded)
	if err := <-runDone; err != nil {
		return nil, err
	}
	wg.Wait() // the status writer and the readiness goroutine of this epoch are done
	ready.SetNotReady("new epoch: initial sync of the kinds now served not complete")
	select {
	case <-drained:
	case <-ctx.Done():
		return nil, nil
	}
	added, removed := kindsDiff(resolved, next.Watch)
	log.Info("served kinds changed; starting a new epoch", "old_epoch", ctrl.Epoch(), "added", added, "removed", removed)
	return &next, nil
}

// watchDiscovery asks discovery every DiscoveryInterval which kinds to watch, and hands over
// the first decision that differs from current and was the same on two answers in a row: a
// set of CRDs being installed (or deleted) one by one then starts one new epoch, not one per
// CRD. A discovery that fails decides nothing: the epoch goes on with the kinds it has.
func (s *Settings) watchDiscovery(ctx context.Context, log hclog.Logger, cs kubernetes.Interface, current kinds.Decision, changed chan<- kinds.Decision) {
	t := time.NewTicker(s.DiscoveryInterval)
	defer t.Stop()
	gvs := kinds.GroupVersions(kinds.WithGateway(s.gatewayMode, s.specs))
	seen := current.Key() // the last answer's key
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d := kinds.Decide(s.gatewayMode, s.specs, kinds.Probe(cs.Discovery(), gvs))
		if !d.Decided() {
			for k, err := range d.Pending {
				log.Debug("discovery undecided; keeping the kinds watched", "kind", k, "cause", err)
			}
			continue
		}
		key := d.Key()
		if key != current.Key() && key == seen {
			changed <- d
			return
		}
		if key != seen {
			log.Debug("served kinds changed; waiting one interval for them to settle", "kinds", len(d.Watch), "interval", s.DiscoveryInterval)
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

func hostOf(addr string) string {
	h, _, _ := net.SplitHostPort(addr)
	return h
}

func (s *Settings) discoveryTimeout(causes *kinds.Causes) error {
	var ks []string
	for _, sp := range kinds.WithGateway(s.gatewayMode, s.specs) {
		if c := causes.Get(sp.String()); c != nil {
			ks = append(ks, sp.String()+": "+c.Error())
		}
	}
	sort.Strings(ks)
	if len(ks) == 0 {
		return errors.New("discovery did not complete within the sync timeout")
	}
	return &controller.SyncTimeoutError{Timeout: s.SyncTimeout, Kinds: ks}
}

func (s *Settings) restConfig() (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if s.Kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, &config.Error{Setting: "kubeconfig", Cause: fmt.Errorf("empty, and not running in a cluster: %w", err)}
		}
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
		if err != nil {
			return nil, &config.Error{Setting: "kubeconfig", Value: s.Kubeconfig, Cause: err}
		}
	}
	cfg.QPS, cfg.Burst = s.KubeQPS, s.KubeBurst
	cfg.UserAgent = "sluice-watcher"
	// Protobuf to the apiserver for built-in kinds: smaller and faster to decode than JSON.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return cfg, nil
}
