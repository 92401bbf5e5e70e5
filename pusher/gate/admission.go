package gate

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// action is what the gate's loop is to do about one event.
type action int

const (
	// actNone: nothing now (a config taken onto the chain waits to be handled).
	actNone action = iota
	// actDrop: config is dropped for reason (counted and logged).
	actDrop
	// actResync: the chain broke at config (cause); config is dropped as "broken-chain" and
	// the complete state is asked for, naming have.
	actResync
	// actPush: apply config to the data plane, in full, or as delta onto what it runs.
	actPush
	// actAck: the data plane runs config.
	actAck
	// actNack: config is not applied (reason); rejected says the data plane refused it.
	actNack
	// actHold: the deletion guard holds config back (reason) until until at the earliest.
	actHold
	// actRetry: pushing config failed (cause), for a reason a later push can cure.
	actRetry
	// actRepush: the data plane lost the applied config: apply config (complete) again.
	actRepush
	// actRequeue: the data plane lost the applied config and the chain moved on: config, the
	// newest, is handled next, in full.
	actRequeue
)

var actionNames = [...]string{"none", "drop", "resync", "push", "ack", "nack", "hold", "retry", "repush", "requeue"}

func (a action) String() string { return actionNames[a] }

// decision is the admission core's answer to one event.
type decision struct {
	act    action
	config *configv1.Config // the version concerned
	reason string           // drop reason, NACK error, hold message
	cause  error            // why the chain broke (resync) or the push failed (retry)
	// delta is a push's delta onto the version the data plane runs; nil pushes config, complete.
	delta *configv1.ConfigDelta
	// have is the version a Resync names as held.
	have     *configv1.ConfigRef
	until    time.Time // hold: the earliest time the held config is applied
	rejected bool      // nack: the data plane refused the config (counted as rejected)
	// objects are a NACK's objects at fault: the sources of what the data plane refused.
	objects []*configv1.ObjectRef
	// released is set on a push of a config the deletion guard held for its hold period.
	released *deletion
}

// deletion is how many of the served routes a config removes.
type deletion struct{ removed, served int }

// admissionConfig configures the admission core.
type admissionConfig struct {
	// Deltas says the data plane takes deltas (a DeltaPlane): a config it follows needs no
	// complete state.
	Deltas bool
	// GuardMaxDeleteRatio turns the deletion guard on when > 0; GuardHold is how long the
	// removals of a held config must stand before it is applied.
	GuardMaxDeleteRatio float64
	GuardHold           time.Duration
	// Now is the clock of the deletion guard.
	Now func() time.Time
}

// admission is the gate's pure core: every rule of what reaches the data plane, and nothing
// else. It does no I/O and keeps no time of its own, so that each rule is tested by feeding
// it events; the loop in gate.go carries out its decisions. It is not safe for concurrent
// use: the loop owns it.
type admission struct {
	cfg admissionConfig

	applied   *configv1.Config // last config the data plane accepted, across streams
	appliedFP string           // its fingerprint
	// appliedResources is applied's complete state, serialised, when a DeltaPlane took it
	// complete (applied is then kept without its resources): what it gets again if it loses
	// it, at a fraction of the decoded state's memory (docs/design.md, "Cold start").
	appliedResources []byte
	st               streamState
	judgedFP         string // fingerprint of st.pending as judged for the push under way
	// served are the routes the data plane serves, for the deletion guard (guard.go).
	served served
	// work counts the route keys the deletion guard examined: its cost, for the tests.
	work int
}

