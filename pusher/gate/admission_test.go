package gate

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// rig drives the admission core as the loop would, on a clock the test sets.
type rig struct {
	t       *testing.T
	a       *admission
	t0, now time.Time
}

// event is one input to the core; it returns what the core decided, described.
type event func(r *rig) string

// step is one event and what the core must decide about it. A want with ": " matches a
// description whose part before ": " is the same and whose part after it starts with want's.
type step struct {
	ev   event
	want string
}

// row is one rule: a data plane, a sequence of events and the decisions they must get.
type row struct {
	name   string
	plane  admissionConfig // Deltas and the guard; the rig sets Now
	steps  []step
	starts []step // prepended to steps: how the row gets to the state it is about
}

func runRows(t *testing.T, rows []row) {
	t.Helper()
	for _, rw := range rows {
		t.Run(rw.name, func(t *testing.T) {
			t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
			r := &rig{t: t, t0: t0, now: t0}
			cfg := rw.plane
			cfg.Now = func() time.Time { return r.now }
			r.a = newAdmission(cfg)
			for i, s := range append(append([]step(nil), rw.starts...), rw.steps...) {
				if got := s.ev(r); !matches(got, s.want) {
					t.Fatalf("step %d (the start has %d): the core decided %q, want %q", i+1, len(rw.starts), got, s.want)
				}
			}
		})
	}
}

func matches(got, want string) bool {
	gh, gt, _ := strings.Cut(got, ": ")
	wh, wt, _ := strings.Cut(want, ": ")
	return gh == wh && strings.HasPrefix(gt, wt)
}

// describe is a decision in a few words: its action, the version, and what else it carries.
// A complete push whose resources do not hash to its version's hash says so.
func (r *rig) describe(d decision) string {
	if d.act == actNone {
		return "none"
	}
	s := d.act.String()
	if d.config != nil {
		s += fmt.Sprintf(" %s/%d", d.config.GetEpoch(), d.config.GetVersion())
	}
	var why string
	switch d.act {
	case actDrop:
		s += " " + d.reason
	case actResync:
		s += " have " + refString(d.have)
		why = d.cause.Error()
	case actPush, actRepush:
		switch {
		case d.delta != nil:
			s += fmt.Sprintf(" delta onto %d", d.delta.GetBaseVersion())
			if d.delta.GetVersion() != d.config.GetVersion() || d.delta.GetHash() != d.config.GetHash() {
				s += fmt.Sprintf(" (the delta is version %d)", d.delta.GetVersion())
			}
		case d.config.GetResources() == nil:
			s += " (without resources)"
		case contract.Hash(d.config.GetResources()) != d.config.GetHash():
			s += " (resources of another hash)"
		}
		if d.released != nil {
			s += fmt.Sprintf(" released %d of %d", d.released.removed, d.released.served)
		}
	case actNack:
		if d.rejected {
			s += " rejected"
		}
		why = d.reason
	case actHold:
		s += " until +" + d.until.Sub(r.t0).String()
		why = d.reason
	case actRetry:
		why = d.cause.Error()
	}
	if why != "" {
		s += ": " + why
	}
	return s
}

func refString(c *configv1.ConfigRef) string {
	if c == nil {
		return "none"
	}
	return fmt.Sprintf("%s/%d", c.GetEpoch(), c.GetVersion())
}

// newStream: the loop opened a stream (the previous one broke).
func newStream() event {
	return func(r *rig) string { r.a.newStream(); return "none" }
}

func mark(epoch string, v uint64) event {
	return func(r *rig) string {
		if err := r.a.marker(&configv1.InitialSyncComplete{Epoch: epoch, Version: v}); err != nil {
			return "error: " + err.Error()
		}
		return "open"
	}
}

func conf(c *configv1.Config) event {
	return func(r *rig) string { return r.describe(r.a.config(c)) }
}

func dlt(d *configv1.ConfigDelta) event {
	return func(r *rig) string { return r.describe(r.a.delta(d)) }
}

// handle: the loop takes the next config and fingerprints it as the recording data plane
// of lying_test.go does (its state hash).
func handle() event {
	return func(r *rig) string {
		c := r.a.next()
		if c == nil {
			return "idle"
		}
		return r.describe(r.a.judge(c.GetHash(), nil))
	}
}

// unrenderable: the data plane cannot fingerprint the next config.
func unrenderable(why string) event {
	return func(r *rig) string {
		if r.a.next() == nil {
			return "idle"
		}
		return r.describe(r.a.judge("", errors.New(why)))
	}
}

// outcome: the push the core decided on ended with err.
func outcome(err error) event {
	return func(r *rig) string { return r.describe(r.a.pushed(err)) }
}

// at sets the clock to t0+d.
func at(d time.Duration) event {
	return func(r *rig) string { r.now = r.t0.Add(d); return "none" }
}

