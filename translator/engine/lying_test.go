package engine

import (
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// liarHost is the virtual host of the Ingress that only a lying stream carries: no config
// may ever route it.
const liarHost = "liar.example.com"

// lyingStream is one lie of a watcher, told on the translator's first stream.
type lyingStream struct {
	name string
	// script sends an honest beginning (or none) and then the lie, followed by the liar's
	// Ingress at the next revision, which the engine must never take.
	script func(t *testing.T, send func(*watchv1.WatchResponse))
	// lastHonest is the last revision of the lying stream a config may have been built from
	// (0: none, the lie came before the marker).
	lastHonest uint64
	// wantErr is what the engine's log must say about the lie.
	wantErr string
}

// honestStart sends a snapshot of the Service web and the Ingress "a" at revision 2 of epoch
// w1, and its marker.
func honestStart(t *testing.T, send func(*watchv1.WatchResponse)) {
	t.Helper()
	svc, a := svcObject(t, "web", "1"), ingressObject(t, "a", "2")
	snapshot(send, "w1", 2, []*watchv1.Object{svc, a})
	send(msg("w1", 2, marker(map[*watchv1.GroupVersionKind][]*watchv1.Object{svcKind: {svc}, ingKind: {a}})))
}

func upsertAt(epoch string, rev uint64, o *watchv1.Object) *watchv1.WatchResponse {
	return &watchv1.WatchResponse{Epoch: epoch, Revision: rev, Event: &watchv1.WatchResponse_Upsert{Upsert: &watchv1.Upsert{Object: o}}}
}

func deleteAt(epoch string, rev uint64, o *watchv1.Object) *watchv1.WatchResponse {
	return &watchv1.WatchResponse{Epoch: epoch, Revision: rev, Event: &watchv1.WatchResponse_Delete{Delete: &watchv1.Delete{Object: o}}}
}

// A lying peer on the watch stream (docs/design.md, reliability scenario 10): for
// every lie the engine drops the stream with an error naming it, starts a new epoch, asks the
// watcher for a fresh snapshot (no resume from a stream it cannot trust), and publishes no
// config built from the lie: none ever routes the liar's Ingress, none is built from the
// lying stream past its last honest revision, and the next config comes from the new
// stream's own verified snapshot.
func TestLyingWatcherIsDroppedNothingApplied(t *testing.T) {
	liar := func(t *testing.T) *watchv1.Object { return ingressObject(t, "liar", "99") }
	cases := []lyingStream{{
		name: "RevisionGap",
		script: func(t *testing.T, send func(*watchv1.WatchResponse)) {
			honestStart(t, send)
			send(upsertAt("w1", 4, liar(t))) // revision 3 never came
		},
		lastHonest: 2, wantErr: "watch stream revision gap: revision 4 after 2",
	}, {
		name: "EpochChangeMidStream",
		script: func(t *testing.T, send func(*watchv1.WatchResponse)) {
			honestStart(t, send)
			send(upsertAt("w9", 3, liar(t))) // another epoch without a new snapshot
		},
		lastHonest: 2, wantErr: "watch stream epoch changed: from w1 to w9",
	}, {
		name: "SecondMarker",
		script: func(t *testing.T, send func(*watchv1.WatchResponse)) {
			honestStart(t, send)
			send(msg("w1", 2, &watchv1.InitialSyncComplete{}))
			send(upsertAt("w1", 3, liar(t)))
		},
		lastHonest: 2, wantErr: "a second InitialSyncComplete on one stream",
	}, {
		name: "DeleteOfAnUnknownObject",
		script: func(t *testing.T, send func(*watchv1.WatchResponse)) {
			honestStart(t, send)
			send(deleteAt("w1", 3, ingressObject(t, "ghost", "3")))
			send(upsertAt("w1", 4, liar(t)))
		},
		lastHonest: 2, wantErr: "delete of networking.k8s.io/v1/Ingress ns/ghost, which the stream never sent",
	}, {
		name: "ObjectBeforeTheSnapshot",
		script: func(t *testing.T, send func(*watchv1.WatchResponse)) {
			send(upsertAt("w1", 1, liar(t)))
			honestStart(t, send)
		},
		wantErr: "*watchv1.WatchResponse_Upsert before SnapshotStart or ResumeStart",
	}, {
		name: "MarkerBeforeTheSnapshotEnds",
		script: func(t *testing.T, send func(*watchv1.WatchResponse)) {
			send(msg("w1", 1, &watchv1.SnapshotStart{Count: 1, Kinds: []*watchv1.GroupVersionKind{svcKind, ingKind}}))
			send(msg("w1", 1, &watchv1.Upsert{Object: liar(t)}))
			send(msg("w1", 1, marker(map[*watchv1.GroupVersionKind][]*watchv1.Object{ingKind: {liar(t)}})))
		},
		wantErr: "*watchv1.WatchResponse_InitialSyncComplete inside a snapshot",
	}, {
		name: "MarkerWhoseInventoryDoesNotMatch",
		script: func(t *testing.T, send func(*watchv1.WatchResponse)) {
			svc := svcObject(t, "web", "1")
			snapshot(send, "w1", 2, []*watchv1.Object{svc, liar(t)})
			// The marker vouches for the Service only: the Ingress is not the watcher's.
			send(msg("w1", 2, marker(map[*watchv1.GroupVersionKind][]*watchv1.Object{svcKind: {svc}})))
		},
		wantErr: "watch stream inventory mismatch: kind networking.k8s.io/v1/Ingress: holding 1 objects",
	}, {
		name: "MarkerAfterAGap",
		script: func(t *testing.T, send func(*watchv1.WatchResponse)) {
			svc := svcObject(t, "web", "1")
			snapshot(send, "w1", 2, []*watchv1.Object{svc})
			send(upsertAt("w1", 3, liar(t)))
			// Revision 4 never came; a marker among the deltas carries the next revision.
			send(msg("w1", 5, marker(map[*watchv1.GroupVersionKind][]*watchv1.Object{svcKind: {svc}, ingKind: {liar(t)}})))
		},
		wantErr: "watch stream revision gap: InitialSyncComplete at revision 5 after 3",
	}, {
		name: "MoreSnapshotObjectsThanAnnounced",
		script: func(t *testing.T, send func(*watchv1.WatchResponse)) {
			svc := svcObject(t, "web", "1")
			send(msg("w1", 2, &watchv1.SnapshotStart{Count: 1, Kinds: []*watchv1.GroupVersionKind{svcKind, ingKind}}))
			send(msg("w1", 2, &watchv1.Upsert{Object: svc}))
			send(msg("w1", 2, &watchv1.Upsert{Object: liar(t)}))
			send(msg("w1", 2, &watchv1.SnapshotEnd{}))
			send(msg("w1", 2, marker(map[*watchv1.GroupVersionKind][]*watchv1.Object{svcKind: {svc}, ingKind: {liar(t)}})))
		},
		wantErr: "more snapshot objects than SnapshotStart announced",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runLyingWatcher(t, tc) })
	}
}