// streamState is the gate of one stream.
type streamState struct {
	epoch         string
	markerVersion uint64
	open          bool
	// chain is the translator's state as received in this epoch (its State nil before the
	// complete state), at chain.Version (without resources); broken means it failed and a Resync is outstanding. For a
	// DeltaPlane it is an encoded state: the gate reads a resource of it only for the
	// deletion guard, a refusal, or a complete push (docs/design.md, "Cold start").
	chain  contract.Chain
	broken bool
	// since are the deltas the chain took after the version last handed to the data plane:
	// merged, they bring a DeltaPlane from what it runs to the newest.
	since      []contract.Applied
	pending    *configv1.Config // newest admissible config not yet handled (resources filled when handled)
	rejectedFP string           // refused by the data plane; not retried for the same fingerprint
	held       *configv1.Config // held back by the deletion guard
	// removed are the served routes the chain's newest version removes (guard.go).
	removed removals
	// rejectedWhy and rejectedObjs are the refusal of rejectedFP: its error and objects at
	// fault, named again when the same config comes back.
	rejectedWhy  string
	rejectedObjs []*configv1.ObjectRef
}

func newAdmission(cfg admissionConfig) *admission {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &admission{cfg: cfg}
}

// newStream closes the gate: a new stream, or a broken one, admits nothing until its marker.
// What the data plane runs (applied) is kept.
func (a *admission) newStream() { a.st = streamState{} }

// marker opens the gate for the marker's epoch, from the version it names. An error means
// the stream lied in a way that no Resync repairs (a second marker of one epoch): the loop
// drops the stream.
func (a *admission) marker(mk *configv1.InitialSyncComplete) error {
	if a.st.open && mk.GetEpoch() == a.st.epoch {
		// The translator sends one marker per epoch on a stream: it does not know what it
		// sent, so nothing more of this stream is trusted.
		return fmt.Errorf("protocol violation: a second InitialSyncComplete for epoch %s on one stream (version %d, the first named %d)",
			mk.GetEpoch(), mk.GetVersion(), a.st.markerVersion)
	}
	a.st = streamState{epoch: mk.GetEpoch(), markerVersion: mk.GetVersion(), open: true}
	return nil
}

// config takes a complete state: a new chain (also the answer to a Resync).
func (a *admission) config(c *configv1.Config) decision {
	if reason := a.admit(c); reason != "" {
		return decision{act: actDrop, config: c, reason: reason}
	}
	if a.st.chain.Version != nil && c.GetVersion() < a.st.chain.Version.GetVersion() {
		return decision{act: actDrop, config: c, reason: "out-of-order"}
	}
	var chain contract.Chain
	if err := chain.Complete(c, a.cfg.Deltas); err != nil {
		return a.breakChain(c, err)
	}
	a.st.chain, a.st.broken, a.st.since = chain, false, nil
	a.st.pending = c
	a.trackAll()
	return decision{act: actNone, config: c}
}

// delta takes a delta onto the chain's version, checked against its resulting hash.
func (a *admission) delta(d *configv1.ConfigDelta) decision {
	c := contract.VersionOf(d)
	if reason := a.admit(c); reason != "" {
		return decision{act: actDrop, config: c, reason: reason}
	}
	if a.st.broken {
		return decision{act: actDrop, config: c, reason: "broken-chain"} // the complete state is on its way
	}
	applied, err := a.st.chain.Delta(d) // contract.Onto: onto the chain's version, rising
	if err != nil {
		return a.breakChain(c, err)
	}
	a.st.since = append(a.st.since, applied)
	a.trackDelta(d)
	a.st.pending = c // its resources are materialised from the chain when it is handled
	return decision{act: actNone, config: c}
}

// DropReasons are every reason the gate drops a config for (Metrics.Dropped), so that the
// metric can show each at zero before the first drop.
var DropReasons = []string{"before-marker", "other-epoch", "older-than-marker", "older-than-applied", "out-of-order", "broken-chain"}

// admit returns why the gate drops c, or "" when c is of the open epoch, at or after the
// marker's version and not older than what the data plane runs.
func (a *admission) admit(c *configv1.Config) string {
	switch {
	case !a.st.open:
		return "before-marker"
	case c.GetEpoch() != a.st.epoch:
		return "other-epoch"
	case c.GetVersion() < a.st.markerVersion:
		return "older-than-marker"
	case a.applied != nil && a.applied.GetEpoch() == c.GetEpoch() && c.GetVersion() < a.applied.GetVersion():
		return "older-than-applied"
	}
	return ""
}