// tickAt is the loop's check at t0+d: the clock tick, then the next config handled.
func tickAt(d time.Duration) event {
	return func(r *rig) string {
		r.now = r.t0.Add(d)
		r.a.tick()
		return handle()(r)
	}
}

// kept: how the core keeps the applied config's complete state.
func kept() event {
	return func(r *rig) string {
		c := r.a.applied
		switch {
		case c == nil:
			return "nothing applied"
		case c.GetResources() != nil:
			return fmt.Sprintf("%s/%d decoded", c.GetEpoch(), c.GetVersion())
		case r.a.appliedResources != nil:
			return fmt.Sprintf("%s/%d serialised", c.GetEpoch(), c.GetVersion())
		}
		return fmt.Sprintf("%s/%d from the chain", c.GetEpoch(), c.GetVersion())
	}
}

// lost: the data plane does not run the applied config.
func lost() event {
	return func(r *rig) string {
		if _, ok := r.a.running(); !ok {
			return "nothing applied: " + r.describe(r.a.lost())
		}
		return r.describe(r.a.lost())
	}
}

// refused is a data plane's rejection.
type refused struct{}

func (refused) Error() string  { return "caddy refused the config" }
func (refused) Rejected() bool { return true }

// applied are the steps that get c applied on a fresh stream whose marker names c's version.
func applied(c *configv1.Config) []step {
	v := fmt.Sprintf("%s/%d", c.GetEpoch(), c.GetVersion())
	return []step{{mark(c.GetEpoch(), c.GetVersion()), "open"}, {conf(c), "none"}, {handle(), "push " + v}, {outcome(nil), "ack " + v}}
}

// deltaTo is the delta from the complete state from to the complete state to.
func deltaTo(t *testing.T, from, to *configv1.Config) *configv1.ConfigDelta {
	t.Helper()
	st, err := contract.FromResources(from.GetResources(), from.GetHash())
	if err != nil {
		t.Fatal(err)
	}
	keep := map[string]bool{}
	for _, vh := range to.GetResources().GetVirtualHosts() {
		keep[vh.GetHostname()] = true
		st.Put(contract.VirtualHosts, vh.GetHostname(), vh)
	}
	for _, vh := range from.GetResources().GetVirtualHosts() {
		if !keep[vh.GetHostname()] {
			st.Remove(contract.VirtualHosts, vh.GetHostname())
		}
	}
	if st.Hash() != to.GetHash() {
		t.Fatalf("the delta from %d to %d makes hash %.12s, want %.12s", from.GetVersion(), to.GetVersion(), st.Hash(), to.GetHash())
	}
	d := st.TakeDelta()
	d.Epoch, d.Version, d.BaseVersion, d.Hash = to.GetEpoch(), to.GetVersion(), from.GetVersion(), to.GetHash()
	return d
}

// withHash is c claiming another hash.
func withHash(c *configv1.Config, hash string) *configv1.Config {
	c.Hash = hash
	return c
}

func deltaWithHash(d *configv1.ConfigDelta, hash string) *configv1.ConfigDelta {
	d.Hash = hash
	return d
}

// docs/design.md, the pusher gate: "Applies nothing until the marker of the current stream epoch;
// anything before it is dropped and counted", and "on a broken stream it ... waits for the
// new epoch's marker"; reliability scenario 10 (second marker, epoch change mid-stream).
func TestAdmissionMarker(t *testing.T) {
	v1 := full("e1", 1, "a")
	v2 := full("e1", 2, "a", "b")
	runRows(t, []row{{
		name: "ConfigBeforeTheMarkerIsDroppedAndNotKept",
		steps: []step{
			{conf(v1), "drop e1/1 before-marker"},
			{handle(), "idle"},
			{mark("e1", 1), "open"},
			{handle(), "idle"},
			{conf(v1), "none"},
			{handle(), "push e1/1"},
		},
	}, {
		name: "DeltaBeforeTheMarkerIsDropped",
		steps: []step{
			{dlt(delta(t, v1, 2, "b")), "drop e1/2 before-marker"},
			{handle(), "idle"},
		},
	}, {
		name:   "ANewStreamClosesTheGateUntilItsMarker",
		starts: applied(v1),
		steps: []step{
			{newStream(), "none"},
			{conf(v2), "drop e1/2 before-marker"},
			{handle(), "idle"},
			{mark("e1", 2), "open"},
			{conf(v2), "none"},
			{handle(), "push e1/2"},
		},
	}, {
		name: "ASecondMarkerOfOneEpochIsAProtocolViolation",
		steps: []step{
			{mark("e1", 1), "open"},
			{mark("e1", 2), "error: protocol violation: a second InitialSyncComplete for epoch e1 on one stream (version 2, the first named 1)"},
		},
	}, {
		name:   "ANewEpochsMarkerClosesTheOldEpoch",
		starts: applied(v1),
		steps: []step{
			{mark("e2", 1), "open"},
			{dlt(delta(t, v1, 2, "b")), "drop e1/2 other-epoch"},
			{conf(full("e2", 1, "a", "b")), "none"},
			{handle(), "push e2/1"},
		},
	}, {
		name: "AConfigOfAnotherEpochIsDropped",
		steps: []step{
			{mark("e1", 1), "open"},
			{conf(full("e9", 5, "liar")), "drop e9/5 other-epoch"},
			{handle(), "idle"},
		},
	}})
}