func runLyingWatcher(t *testing.T, tc lyingStream) {
	t.Helper()
	logs := &lockedBuffer{}
	fw, rec := setupWith(t, func(c *Config) {
		c.Logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})
	})
	fw.scripts <- func(send func(*watchv1.WatchResponse)) error {
		tc.script(t, send)
		return nil // the stream stays open: only the engine may drop it
	}
	// The honest stream that follows: its own snapshot, without the liar.
	svc, b := svcObject(t, "web", "1"), ingressObject(t, "b", "5")
	fw.scripts <- func(send func(*watchv1.WatchResponse)) error {
		snapshot(send, "w2", 5, []*watchv1.Object{svc, b})
		send(msg("w2", 5, marker(map[*watchv1.GroupVersionKind][]*watchv1.Object{svcKind: {svc}, ingKind: {b}})))
		return nil
	}
	rec.waitUntil(t, "a config from the honest stream", func(_ []string, c []*configv1.Config) bool {
		return len(c) > 0 && c[len(c)-1].GetWatcherEpoch() == "w2"
	})

	if !strings.Contains(logs.String(), tc.wantErr) {
		t.Fatalf("the engine's log does not name the lie %q:\n%s", tc.wantErr, logs)
	}
	reqs := fw.reqs()
	if len(reqs) < 2 {
		t.Fatalf("%d watch requests; want a reconnect", len(reqs))
	}
	if r := reqs[1]; r.GetResumeEpoch() != "" || r.GetResumeRevision() != 0 {
		t.Fatalf("after the lie the engine resumed at %s/%d; want a fresh snapshot", r.GetResumeEpoch(), r.GetResumeRevision())
	}
	epochs, cfgs, firsts := rec.snapshot()
	if len(epochs) < 2 {
		t.Fatalf("%d epochs; the lie must end the engine's epoch", len(epochs))
	}
	for i, c := range cfgs {
		for _, vh := range c.GetResources().GetVirtualHosts() {
			if vh.GetHostname() == liarHost {
				t.Fatalf("config %s/%d routes the lying stream's Ingress", c.GetEpoch(), c.GetVersion())
			}
		}
		switch c.GetWatcherEpoch() {
		case "w1":
			if c.GetWatcherRevision() > tc.lastHonest || tc.lastHonest == 0 {
				t.Fatalf("config %d was built from the lying stream at revision %d (last honest: %d)", i, c.GetWatcherRevision(), tc.lastHonest)
			}
		case "w2":
			if c.GetEpoch() == epochs[0] {
				t.Fatalf("config %d of the new stream was published in the lying stream's epoch %s", i, c.GetEpoch())
			}
		default:
			t.Fatalf("config %d built from watcher epoch %q", i, c.GetWatcherEpoch())
		}
	}
	last := cfgs[len(cfgs)-1]
	hosts := map[string]bool{}
	for _, vh := range last.GetResources().GetVirtualHosts() {
		hosts[vh.GetHostname()] = true
	}
	if !hosts["b.example.com"] || hosts["a.example.com"] || len(hosts) != 1 {
		t.Fatalf("the new stream's config routes %v; want only b.example.com (nothing kept from the lying stream)", hosts)
	}
	for i, c := range cfgs {
		if c.GetWatcherEpoch() == "w2" {
			if !firsts[i] {
				t.Fatalf("the new stream's first config was a delta onto the lying stream's config")
			}
			break
		}
	}
}