// breakChain drops c and everything after it until the complete state comes again.
func (a *admission) breakChain(c *configv1.Config, err error) decision {
	a.st.broken, a.st.pending, a.st.since = true, nil, nil
	return decision{act: actResync, config: c, cause: err, have: ref(a.st.chain.Version)}
}

// tick re-evaluates a config the deletion guard holds: it is handled again when nothing
// newer waits.
func (a *admission) tick() {
	if a.st.held != nil && a.st.pending == nil {
		a.st.pending = a.st.held
	}
}

// next returns the config to handle now, nil when none: complete when the data plane renders
// complete states (the deletion guard counts from the deltas and needs none). The loop
// fingerprints it and passes the fingerprint to judge.
func (a *admission) next() *configv1.Config {
	c := a.st.pending
	if c == nil {
		return nil
	}
	if !a.cfg.Deltas {
		a.complete(c) // a rendering data plane's fingerprint looks at every route
	}
	return c
}

// complete fills c's resources from the chain when it has none: a DeltaPlane that follows
// the deltas never needs them.
func (a *admission) complete(c *configv1.Config) *configv1.Config {
	if c.GetResources() == nil && a.st.chain.State != nil {
		c.Resources = a.st.chain.State.Resources()
	}
	return c
}

// full returns the config being pushed, complete: for a DeltaPlane that does not run the
// delta's base.
func (a *admission) full() *configv1.Config { return a.complete(a.st.pending) }

// judge decides about next's config given its fingerprint, or the error computing it (the
// data plane cannot render it).
func (a *admission) judge(fp string, fpErr error) decision {
	c := a.st.pending
	if fpErr != nil {
		a.st.pending = nil
		return decision{act: actNack, config: c, reason: fpErr.Error(), rejected: true, objects: objectsAtFault(fpErr, a.st.chain.State)}
	}
	if a.applied != nil && a.appliedFP == fp {
		// Nothing the data plane runs changed (a not-ready endpoint, a finding): no push.
		a.setApplied(c)
		a.settle()
		a.st.pending, a.st.held, a.st.since = nil, nil, nil
		return decision{act: actAck, config: c}
	}
	if fp == a.st.rejectedFP {
		a.st.pending = nil
		if len(a.st.rejectedObjs) > 0 {
			return decision{act: actNack, config: c, reason: "identical to a config the data plane already rejected: " + a.st.rejectedWhy, objects: a.st.rejectedObjs}
		}
		return decision{act: actNack, config: c, reason: "identical to a config the data plane already rejected"}
	}
	g := a.guard()
	if g.why != "" {
		a.st.pending, a.st.held = nil, c
		return decision{act: actHold, config: c, reason: g.why, until: g.until}
	}
	a.st.held = nil
	a.judgedFP = fp
	push := decision{act: actPush, config: c, released: g.released}
	if a.cfg.Deltas && a.applied != nil && a.applied.GetEpoch() == c.GetEpoch() && len(a.st.since) > 0 && a.st.since[0].Delta.GetBaseVersion() == a.applied.GetVersion() {
		push.delta = a.st.since[0].Delta
		if len(a.st.since) > 1 {
			push.delta = contract.Merge(a.st.since)
		}
		return push
	}
	push.config = a.complete(c)
	return push
}

// pushed takes the outcome of the push judge decided on: nil (applied), an error that is a
// Rejection (refused: not retried for the same fingerprint), or another error (retried).
func (a *admission) pushed(err error) decision {
	c := a.st.pending
	var rej Rejection
	switch {
	case err == nil:
		a.setApplied(c)
		a.appliedFP = a.judgedFP
		a.settle()
		a.st.pending, a.st.held, a.st.since = nil, nil, nil
		return decision{act: actAck, config: c}
	case errors.As(err, &rej) && rej.Rejected():
		objs := objectsAtFault(err, a.st.chain.State)
		a.st.pending, a.st.rejectedFP, a.st.rejectedWhy, a.st.rejectedObjs = nil, a.judgedFP, err.Error(), objs
		return decision{act: actNack, config: c, reason: err.Error(), rejected: true, objects: objs}
	default:
		return decision{act: actRetry, config: c, cause: err}
	}
}