// docs/design.md, the pusher gate: "It applies only versions at or after the one the marker
// names, never one older than what it applied"; reliability scenario 8 (out-of-order
// messages) and 10 (older version).
func TestAdmissionVersionFloor(t *testing.T) {
	v1 := full("e1", 1, "a")
	v2 := full("e1", 2, "a", "b")
	runRows(t, []row{{
		name: "AVersionBelowTheMarkersIsDropped",
		steps: []step{
			{mark("e1", 3), "open"},
			{conf(full("e1", 2, "a")), "drop e1/2 older-than-marker"},
			{dlt(delta(t, full("e1", 1, "a"), 2, "b")), "drop e1/2 older-than-marker"},
			{conf(full("e1", 3, "a")), "none"},
			{handle(), "push e1/3"},
		},
	}, {
		name:   "AVersionOlderThanTheAppliedIsDropped",
		starts: applied(v1),
		steps: []step{
			{dlt(delta(t, v1, 2, "b")), "none"},
			{handle(), "push e1/2"},
			{outcome(nil), "ack e1/2"},
			{conf(full("e1", 1, "liar")), "drop e1/1 older-than-applied"},
		},
	}, {
		name:   "TheAppliedFloorOutlivesTheStream",
		starts: applied(v2),
		steps: []step{
			{newStream(), "none"},
			{mark("e1", 1), "open"},
			{conf(v1), "drop e1/1 older-than-applied"},
			{handle(), "idle"},
		},
	}, {
		name:   "AnotherEpochStartsItsVersionsAgain",
		starts: applied(full("e1", 5, "a")),
		steps: []step{
			{newStream(), "none"},
			{mark("e2", 1), "open"},
			{conf(full("e2", 1, "a", "b")), "none"},
			{handle(), "push e2/1"},
		},
	}, {
		name: "ACompleteStateOlderThanTheChainIsOutOfOrder",
		steps: []step{
			{mark("e1", 1), "open"},
			{conf(full("e1", 3, "a")), "none"},
			{conf(v2), "drop e1/2 out-of-order"},
			{handle(), "push e1/3"},
		},
	}})
}

// docs/design.md, the pusher gate: "a delta only onto its base version with a matching resulting
// hash; on any mismatch it asks for the complete state"; reliability scenario 10 (corrupt
// delta). A DeltaPlane gets what changed, a rendering data plane the complete state.
func TestAdmissionChain(t *testing.T) {
	v1 := full("e1", 1, "a")
	v2 := full("e1", 2, "a", "b")
	v3 := full("e1", 3, "a", "b", "c")
	deltas := admissionConfig{Deltas: true}
	runRows(t, []row{{
		name: "ADeltaGoesToADeltaPlaneAsADelta", plane: deltas,
		starts: applied(v1),
		steps: []step{
			{dlt(deltaTo(t, v1, v2)), "none"},
			{handle(), "push e1/2 delta onto 1"},
			{outcome(nil), "ack e1/2"},
		},
	}, {
		name: "DeltasReceivedMeanwhileAreMergedIntoOne", plane: deltas,
		starts: applied(v1),
		steps: []step{
			{dlt(deltaTo(t, v1, v2)), "none"},
			{dlt(deltaTo(t, v2, v3)), "none"},
			{handle(), "push e1/3 delta onto 1"},
			{outcome(nil), "ack e1/3"},
		},
	}, {
		name:   "ARenderingDataPlaneGetsTheCompleteState",
		starts: applied(v1),
		steps: []step{
			{dlt(deltaTo(t, v1, v2)), "none"},
			{handle(), "push e1/2"},
			{outcome(nil), "ack e1/2"},
		},
	}, {
		name: "ADeltaPlaneThatDoesNotRunTheBaseGetsTheCompleteState", plane: deltas,
		starts: applied(v1),
		steps: []step{
			{newStream(), "none"},
			{mark("e1", 2), "open"},
			{conf(v2), "none"},
			{dlt(deltaTo(t, v2, v3)), "none"},
			// The chain's deltas start at 2, the data plane runs 1.
			{handle(), "push e1/3"},
		},
	}, {
		name:   "ADeltaOntoAnotherBaseBreaksTheChainUntilTheCompleteState",
		starts: applied(v1),
		steps: []step{
			{dlt(delta(t, full("e1", 2, "a", "other"), 3, "liar")), "resync e1/3 have e1/1: a delta onto version 2, but version 1 is held"},
			{dlt(delta(t, full("e1", 3, "a", "other", "liar"), 4, "d")), "drop e1/4 broken-chain"},
			{handle(), "idle"},
			{conf(full("e1", 4, "a", "d")), "none"},
			{handle(), "push e1/4"},
		},
	}, {
		name:   "ADeltaWhoseHashDoesNotMatchBreaksTheChain",
		starts: applied(v1),
		steps: []step{
			{dlt(deltaWithHash(delta(t, v1, 2, "liar"), v2.GetHash())), "resync e1/2 have e1/1: broken config chain: the state after the delta has hash"},
			{handle(), "idle"},
			{conf(v2), "none"},
			{handle(), "push e1/2"},
		},
	}, {
		name: "ADeltaBeforeTheCompleteStateBreaksTheChain",
		steps: []step{
			{mark("e1", 1), "open"},
			{dlt(deltaTo(t, v1, v2)), "resync e1/2 have none: a delta before the complete state"},
			{handle(), "idle"},
		},
	}, {
		name:   "ADeltaThatDoesNotRaiseTheVersionBreaksTheChain",
		starts: applied(v1),
		steps: []step{
			{dlt(deltaTo(t, v1, v2)), "none"},
			{handle(), "push e1/2"},
			{outcome(nil), "ack e1/2"},
			{dlt(delta(t, v2, 2, "liar")), "resync e1/2 have e1/2: a delta to version 2 onto version 2: versions only rise"},
		},
	}, {
		name: "ACompleteStateWhoseHashDoesNotMatchBreaksTheChain",
		steps: []step{
			{mark("e1", 1), "open"},
			{conf(withHash(full("e1", 1, "a", "liar"), v1.GetHash())), "resync e1/1 have none: broken config chain"},
			{handle(), "idle"},
		},
	}, {
		name: "ABreakDiscardsTheVersionWaitingToBeHandled",
		steps: []step{
			{mark("e1", 1), "open"},
			{conf(v1), "none"},
			{dlt(delta(t, v2, 3, "liar")), "resync e1/3 have e1/1: a delta onto version 2, but version 1 is held"},
			{handle(), "idle"},
			{conf(v3), "none"},
			{handle(), "push e1/3"},
		},
	}})
}

