package gate

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/syncbuf"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// liarHost is the virtual host only a lie carries: the data plane must never get it.
const liarHost = "liar.example.com"

// world is what the gate talks to in these tests, all of it recorded: a scripted translator
// (a real gRPC server on 127.0.0.1:0), a data plane, the gate's metrics and its log. Every
// recorder signals one channel, so that a test waits on conditions, never on time.
type world struct {
	changed chan struct{}
	log     *lockedBuffer

	mu      sync.Mutex
	streams []*scriptedStream
	answers []*configv1.StreamConfigRequest // everything the gate sent after its Hello
	applied []*configv1.Config              // what reached the data plane, in order
	drops   []string                        // the gate's Dropped reasons, in order
}

func (w *world) signal() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// waitFor waits until cond holds (it is called with w.mu held).
func (w *world) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		w.mu.Lock()
		ok := cond()
		w.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-w.changed:
		case <-deadline:
			w.mu.Lock()
			defer w.mu.Unlock()
			t.Fatalf("timed out waiting for %s; data plane got %d configs, drops %v, answers %v\nlog:\n%s", what, len(w.applied), w.drops, w.answers, w.log)
		}
	}
}

// scriptedStream is one config stream as the test drives it.
type scriptedStream struct {
	send func(*configv1.StreamConfigResponse) error
	end  chan struct{}
	done chan struct{} // closed when the stream ended (either side)
}

// scriptedTranslator is the ConfigService the gate follows.
type scriptedTranslator struct {
	configv1.UnimplementedConfigServiceServer
	w *world
}

func (f *scriptedTranslator) StreamConfig(stream configv1.ConfigService_StreamConfigServer) error {
	if _, err := stream.Recv(); err != nil { // Hello
		return err
	}
	s := &scriptedStream{send: stream.Send, end: make(chan struct{}), done: make(chan struct{})}
	defer close(s.done)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			f.w.mu.Lock()
			f.w.answers = append(f.w.answers, m)
			f.w.mu.Unlock()
			f.w.signal()
		}
	}()
	f.w.mu.Lock()
	f.w.streams = append(f.w.streams, s)
	f.w.mu.Unlock()
	f.w.signal()
	select {
	case <-s.end:
		return fmt.Errorf("stream ended by the test")
	case <-stream.Context().Done():
		return nil
	}
}

// dataPlane records every config the gate applies; its fingerprint is the state hash.
type dataPlane struct{ w *world }

func (d *dataPlane) Name() string { return "recording" }
func (d *dataPlane) Apply(_ context.Context, cfg *configv1.Config) error {
	d.w.mu.Lock()
	d.w.applied = append(d.w.applied, cfg)
	d.w.mu.Unlock()
	d.w.signal()
	return nil
}
func (d *dataPlane) Fingerprint(cfg *configv1.Config) (string, error) { return cfg.GetHash(), nil }
func (d *dataPlane) Current(context.Context) (string, error) {
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	if len(d.w.applied) == 0 {
		return "", nil
	}
	return d.w.applied[len(d.w.applied)-1].GetHash(), nil
}

type metrics struct{ w *world }

func (m *metrics) Received() {}
func (m *metrics) Dropped(reason string) {
	m.w.mu.Lock()
	m.w.drops = append(m.w.drops, reason)
	m.w.mu.Unlock()
	m.w.signal()
}
func (m *metrics) Applied(uint64, time.Duration) {}
func (m *metrics) Rejected()                     {}
func (m *metrics) Held()                         {}

// lockedBuffer is a log output the test reads while the code under test writes.
type lockedBuffer = syncbuf.Buffer