// setApplied records c as what the data plane runs. A DeltaPlane's complete config is kept
// serialised (appliedResources), so that the pusher does not hold the decoded state beside
// its chain; a rendering data plane's shares its messages with the decoded chain.
func (a *admission) setApplied(c *configv1.Config) {
	a.applied, a.appliedResources = c, nil
	if !a.cfg.Deltas || c.GetResources() == nil {
		return
	}
	if b, err := proto.Marshal(c.GetResources()); err == nil { // it was just applied: it serialises
		a.applied, a.appliedResources = contract.RefOf(c), b
	}
}

// guardVerdict is the deletion guard's answer: why c is held (until when), or, when it is
// applied after its hold, what it deletes.
type guardVerdict struct {
	why      string
	until    time.Time
	released *deletion
}

// guard holds back the chain's newest version when it removes more than the allowed share
// of the served routes, until the newest of those removals has stood for the hold period: a
// translator that lost its view of the cluster should not empty the proxy at once. The hold
// belongs to the deletion, not to a version: versions that leave it as it is (endpoint
// churn) wait with it, no longer than it waits, and do not restart it.
func (a *admission) guard() guardVerdict {
	if !a.guarded() || a.applied == nil || a.served.n == 0 {
		return guardVerdict{}
	}
	removed, total := a.st.removed.count(), a.served.n
	ratio := float64(removed) / float64(total)
	if ratio <= a.cfg.GuardMaxDeleteRatio {
		return guardVerdict{}
	}
	until := a.st.removed.newest().Add(a.cfg.GuardHold)
	if !a.cfg.Now().Before(until) {
		return guardVerdict{released: &deletion{removed: removed, served: total}}
	}
	return guardVerdict{
		why: fmt.Sprintf("deletion guard: the config removes %d of %d served routes (%.0f%%, limit %.0f%%); held until these removals have stood for %s",
			removed, total, ratio*100, a.cfg.GuardMaxDeleteRatio*100, a.cfg.GuardHold),
		until: until,
	}
}

// running returns the fingerprint of the config the data plane should run; false before
// anything was applied.
func (a *admission) running() (string, bool) {
	if a.applied == nil {
		return "", false
	}
	return a.appliedFP, true
}

// lost is told that the data plane does not run the applied config (restarted or
// replaced): it gets it again, complete, or the newest of the chain when the applied one was
// a delta the chain has moved past.
func (a *admission) lost() decision {
	c := a.applied
	if c == nil {
		return decision{act: actNone}
	}
	if a.appliedResources != nil {
		r := &configv1.Resources{}
		if err := proto.Unmarshal(a.appliedResources, r); err == nil { // serialised by setApplied
			full := contract.RefOf(c)
			full.Resources = r
			return decision{act: actRepush, config: full}
		}
	}
	if c.GetResources() == nil {
		// Applied as a delta: its complete state is the chain's, if the chain is still there.
		st := &a.st
		switch {
		case st.chain.State != nil && !st.broken && st.chain.Version.GetEpoch() == c.GetEpoch() && st.chain.Version.GetVersion() == c.GetVersion():
			c = contract.RefOf(c) // applied stays without resources
			c.Resources = st.chain.State.Resources()
		case st.chain.State != nil && !st.broken && st.pending == nil:
			// The chain moved on: its newest version goes in full, as the next to apply.
			st.pending, st.since = contract.RefOf(st.chain.Version), nil
			return decision{act: actRequeue, config: st.pending}
		default:
			return decision{act: actNone} // the next complete state of this stream is pushed in full anyway
		}
	}
	return decision{act: actRepush, config: c}
}

func ref(c *configv1.Config) *configv1.ConfigRef {
	if c == nil {
		return nil
	}
	return &configv1.ConfigRef{Epoch: c.GetEpoch(), Version: c.GetVersion(), Hash: c.GetHash()}
}