// docs/design.md, the pusher gate: "A rejected config leaves the last good one in place, is
// NACKed, and is retried with backoff only when something changed"; a failed push (network)
// is retried, and a version the data plane would run unchanged is ACKed without a push.
func TestAdmissionRejection(t *testing.T) {
	v1 := full("e1", 1, "a")
	v2 := full("e1", 2, "a", "b")
	runRows(t, []row{{
		name: "AConfigTheDataPlaneCannotRenderIsNacked",
		steps: []step{
			{mark("e1", 1), "open"},
			{conf(v1), "none"},
			{unrenderable("route a: bad regexp"), "nack e1/1 rejected: route a: bad regexp"},
			{handle(), "idle"},
		},
	}, {
		name: "ARefusedConfigIsNotRetriedUntilSomethingChanged",
		steps: []step{
			{mark("e1", 1), "open"},
			{conf(v1), "none"},
			{handle(), "push e1/1"},
			{outcome(refused{}), "nack e1/1 rejected: caddy refused the config"},
			{handle(), "idle"},
			{conf(full("e1", 2, "a")), "none"}, // a newer version, the same routes
			{handle(), "nack e1/2: identical to a config the data plane already rejected"},
			{conf(full("e1", 3, "a", "b")), "none"},
			{handle(), "push e1/3"},
			{outcome(nil), "ack e1/3"},
		},
	}, {
		name:   "ARefusedConfigLeavesTheAppliedOneInPlace",
		starts: applied(v1),
		steps: []step{
			{conf(v2), "none"},
			{handle(), "push e1/2"},
			{outcome(refused{}), "nack e1/2 rejected: caddy refused the config"},
			{conf(full("e1", 3, "a")), "none"}, // what the data plane still runs
			{handle(), "ack e1/3"},
			{lost(), "repush e1/3"},
		},
	}, {
		name: "AFailedPushIsRetriedWithTheNewestVersion",
		steps: []step{
			{mark("e1", 1), "open"},
			{conf(v1), "none"},
			{handle(), "push e1/1"},
			{outcome(errors.New("dial tcp: connection refused")), "retry e1/1: dial tcp: connection refused"},
			{handle(), "push e1/1"},
			{outcome(errors.New("dial tcp: connection refused")), "retry e1/1: dial tcp: connection refused"},
			{dlt(deltaTo(t, v1, v2)), "none"},
			{handle(), "push e1/2"},
			{outcome(nil), "ack e1/2"},
		},
	}, {
		name:   "AVersionTheDataPlaneWouldRunUnchangedIsAckedWithoutAPush",
		starts: applied(v1),
		steps: []step{
			{conf(full("e1", 2, "a")), "none"},
			{handle(), "ack e1/2"},
			{handle(), "idle"},
		},
	}})
}

