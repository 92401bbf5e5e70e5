package status

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Leader is who writes statuses.
type Leader struct {
	// Identity is the Lease holder: "id@address".
	Identity string
	// Address is where the leader serves gRPC; empty when no leader is known.
	Address string
	// Self is true on the leader itself.
	Self bool
}

// Identity is a replica's Lease holder identity: its id and the address its peers relay
// status streams to.
func Identity(id, address string) string { return id + "@" + address }

func addressOf(identity string) string {
	if i := strings.LastIndexByte(identity, '@'); i >= 0 {
		return identity[i+1:]
	}
	return ""
}

// leadership holds the current leader and wakes those who wait for a change.
type leadership struct {
	mu      sync.Mutex
	cur     Leader
	changed chan struct{}
}

func newLeadership() *leadership { return &leadership{changed: make(chan struct{})} }

// Leader returns the current leader and a channel that is closed when it changes.
func (l *leadership) Leader() (Leader, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur, l.changed
}

func (l *leadership) set(next Leader) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if next == l.cur {
		return
	}
	l.cur = next
	close(l.changed)
	l.changed = make(chan struct{})
}

// Terms is what leads: it begins a term with a context that ends when the lease is lost,
// and is told when the term ended. Writer is one.
type Terms interface {
	BeginTerm(ctx context.Context)
	EndTerm()
}

// ElectionMetrics receives the elector's measurements.
type ElectionMetrics interface {
	SetLeader(bool)
	LeaderTransition()
}

// LeaseClient is what the Elector asks of the typed API: the Lease. client-go's clientset
// has it.
type LeaseClient interface {
	CoordinationV1() coordinationv1client.CoordinationV1Interface
}

// ElectorConfig configures an Elector.
type ElectorConfig struct {
	Logger hclog.Logger
	// Client reads and renews the Lease; give it its own rate limit, so that nothing else
	// can delay a renewal.
	Client                                    LeaseClient
	Namespace, Name                           string
	ID, Address                               string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	Writer                                    Terms
	Metrics                                   ElectionMetrics
}

// Elector runs the Lease election among watcher replicas. The leader's term begins the
// Writer's; losing the lease ends it at once (the term's context is cancelled before the
// renewal loop returns).
type Elector struct {
	cfg ElectorConfig
	log hclog.Logger
	*leadership
}

// NewElector returns an Elector; Run campaigns.
func NewElector(cfg ElectorConfig) (*Elector, error) {
	if cfg.Logger == nil || cfg.Client == nil || cfg.Writer == nil || cfg.Namespace == "" || cfg.Name == "" || cfg.ID == "" || cfg.Address == "" {
		return nil, errors.New("status: elector needs Logger, Client, Writer, Namespace, Name, ID and Address")
	}
	if cfg.Metrics == nil {
		cfg.Metrics = nopElectionMetrics{}
	}
	return &Elector{cfg: cfg, log: cfg.Logger, leadership: newLeadership()}, nil
}

// Run campaigns until ctx ends; the caller starts it only once its own barrier opened, so a
// replica without a complete view never leads.
func (e *Elector) Run(ctx context.Context) error {
	self := Identity(e.cfg.ID, e.cfg.Address)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.cfg.Namespace, Name: e.cfg.Name},
		Client:     e.cfg.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: self},
	}
	for ctx.Err() == nil {
		var mu sync.Mutex
		leading := false
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, Name: e.cfg.Name, ReleaseOnCancel: true,
			LeaseDuration: e.cfg.LeaseDuration, RenewDeadline: e.cfg.RenewDeadline, RetryPeriod: e.cfg.RetryPeriod,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(tctx context.Context) {
					mu.Lock()
					defer mu.Unlock()
					// client-go calls this on its own goroutine: if the term already ended
					// (renewal failed first), OnStoppedLeading has run and must not be undone.
					if tctx.Err() != nil {
						return
					}
					leading = true
					// The term reaches the Writer before any stream can see this replica as
					// the leader, so that no report lands before the term's fresh start.
					e.cfg.Writer.BeginTerm(tctx)
					e.set(Leader{Identity: self, Address: e.cfg.Address, Self: true})
					e.cfg.Metrics.SetLeader(true)
					e.cfg.Metrics.LeaderTransition()
					e.log.Info("acquired the lease; writing statuses", "lease", e.cfg.Namespace+"/"+e.cfg.Name, "identity", self)
				},
				OnStoppedLeading: func() {
					mu.Lock()
					was := leading
					leading = false
					mu.Unlock()
					if !was {
						return
					}
					e.set(Leader{})
					e.cfg.Writer.EndTerm()
					e.cfg.Metrics.SetLeader(false)
					e.log.Warn("lost the lease; status writing stopped", "lease", e.cfg.Namespace+"/"+e.cfg.Name)
				},
				OnNewLeader: func(id string) {
					if id == self {
						return
					}
					mu.Lock()
					defer mu.Unlock()
					if leading {
						return // only OnStoppedLeading ends our own term
					}
					e.set(Leader{Identity: id, Address: addressOf(id)})
					e.log.Info("following", "leader", id)
				},
			},
		})
		if err != nil {
			return err
		}
		le.Run(ctx)
	}
	return nil
}

// Static is the leadership of a single replica that does not elect: it leads from Begin on.
type Static struct {
	*leadership
	writer   Terms
	identity string
	address  string
}

// NewStatic returns the leadership of a replica that always writes.
func NewStatic(w Terms, id, address string) *Static {
	return &Static{leadership: newLeadership(), writer: w, identity: Identity(id, address), address: address}
}

// Begin starts the one term, which lasts until ctx ends.
func (s *Static) Begin(ctx context.Context) {
	s.writer.BeginTerm(ctx)
	s.set(Leader{Identity: s.identity, Address: s.address, Self: true})
	// When the term ends (the watcher's epoch ended, and with it this Writer), the streams
	// reporting here end too ("leadership changed"), so that translators report again, in
	// full, to the next epoch's Writer instead of to one nobody runs.
	context.AfterFunc(ctx, func() { s.set(Leader{}) })
}

type nopElectionMetrics struct{}

func (nopElectionMetrics) SetLeader(bool)    {}
func (nopElectionMetrics) LeaderTransition() {}