// startGate runs a gate against a scripted translator and a recording data plane.
func startGate(t *testing.T) *world {
	t.Helper()
	w := &world{changed: make(chan struct{}, 1), log: &lockedBuffer{}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	configv1.RegisterConfigServiceServer(gs, &scriptedTranslator{w: w})
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	g, err := New(Config{Logger: hclog.New(&hclog.LoggerOptions{Output: w.log, Level: hclog.Info}), Client: configv1.NewConfigServiceClient(conn),
		DataPlane: &dataPlane{w: w}, PusherID: "p", Metrics: &metrics{w: w}, CheckInterval: time.Hour,
		BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = g.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// stream waits for the gate's n-th stream (1-based).
func (w *world) stream(t *testing.T, n int) *scriptedStream {
	t.Helper()
	w.waitFor(t, fmt.Sprintf("stream %d", n), func() bool { return len(w.streams) >= n })
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.streams[n-1]
}

func (s *scriptedStream) sendAll(t *testing.T, msgs ...*configv1.StreamConfigResponse) {
	t.Helper()
	for _, m := range msgs {
		if err := s.send(m); err != nil {
			t.Fatalf("send %v: %v", m, err)
		}
	}
}

// host is a virtual host with one route.
func host(name string) *configv1.VirtualHost {
	return &configv1.VirtualHost{Hostname: name, Routes: []*configv1.Route{{Name: name,
		Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"}}}}
}

// full is the complete state of the given hosts, as version v of epoch.
func full(epoch string, v uint64, hosts ...string) *configv1.Config {
	res := &configv1.Resources{}
	for _, h := range hosts {
		res.VirtualHosts = append(res.VirtualHosts, host(h))
	}
	return &configv1.Config{Epoch: epoch, Version: v, Hash: contract.Hash(res), Resources: res}
}

// delta is the delta from base (a complete state) that adds host h, as version v onto
// base's version.
func delta(t *testing.T, base *configv1.Config, v uint64, h string) *configv1.ConfigDelta {
	t.Helper()
	st, err := contract.FromResources(base.GetResources(), base.GetHash())
	if err != nil {
		t.Fatal(err)
	}
	st.Put(contract.VirtualHosts, h, host(h))
	d := st.TakeDelta()
	d.Epoch, d.Version, d.BaseVersion, d.Hash = base.GetEpoch(), v, base.GetVersion(), st.Hash()
	return d
}

// manyHosts are n host names, enough to need several chunks under chunked's limit.
func manyHosts(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("h%03d.example.com", i))
	}
	return out
}

// chunked is c as a translator sends a complete state over a small message limit: a start,
// chunks and an end.
func chunked(t *testing.T, c *configv1.Config) []*configv1.StreamConfigResponse {
	t.Helper()
	msgs, err := contract.Chunk(c, 512, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) < 4 {
		t.Fatalf("version %d is %d messages, want a start, several chunks and an end", c.GetVersion(), len(msgs))
	}
	return msgs
}

func markerMsg(epoch string, v uint64) *configv1.StreamConfigResponse {
	return &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_InitialSyncComplete{InitialSyncComplete: &configv1.InitialSyncComplete{Epoch: epoch, Version: v}}}
}

func configMsg(c *configv1.Config) *configv1.StreamConfigResponse {
	return &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Config{Config: c}}
}

func deltaMsg(d *configv1.ConfigDelta) *configv1.StreamConfigResponse {
	return &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Delta{Delta: d}}
}

func heartbeatMsg() *configv1.StreamConfigResponse {
	return &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Heartbeat{Heartbeat: &configv1.Heartbeat{Time: timestamppb.Now()}}}
}

// appliedVersion waits until the data plane got version v of epoch (with hash).
func (w *world) appliedVersion(t *testing.T, c *configv1.Config) {
	t.Helper()
	w.waitFor(t, fmt.Sprintf("version %s/%d applied", c.GetEpoch(), c.GetVersion()), func() bool {
		for _, a := range w.applied {
			if a.GetEpoch() == c.GetEpoch() && a.GetVersion() == c.GetVersion() && a.GetHash() == c.GetHash() {
				return true
			}
		}
		return false
	})
}

func (w *world) dropped(t *testing.T, reason string) {
	t.Helper()
	w.waitFor(t, "a drop for "+reason, func() bool {
		for _, d := range w.drops {
			if d == reason {
				return true
			}
		}
		return false
	})
}

// resync waits for the gate's Resync and returns its reason.
func (w *world) resync(t *testing.T) string {
	t.Helper()
	var reason string
	w.waitFor(t, "a Resync", func() bool {
		for _, a := range w.answers {
			if r := a.GetResync(); r != nil {
				reason = r.GetReason()
				return true
			}
		}
		return false
	})
	return reason
}

// A lying peer on the config stream (docs/design.md, the pusher gate, and
// reliability scenario 10): every lie of a translator is named in the gate's log, answered
// as the design says (dropped and counted, a Resync that applies nothing from the broken
// chain, or the stream dropped), and nothing of it reaches the data plane: no config it
// applied ever routes the liar's host, and what it applied follows from the honest messages
// only.
func TestLyingTranslatorNothingReachesTheDataPlane(t *testing.T) {
	ok1 := full("e1", 1, "ok.example.com")
	ok2 := full("e1", 2, "ok.example.com", "two.example.com")
	cases := []struct {
		name string
		// lie drives the gate's streams: an honest beginning, the lie, and the honest
		// messages that prove the gate still works (or reconnected).
		lie func(t *testing.T, w *world)
		// wantLog is what the gate's log must say about the lie.
		wantLog string
		// wantApplied are the versions the data plane got, in order (epoch/version).
		wantApplied []string
	}{{
		name: "ConfigBeforeTheMarker",
		lie: func(t *testing.T, w *world) {
			s := w.stream(t, 1)
			s.sendAll(t, configMsg(full("e1", 1, liarHost)))
			w.dropped(t, "before-marker")
			s.sendAll(t, markerMsg("e1", 1), configMsg(ok1))
			w.appliedVersion(t, ok1)
		},
		wantLog: `config dropped by the gate: reason=before-marker epoch=e1 version=1`, wantApplied: []string{"e1/1"},
	}, {
		name: "DeltaBeforeTheMarker",
		lie: func(t *testing.T, w *world) {
			s := w.stream(t, 1)
			s.sendAll(t, deltaMsg(delta(t, ok1, 2, liarHost)))
			w.dropped(t, "before-marker")
			s.sendAll(t, markerMsg("e1", 1), configMsg(ok1))
			w.appliedVersion(t, ok1)
		},
		wantLog: `config dropped by the gate: reason=before-marker epoch=e1 version=2`, wantApplied: []string{"e1/1"},
	}, {
		name: "SecondMarkerWithinAnEpoch",
		lie: func(t *testing.T, w *world) {
			s := w.stream(t, 1)
			s.sendAll(t, markerMsg("e1", 1), configMsg(ok1))
			w.appliedVersion(t, ok1)
			// A second marker of e1, then a version that would be applicable: the stream is
			// dropped at the marker, so the version after it is never taken.
			s.sendAll(t, markerMsg("e1", 2), deltaMsg(delta(t, ok1, 2, liarHost)))
			s2 := w.stream(t, 2)
			<-s.done
			// The new stream: the gate waits for its marker again.
			s2.sendAll(t, markerMsg("e2", 1), configMsg(full("e2", 1, "ok.example.com", "two.example.com")))
			w.appliedVersion(t, full("e2", 1, "ok.example.com", "two.example.com"))
		},
		wantLog:     `protocol violation: a second InitialSyncComplete for epoch e1 on one stream (version 2, the first named 1)`,
		wantApplied: []string{"e1/1", "e2/1"},
	}, {
		name: "OlderVersionAfterAnApply",
		lie: func(t *testing.T, w *world) {
			s := w.stream(t, 1)
			s.sendAll(t, markerMsg("e1", 1), configMsg(ok1))
			w.appliedVersion(t, ok1)
			s.sendAll(t, deltaMsg(delta(t, ok1, 2, "two.example.com")))
			w.appliedVersion(t, ok2)
			s.sendAll(t, configMsg(full("e1", 1, liarHost)))
			w.dropped(t, "older-than-applied")
		},
		wantLog: `config dropped by the gate: reason=older-than-applied epoch=e1 version=1`, wantApplied: []string{"e1/1", "e1/2"},
	}, {
		name: "DeltaThatDoesNotRaiseTheVersion",
		lie: func(t *testing.T, w *world) {
			s := w.stream(t, 1)
			s.sendAll(t, markerMsg("e1", 1), configMsg(ok1))
			w.appliedVersion(t, ok1)
			s.sendAll(t, deltaMsg(delta(t, ok1, 2, "two.example.com")))
			w.appliedVersion(t, ok2)
			s.sendAll(t, deltaMsg(delta(t, ok2, 2, liarHost))) // version 2 again, onto 2
			w.resync(t)
			ok3 := full("e1", 3, "ok.example.com", "two.example.com", "three.example.com")
			s.sendAll(t, configMsg(ok3))
			w.appliedVersion(t, ok3)
		},
		wantLog: `error="a delta to version 2 onto version 2: versions only rise"`, wantApplied: []string{"e1/1", "e1/2", "e1/3"},
	}, {
		name: "EpochChangeWithoutAMarker",
		lie: func(t *testing.T, w *world) {
			s := w.stream(t, 1)
			s.sendAll(t, markerMsg("e1", 1), configMsg(ok1))
			w.appliedVersion(t, ok1)
			s.sendAll(t, configMsg(full("e9", 5, liarHost)))
			w.dropped(t, "other-epoch")
			s.sendAll(t, deltaMsg(delta(t, full("e9", 5, "ok.example.com"), 6, liarHost)))
			w.waitFor(t, "both versions of e9 dropped", func() bool { return len(w.drops) == 2 })
			s.sendAll(t, deltaMsg(delta(t, ok1, 2, "two.example.com")))
			w.appliedVersion(t, ok2)
		},
		wantLog: `config dropped by the gate: reason=other-epoch epoch=e9 version=6`, wantApplied: []string{"e1/1", "e1/2"},
	}, {
		name: "DeltaOntoAnotherBase",
		lie: func(t *testing.T, w *world) {
			s := w.stream(t, 1)
			s.sendAll(t, markerMsg("e1", 1), configMsg(ok1))
			w.appliedVersion(t, ok1)
			other := full("e1", 2, "ok.example.com", "other.example.com") // never sent
			s.sendAll(t, deltaMsg(delta(t, other, 3, liarHost)))
			if r := w.resync(t); !strings.Contains(r, "a delta onto version 2, but version 1 is held") {
				t.Fatalf("Resync reason %q", r)
			}
			// Deltas after the break are dropped until the complete state comes.
			s.sendAll(t, deltaMsg(delta(t, full("e1", 3, "ok.example.com", "other.example.com", liarHost), 4, "four.example.com")))
			w.waitFor(t, "the delta after the break dropped", func() bool { return len(w.drops) == 2 && w.drops[1] == "broken-chain" })
			ok4 := full("e1", 4, "ok.example.com", "four.example.com")
			s.sendAll(t, configMsg(ok4))
			w.appliedVersion(t, ok4)
		},
		wantLog:     `config chain broken; asking for the complete state and applying nothing from this chain: version=3 error="a delta onto version 2, but version 1 is held"`,
		wantApplied: []string{"e1/1", "e1/4"},
	}, {
		name: "DeltaWhoseHashDoesNotMatch",
		lie: func(t *testing.T, w *world) {
			s := w.stream(t, 1)
			s.sendAll(t, markerMsg("e1", 1), configMsg(ok1))
			w.appliedVersion(t, ok1)
			d := delta(t, ok1, 2, liarHost)
			d.Hash = ok2.GetHash() // the hash of another state
			s.sendAll(t, deltaMsg(d))
			if r := w.resync(t); !strings.Contains(r, "the delta says") {
				t.Fatalf("Resync reason %q", r)
			}
			s.sendAll(t, configMsg(ok2)) // the complete state answers the Resync
			w.appliedVersion(t, ok2)
		},
		wantLog:     `config chain broken; asking for the complete state and applying nothing from this chain: version=2 error="broken config chain: the state after the delta has hash`,
		wantApplied: []string{"e1/1", "e1/2"},
	}, {
		name: "ConfigWhoseHashDoesNotMatch",
		lie: func(t *testing.T, w *world) {
			s := w.stream(t, 1)
			s.sendAll(t, markerMsg("e1", 1), configMsg(ok1))
			w.appliedVersion(t, ok1)
			c := full("e1", 2, "ok.example.com", liarHost)
			c.Hash = ok2.GetHash()
			s.sendAll(t, configMsg(c))
			w.resync(t)
			s.sendAll(t, configMsg(ok2))
			w.appliedVersion(t, ok2)
		},
		wantLog: `config chain broken; asking for the complete state and applying nothing from this chain: version=2`, wantApplied: []string{"e1/1", "e1/2"},
	}, {
		name: "ChunkedStateAppliedOnlyWhole",
		lie: func(t *testing.T, w *world) {
			s := w.stream(t, 1)
			big := full("e1", 1, manyHosts(40)...)
			msgs := chunked(t, big)
			s.sendAll(t, markerMsg("e1", 1))
			s.sendAll(t, msgs[:len(msgs)-1]...)
			s.sendAll(t, heartbeatMsg(), heartbeatMsg())
			w.mu.Lock()
			n := len(w.applied)
			w.mu.Unlock()
			if n != 0 {
				t.Fatal("the data plane got a config before the end of a chunked state")
			}
			s.sendAll(t, msgs[len(msgs)-1])
			w.appliedVersion(t, big)
		},
		wantLog: `complete state received in chunks: epoch=e1 version=1 chunks=`, wantApplied: []string{"e1/1"},
	}, {
		name: "ChunkWithoutAStart",
		lie: func(t *testing.T, w *world) {
			s := w.stream(t, 1)
			msgs := chunked(t, full("e1", 1, append(manyHosts(40), liarHost)...))
			s.sendAll(t, markerMsg("e1", 1), msgs[1])
			s2 := w.stream(t, 2)
			<-s.done
			s2.sendAll(t, markerMsg("e2", 1), configMsg(full("e2", 1, "ok.example.com")))
			w.appliedVersion(t, full("e2", 1, "ok.example.com"))
		},
		wantLog: `broken config stream: a chunk of version 1 without a start`, wantApplied: []string{"e2/1"},
	}, {
		name: "DeltaMidChunkedState",
		lie: func(t *testing.T, w *world) {
			s := w.stream(t, 1)
			s.sendAll(t, markerMsg("e1", 1), configMsg(ok1))
			w.appliedVersion(t, ok1)
			msgs := chunked(t, full("e1", 2, append(manyHosts(40), liarHost)...))
			s.sendAll(t, msgs[:2]...)
			s.sendAll(t, deltaMsg(delta(t, ok1, 2, "two.example.com")))
			s2 := w.stream(t, 2)
			<-s.done
			s2.sendAll(t, markerMsg("e2", 1), configMsg(full("e2", 1, "ok.example.com", "two.example.com")))
			w.appliedVersion(t, full("e2", 1, "ok.example.com", "two.example.com"))
		},
		wantLog: `broken config stream: a delta while version 2 is being assembled`, wantApplied: []string{"e1/1", "e2/1"},
	}, {
		name: "ChunkOfAnotherVersion",
		lie: func(t *testing.T, w *world) {
			s := w.stream(t, 1)
			honest := chunked(t, full("e1", 1, manyHosts(40)...))
			other := chunked(t, full("e1", 3, append(manyHosts(40), liarHost)...))
			s.sendAll(t, markerMsg("e1", 1), honest[0], honest[1], other[2])
			s2 := w.stream(t, 2)
			<-s.done
			s2.sendAll(t, markerMsg("e2", 1), configMsg(full("e2", 1, "ok.example.com")))
			w.appliedVersion(t, full("e2", 1, "ok.example.com"))
		},
		wantLog: `broken config stream: a chunk of version e1/3 while version e1/1 is being assembled`, wantApplied: []string{"e2/1"},
	}, {
		name: "ChunkedStateWhoseHashDoesNotMatch",
		lie: func(t *testing.T, w *world) {
			s := w.stream(t, 1)
			s.sendAll(t, markerMsg("e1", 1), configMsg(ok1))
			w.appliedVersion(t, ok1)
			honest := full("e1", 2, manyHosts(40)...)
			c := full("e1", 2, append(manyHosts(40), liarHost)...)
			c.Hash = honest.GetHash() // start and end agree, the chunks carry another state
			s.sendAll(t, chunked(t, c)...)
			w.resync(t)
			s.sendAll(t, chunked(t, honest)...)
			w.appliedVersion(t, honest)
		},
		wantLog: `config chain broken; asking for the complete state and applying nothing from this chain: version=2`, wantApplied: []string{"e1/1", "e1/2"},
	}, {
		name: "HeartbeatsOnly",
		lie: func(t *testing.T, w *world) {
			s := w.stream(t, 1)
			for range 50 {
				s.sendAll(t, heartbeatMsg())
			}
			close(s.end) // the translator gives up: the gate reconnects, the data plane untouched
			s2 := w.stream(t, 2)
			s2.sendAll(t, heartbeatMsg())
		},
		wantLog: `config stream ended; the gate is closed and the data plane keeps its config`,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := startGate(t)
			tc.lie(t, w)
			w.mu.Lock()
			defer w.mu.Unlock()
			var got []string
			for _, c := range w.applied {
				got = append(got, fmt.Sprintf("%s/%d", c.GetEpoch(), c.GetVersion()))
				for _, vh := range c.GetResources().GetVirtualHosts() {
					if vh.GetHostname() == liarHost {
						t.Errorf("the data plane got %s/%d, which routes the lie's host", c.GetEpoch(), c.GetVersion())
					}
				}
				if h := contract.Hash(c.GetResources()); h != c.GetHash() {
					t.Errorf("the data plane got %s/%d with hash %.12s, its resources hash to %.12s", c.GetEpoch(), c.GetVersion(), c.GetHash(), h)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.wantApplied) {
				t.Errorf("the data plane got %v, want %v", got, tc.wantApplied)
			}
			for _, a := range w.answers {
				if ack := a.GetAck(); ack != nil && strings.HasPrefix(ack.GetConfig().GetEpoch(), "e9") {
					t.Errorf("the gate acknowledged a version of the lie: %v", ack)
				}
			}
			if !strings.Contains(w.log.String(), tc.wantLog) {
				t.Errorf("the gate's log does not say %q:\n%s", tc.wantLog, w.log)
			}
		})
	}
}