// docs/design.md, the pusher gate: "A data-plane restart (config lost) is detected and the last
// applied config is pushed again"; reliability scenario 6 (proxy restarted).
func TestAdmissionLostConfig(t *testing.T) {
	v1 := full("e1", 1, "a")
	v2 := full("e1", 2, "a", "b")
	v3 := full("e1", 3, "a", "b", "c")
	deltas := admissionConfig{Deltas: true}
	runRows(t, []row{{
		name:  "NothingAppliedNothingToPushAgain",
		steps: []step{{lost(), "nothing applied: none"}},
	}, {
		name:   "TheAppliedCompleteConfigIsPushedAgain",
		starts: applied(v1),
		steps:  []step{{lost(), "repush e1/1"}},
	}, {
		// docs/design.md, "Cold start": a DeltaPlane's applied complete state is kept
		// serialised, not decoded beside the chain, and is still what it gets again, also
		// once the stream that sent it is gone.
		name: "ADeltaPlanesAppliedCompleteConfigIsKeptSerialisedAndPushedAgain", plane: deltas,
		starts: applied(v1),
		steps: []step{
			{kept(), "e1/1 serialised"},
			{newStream(), "none"},
			{lost(), "repush e1/1"},
			{lost(), "repush e1/1"},
			{kept(), "e1/1 serialised"},
		},
	}, {
		name: "AConfigAppliedAsADeltaIsPushedAgainCompleteFromTheChain", plane: deltas,
		starts: applied(v1),
		steps: []step{
			{dlt(deltaTo(t, v1, v2)), "none"},
			{handle(), "push e1/2 delta onto 1"},
			{outcome(nil), "ack e1/2"},
			{kept(), "e1/2 from the chain"},
			{lost(), "repush e1/2"},
			{kept(), "e1/2 from the chain"},
		},
	}, {
		name: "TheChainMovedOnTheNewestGoesInFull", plane: deltas,
		starts: applied(v1),
		steps: []step{
			{dlt(deltaTo(t, v1, v2)), "none"},
			{handle(), "push e1/2 delta onto 1"},
			{outcome(nil), "ack e1/2"},
			{dlt(deltaTo(t, v2, v3)), "none"},
			{unrenderable("busy"), "nack e1/3 rejected: busy"},
			{lost(), "requeue e1/3"},
			{handle(), "push e1/3"},
		},
	}, {
		name: "ABrokenChainWaitsForTheCompleteState", plane: deltas,
		starts: applied(v1),
		steps: []step{
			{dlt(deltaTo(t, v1, v2)), "none"},
			{handle(), "push e1/2 delta onto 1"},
			{outcome(nil), "ack e1/2"},
			{dlt(delta(t, v1, 3, "liar")), "resync e1/3 have e1/2: a delta onto version 1, but version 2 is held"},
			{lost(), "none"},
		},
	}})
}

// The deletion guard (docs/architecture.md, --guard-max-delete-ratio and --guard-hold): a
// config that removes more than the allowed share of the served routes is held back until
// those removals have stood for the hold period; docs/design.md reliability scenario 6 (no route
// is removed that still exists) against a translator that lost its view.
func TestAdmissionDeletionGuard(t *testing.T) {
	four := full("e1", 1, "a", "b", "c", "d")
	guard := admissionConfig{GuardMaxDeleteRatio: 0.5, GuardHold: 30 * time.Second}
	runRows(t, []row{{
		name: "ADeletionBelowTheLimitAppliesAtOnce", plane: guard,
		starts: applied(four),
		steps: []step{
			{conf(full("e1", 2, "a", "b", "c")), "none"},
			{handle(), "push e1/2"},
		},
	}, {
		name: "ADeletionAtTheLimitAppliesAtOnce", plane: guard,
		starts: applied(four),
		steps: []step{
			{conf(full("e1", 2, "a", "b")), "none"},
			{handle(), "push e1/2"},
		},
	}, {
		name: "ADeletionAboveTheLimitIsHeldUntilItStayedTheNewest", plane: guard,
		starts: applied(four),
		steps: []step{
			{conf(full("e1", 2, "a")), "none"},
			{handle(), "hold e1/2 until +30s: deletion guard: the config removes 3 of 4 served routes (75%, limit 50%); held until these removals have stood for 30s"},
			{handle(), "idle"},
			{tickAt(29 * time.Second), "hold e1/2 until +30s"},
			{tickAt(30 * time.Second), "push e1/2 released 3 of 4"},
			{outcome(nil), "ack e1/2"},
			{tickAt(90 * time.Second), "idle"},
		},
	}, {
		name: "ANewerDeletionDuringTheHoldRestartsIt", plane: guard,
		starts: applied(four),
		steps: []step{
			{conf(full("e1", 2, "a")), "none"},
			{handle(), "hold e1/2 until +30s"},
			{at(20 * time.Second), "none"},
			{conf(full("e1", 3, "e")), "none"},
			{handle(), "hold e1/3 until +50s: deletion guard: the config removes 4 of 4"},
			{tickAt(45 * time.Second), "hold e1/3 until +50s"},
			{tickAt(50 * time.Second), "push e1/3 released 4 of 4"},
		},
	}, {
		// The hold follows the deletion: a newer version that removes the same routes does
		// not restart it, and the newest version is what the tick releases.
		name: "ANewerVersionWithTheHeldRoutesKeepsTheHold", plane: guard,
		starts: applied(four),
		steps: []step{
			{conf(full("e1", 2, "a")), "none"},
			{handle(), "hold e1/2 until +30s"},
			{at(20 * time.Second), "none"},
			{conf(full("e1", 3, "a")), "none"},
			{handle(), "hold e1/3 until +30s"},
			{tickAt(30 * time.Second), "push e1/3 released 3 of 4"},
		},
	}, {
		name: "ANewerConfigWithinTheLimitEndsTheHold", plane: guard,
		starts: applied(four),
		steps: []step{
			{conf(full("e1", 2, "a")), "none"},
			{handle(), "hold e1/2 until +30s"},
			{conf(full("e1", 3, "a", "b", "c")), "none"},
			{handle(), "push e1/3"},
			{outcome(nil), "ack e1/3"},
			{tickAt(60 * time.Second), "idle"},
		},
	}, {
		name: "ANewStreamStartsTheHoldAgain", plane: guard,
		starts: applied(four),
		steps: []step{
			{conf(full("e1", 2, "a")), "none"},
			{handle(), "hold e1/2 until +30s"},
			{at(20 * time.Second), "none"},
			{newStream(), "none"},
			{mark("e1", 2), "open"},
			{conf(full("e1", 2, "a")), "none"},
			{handle(), "hold e1/2 until +50s"},
		},
	}, {
		name: "ADeltaPlanesDeltasAreGuardedToo", plane: admissionConfig{Deltas: true, GuardMaxDeleteRatio: 0.5, GuardHold: 30 * time.Second},
		starts: applied(four),
		steps: []step{
			{dlt(deltaTo(t, four, full("e1", 2, "a"))), "none"},
			{handle(), "hold e1/2 until +30s"},
			{tickAt(30 * time.Second), "push e1/2 delta onto 1 released 3 of 4"},
		},
	}, {
		name: "TheFirstConfigIsNeverHeld", plane: guard,
		steps: []step{
			{mark("e1", 1), "open"},
			{conf(full("e1", 1, "a")), "none"},
			{handle(), "push e1/1"},
		},
	}, {
		name: "AnEmptyDataPlaneIsNeverGuarded", plane: guard,
		starts: applied(full("e1", 1)),
		steps: []step{
			{conf(full("e1", 2, "a")), "none"},
			{handle(), "push e1/2"},
		},
	}, {
		name: "TheGuardIsOffAtRatioZero", plane: admissionConfig{GuardHold: 30 * time.Second},
		starts: applied(four),
		steps: []step{
			{conf(full("e1", 2, "e")), "none"},
			{handle(), "push e1/2"},
		},
	}})
}

// feed is a translator's state from which the deletion guard's tests cut versions: hosts of
// one route each and a backend whose endpoints churn.
type feed struct {
	t     *testing.T
	st    *contract.State
	epoch string
	v     uint64
	churn uint32
}

// newFeed returns a feed holding hosts, and its complete state as version 1.
func newFeed(t *testing.T, hosts ...string) (*feed, *configv1.Config) {
	t.Helper()
	f := &feed{t: t, st: contract.NewState(), epoch: "e1", v: 1}
	res := &configv1.Resources{Backends: []*configv1.Backend{f.backend()}}
	for _, h := range hosts {
		res.VirtualHosts = append(res.VirtualHosts, host(h))
	}
	st, err := contract.StateOf(res)
	if err != nil {
		t.Fatal(err)
	}
	f.st = st
	return f, &configv1.Config{Epoch: f.epoch, Version: f.v, Hash: st.Hash(), Resources: res}
}

func (f *feed) backend() *configv1.Backend {
	return &configv1.Backend{Name: "churn", Endpoints: []*configv1.Endpoint{{Address: "10.0.0.1", Port: 1000 + f.churn, Ready: true}}}
}

// cut is the delta of what changed since the last version, as the next version.
func (f *feed) cut() *configv1.ConfigDelta {
	f.t.Helper()
	d := f.st.TakeDelta()
	if d == nil {
		f.t.Fatal("the feed did not change")
	}
	d.Epoch, d.BaseVersion, d.Version, d.Hash = f.epoch, f.v, f.v+1, f.st.Hash()
	f.v++
	return d
}

// endpoints is endpoint churn: the backend's endpoints change, no route does.
func (f *feed) endpoints() *configv1.ConfigDelta {
	f.churn++
	f.st.Put(contract.Backends, "churn", f.backend())
	return f.cut()
}

func (f *feed) remove(hosts ...string) *configv1.ConfigDelta {
	for _, h := range hosts {
		f.st.Remove(contract.VirtualHosts, h)
	}
	return f.cut()
}

func (f *feed) add(hosts ...string) *configv1.ConfigDelta {
	for _, h := range hosts {
		f.st.Put(contract.VirtualHosts, h, host(h))
	}
	return f.cut()
}

// edit changes host h without changing its routes' paths (another route name).
func (f *feed) edit(h string) *configv1.ConfigDelta {
	f.churn++
	vh := host(h)
	vh.Routes[0].Name = fmt.Sprintf("%s-%d", h, f.churn)
	f.st.Put(contract.VirtualHosts, h, vh)
	return f.cut()
}

// The deletion guard judges a hold by the deletion it holds: endpoint churn after a large
// deletion neither restarts its hold nor waits longer than it; a different deletion starts
// its own hold; a deletion reverted lifts it.
func TestAdmissionDeletionGuardUnderChurn(t *testing.T) {
	guard := admissionConfig{GuardMaxDeleteRatio: 0.5, GuardHold: 30 * time.Second}
	deltas := admissionConfig{Deltas: true, GuardMaxDeleteRatio: 0.5, GuardHold: 30 * time.Second}

	// 100 changes of endpoints, 3s apart, after a deletion of 3 of 4 routes at +0: held
	// until +30s (counted from the deletion, not from the newest change), then applied with
	// the deletion, and every later one at once.
	steady := func(plane admissionConfig) row {
		f, v1 := newFeed(t, "a", "b", "c", "d")
		rw := row{name: "AHeldDeletionIsReleasedUnderSteadyChurn", plane: plane, starts: applied(v1)}
		if plane.Deltas {
			rw.name += "ToADeltaPlane"
		}
		rw.steps = []step{
			{dlt(f.remove("b", "c", "d")), "none"},
			{handle(), "hold e1/2 until +30s: deletion guard: the config removes 3 of 4 served routes"},
		}
		base := uint64(1)
		for i := 1; i <= 100; i++ {
			when := time.Duration(i) * 3 * time.Second
			d := f.endpoints()
			v := fmt.Sprintf("e1/%d", d.GetVersion())
			want := "push " + v
			if plane.Deltas {
				want += fmt.Sprintf(" delta onto %d", base)
			}
			switch {
			case when < 30*time.Second:
				want = "hold " + v + " until +30s"
			case when == 30*time.Second:
				want += " released 3 of 4"
			}
			rw.steps = append(rw.steps, step{at(when), "none"}, step{dlt(d), "none"}, step{handle(), want})
			if strings.HasPrefix(want, "push") {
				rw.steps = append(rw.steps, step{outcome(nil), "ack " + v})
				base = d.GetVersion()
			}
		}
		return rw
	}

	different := func() row {
		f, v1 := newFeed(t, "a", "b", "c", "d", "e", "f")
		return row{name: "ADifferentDeletionStartsItsOwnHold", plane: guard, starts: applied(v1), steps: []step{
			{dlt(f.remove("b", "c", "d", "e")), "none"},
			{handle(), "hold e1/2 until +30s: deletion guard: the config removes 4 of 6"},
			{at(10 * time.Second), "none"},
			{dlt(f.endpoints()), "none"},
			{handle(), "hold e1/3 until +30s"},
			// b and c come back, a and f go: d and e were removed at +0, a and f at +20s.
			{at(20 * time.Second), "none"},
			{dlt(f.add("b", "c")), "none"},
			{dlt(f.remove("a", "f")), "none"},
			{handle(), "hold e1/5 until +50s: deletion guard: the config removes 4 of 6"},
			{tickAt(30 * time.Second), "hold e1/5 until +50s"},
			{at(35 * time.Second), "none"},
			{dlt(f.endpoints()), "none"},
			{handle(), "hold e1/6 until +50s"},
			{tickAt(49 * time.Second), "hold e1/6 until +50s"},
			{tickAt(50 * time.Second), "push e1/6 released 4 of 6"},
			{outcome(nil), "ack e1/6"},
		}}
	}

	reverted := func() row {
		f, v1 := newFeed(t, "a", "b", "c", "d")
		return row{name: "ARevertedDeletionLiftsTheHold", plane: deltas, starts: applied(v1), steps: []step{
			{dlt(f.remove("b", "c", "d")), "none"},
			{handle(), "hold e1/2 until +30s"},
			{at(5 * time.Second), "none"},
			{dlt(f.endpoints()), "none"},
			{handle(), "hold e1/3 until +30s"},
			// The routes come back: the churn goes out at once, without the deletion.
			{at(10 * time.Second), "none"},
			{dlt(f.add("b", "c", "d")), "none"},
			{handle(), "push e1/4 delta onto 1"},
			{outcome(nil), "ack e1/4"},
			{tickAt(30 * time.Second), "idle"},
			// Deleted again, the deletion is new: its hold counts from now.
			{at(40 * time.Second), "none"},
			{dlt(f.remove("b", "c", "d")), "none"},
			{handle(), "hold e1/5 until +1m10s"},
			{tickAt(69 * time.Second), "hold e1/5 until +1m10s"},
			{tickAt(70 * time.Second), "push e1/5 delta onto 4 released 3 of 4"},
			{outcome(nil), "ack e1/5"},
		}}
	}

	partly := func() row {
		f, v1 := newFeed(t, "a", "b", "c", "d", "e", "f", "g", "h", "i", "j")
		return row{name: "ADeletionPartlyRevertedKeepsItsClock", plane: admissionConfig{GuardMaxDeleteRatio: 0.3, GuardHold: 30 * time.Second}, starts: applied(v1), steps: []step{
			{dlt(f.remove("a", "b", "c", "d", "e")), "none"},
			{handle(), "hold e1/2 until +30s: deletion guard: the config removes 5 of 10"},
			{at(20 * time.Second), "none"},
			{dlt(f.add("a")), "none"},
			{dlt(f.edit("j")), "none"}, // an unrelated host changes: no removal
			{handle(), "hold e1/4 until +30s: deletion guard: the config removes 4 of 10"},
			{tickAt(30 * time.Second), "push e1/4 released 4 of 10"},
		}}
	}

	runRows(t, []row{steady(guard), steady(deltas), different(), reverted(), partly()})
}

// The deletion guard's cost is the change, not the state: with a deletion held, each change
// of endpoints and of an unrelated host costs the guard the same work at 1k and at 100k
// served routes, and the DeltaPlane's config is never materialised to judge it.
func TestDeletionGuardCostIsTheChange(t *testing.T) {
	work := func(n int) int {
		hosts := make([]string, n)
		for i := range hosts {
			hosts[i] = fmt.Sprintf("h%06d", i)
		}
		f, v1 := newFeed(t, hosts...)
		now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		a := newAdmission(admissionConfig{Deltas: true, GuardMaxDeleteRatio: 0.5, GuardHold: time.Hour, Now: func() time.Time { return now }})
		if err := a.marker(&configv1.InitialSyncComplete{Epoch: "e1", Version: 1}); err != nil {
			t.Fatal(err)
		}
		a.config(v1)
		a.judge(a.next().GetHash(), nil)
		if d := a.pushed(nil); d.act != actAck {
			t.Fatalf("%d hosts: the first config: %v", n, d.act)
		}
		if d := a.delta(f.remove(hosts[:n*6/10]...)); d.act != actNone {
			t.Fatalf("%d hosts: the deletion: %v", n, d.act)
		}
		if d := a.judge(a.next().GetHash(), nil); d.act != actHold {
			t.Fatalf("%d hosts: the deletion is not held: %v", n, d.act)
		}
		before := a.work
		for i := 0; i < 100; i++ {
			now = now.Add(time.Second)
			a.delta(f.endpoints())
			a.delta(f.edit(hosts[n-1]))
			c := a.next()
			if c.GetResources() != nil {
				t.Fatalf("%d hosts: change %d: the config was materialised to judge it", n, i)
			}
			if d := a.judge(c.GetHash(), nil); d.act != actHold {
				t.Fatalf("%d hosts: change %d: %v, want hold", n, i, d.act)
			}
		}
		return a.work - before
	}
	small, large := work(1000), work(100000)
	t.Logf("route keys examined for 100 changes: %d at 1k hosts, %d at 100k hosts", small, large)
	if small == 0 || large != small {
		t.Fatalf("the guard examined %d route keys at 100k hosts and %d at 1k for the same changes: its cost grows with the state", large, small)
	}
}

// BenchmarkDeletionGuardChurn is one change of endpoints, with a deletion held, at 1k and at
// 100k served routes: the time per change should not depend on the state's size.
func BenchmarkDeletionGuardChurn(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			t := &testing.T{}
			hosts := make([]string, n)
			for i := range hosts {
				hosts[i] = fmt.Sprintf("h%06d", i)
			}
			f, v1 := newFeed(t, hosts...)
			a := newAdmission(admissionConfig{Deltas: true, GuardMaxDeleteRatio: 0.5, GuardHold: time.Hour})
			_ = a.marker(&configv1.InitialSyncComplete{Epoch: "e1", Version: 1})
			a.config(v1)
			a.judge(a.next().GetHash(), nil)
			a.pushed(nil)
			a.delta(f.remove(hosts[:n*6/10]...))
			ds := make([]*configv1.ConfigDelta, b.N)
			for i := range ds {
				ds[i] = f.endpoints()
			}
			b.ResetTimer()
			for _, d := range ds {
				a.delta(d)
				a.judge(a.next().GetHash(), nil)
			}
		})
	}
}
