package configserver

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/syncbuf"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// Unit tests of the config server's rules (docs/design.md, "The config stream") beyond the
// slow client, Resync, bounds, lying pushers and the operator's stream: what a stream gets
// per epoch and before a marker, which versions the server publishes at all, how answers
// are checked and recorded, the NACK log's rate, and a stop.

// streamWatchdog ends a test stream the server failed to serve, so that the test fails
// instead of hanging; it is not a synchronisation.
const streamWatchdog = 10 * time.Second

// unitMetrics counts what the unit tests look at.
type unitMetrics struct {
	nopMetrics
	mu         sync.Mutex
	published  []uint64
	acks, nack int
}

func (m *unitMetrics) Published(v uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.published = append(m.published, v)
}

func (m *unitMetrics) Ack(string, uint64) { m.mu.Lock(); m.acks++; m.mu.Unlock() }
func (m *unitMetrics) Nack(string)        { m.mu.Lock(); m.nack++; m.mu.Unlock() }

// rawStream is a pusher's stream read message by message.
type rawStream struct {
	t      *testing.T
	stream grpc.BidiStreamingClient[configv1.StreamConfigRequest, configv1.StreamConfigResponse]
}

// openRaw opens a stream to addr on its own connection and says Hello as id.
func openRaw(t *testing.T, addr, id string) *rawStream {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), streamWatchdog)
	t.Cleanup(cancel)
	stream, err := configv1.NewConfigServiceClient(conn).StreamConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(hello(id)); err != nil {
		t.Fatal(err)
	}
	return &rawStream{t: t, stream: stream}
}

// recv returns the next message; want says what the test waits for.
func (r *rawStream) recv(want string) *configv1.StreamConfigResponse {
	r.t.Helper()
	m, err := r.stream.Recv()
	if err != nil {
		r.t.Fatalf("the stream ended waiting for %s: %v", want, err)
	}
	return m
}

// next returns the next message that is not a heartbeat.
func (r *rawStream) next(want string) *configv1.StreamConfigResponse {
	r.t.Helper()
	for {
		if m := r.recv(want); m.GetHeartbeat() == nil {
			return m
		}
	}
}

// expectMarker and expectConfig read the next message that is not a heartbeat and check it.
func (r *rawStream) expectMarker(epoch string, version uint64) {
	r.t.Helper()
	m := r.next(fmt.Sprintf("the marker of %s", epoch))
	if mk := m.GetInitialSyncComplete(); mk == nil || mk.GetEpoch() != epoch || mk.GetVersion() != version {
		r.t.Fatalf("got %v, want the marker of %s naming version %d", m, epoch, version)
	}
}

func (r *rawStream) expectConfig(epoch string, version uint64, hash string) {
	r.t.Helper()
	m := r.next(fmt.Sprintf("the complete state of %s/%d", epoch, version))
	if c := m.GetConfig(); c == nil || c.GetEpoch() != epoch || c.GetVersion() != version || c.GetHash() != hash {
		r.t.Fatalf("got %v, want the complete state of %s/%d", m, epoch, version)
	}
}

// expectConfigThenDeltasTo reads a complete state of epoch no newer than version, then the
// deltas that follow it until version, each onto the one before, the last with hash: what a
// stream gets when versions are published while it is being sent the first (the state it
// is sent is the newest when it is sent, which the stream's sender may reach before the
// publisher published the rest).
func (r *rawStream) expectConfigThenDeltasTo(epoch string, version uint64, hash string) {
	r.t.Helper()
	m := r.next(fmt.Sprintf("a complete state of %s", epoch))
	c := m.GetConfig()
	if c == nil || c.GetEpoch() != epoch || c.GetVersion() > version {
		r.t.Fatalf("got %v, want a complete state of %s no newer than %d", m, epoch, version)
	}
	at, last := c.GetVersion(), c.GetHash()
	for at < version {
		m := r.next(fmt.Sprintf("the delta onto %s/%d", epoch, at))
		d := m.GetDelta()
		if d == nil || d.GetEpoch() != epoch || d.GetBaseVersion() != at {
			r.t.Fatalf("after %s/%d got %v, want a delta onto it", epoch, at, m)
		}
		at, last = d.GetVersion(), d.GetHash()
	}
	if at != version || last != hash {
		r.t.Fatalf("the stream reached %s/%d with hash %s, want %d with %s", epoch, at, last, version, hash)
	}
}

// newUnitServer returns a server with a short heartbeat and a clock standing still, and
// stop, which closes its stopping channel (the cleanup does, when the test did not).
func newUnitServer(t *testing.T, edit func(*Config)) (*Server, func()) {
	t.Helper()
	stopping := make(chan struct{})
	var once sync.Once
	stop := func() { once.Do(func() { close(stopping) }) }
	t.Cleanup(stop)
	cfg := Config{Logger: hclog.NewNullLogger(), Stopping: stopping, Heartbeat: 5 * time.Millisecond,
		Now: func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }}
	if edit != nil {
		edit(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, stop
}

func synced(t *testing.T, s *Server) bool {
	t.Helper()
	resp, err := s.GetStatus(context.Background(), &configv1.GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetSynced()
}

// docs/design.md, "The config stream": nothing is sent before the epoch's marker (a stream
// waits with heartbeats, stamped with the server's clock); then the marker naming the
// epoch's first complete version, then the complete state of the newest version. When the
// upstream breaks (a new epoch) every stream waits for the new marker, gets nothing of the
// old epoch meanwhile, and then gets the new epoch's complete state, never a delta across
// epochs, even when its version is below what the stream was sent before.
func TestNewEpochStreamsWaitForItsMarkerThenGetItsCompleteState(t *testing.T) {
	s, _ := newUnitServer(t, nil)
	addr := serve(t, s)

	early := openRaw(t, addr, "early")
	hb := early.recv("a heartbeat")
	if hb.GetHeartbeat() == nil || !hb.GetHeartbeat().GetTime().AsTime().Equal(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) {
		t.Fatalf("before any epoch a stream got %v, want a heartbeat stamped with the server's clock", hb)
	}
	if synced(t, s) {
		t.Fatal("GetStatus says synced before any marker")
	}
	e1 := &source{epoch: "e1"}
	e1.first(s)
	e1.next(s, 3, 0)
	e1.next(s, 4, 1)
	early.expectMarker("e1", 1)
	early.expectConfigThenDeltasTo("e1", 3, e1.st.Hash())

	s.NewEpoch("e2")
	if synced(t, s) {
		t.Fatal("GetStatus says synced in a new epoch before its marker")
	}
	late := openRaw(t, addr, "late")
	if m := late.recv("a heartbeat"); m.GetHeartbeat() == nil {
		t.Fatalf("a stream opened in an epoch without a marker got %v, want only heartbeats", m)
	}

	e2 := &source{epoch: "e2"}
	e2.first(s) // version 1 of e2, below the 3 the early stream holds
	for _, r := range []*rawStream{early, late} {
		r.expectMarker("e2", 1)
		r.expectConfig("e2", 1, e2.st.Hash())
	}
	if !synced(t, s) {
		t.Fatal("GetStatus says not synced after the new epoch's marker")
	}
	e2.next(s, 7, 0)
	for _, r := range []*rawStream{early, late} {
		if d := r.next("the delta from e2/1 to 2").GetDelta(); d.GetEpoch() != "e2" || d.GetBaseVersion() != 1 || d.GetVersion() != 2 {
			t.Fatalf("after the complete state of e2/1 a stream got %v, want the delta from 1 to 2", d)
		}
	}
}

// docs/design.md: the translator sends its own InitialSyncComplete naming the first complete
// version of its epoch. Another complete version later in the epoch does not move it (a
// stream opened then gets the marker of version 1, then the complete state of the newest);
// OnComplete (readiness) runs once, at the first complete config ever.
func TestMarkerNamesTheFirstCompleteVersionAndOnCompleteRunsOnce(t *testing.T) {
	completed := 0
	s, _ := newUnitServer(t, func(cfg *Config) { cfg.OnComplete = func() { completed++ } })
	addr := serve(t, s)
	src := &source{epoch: "e1"}
	src.first(s)
	src.st.Put(contract.VirtualHosts, src.host(9).GetHostname(), src.host(9))
	src.st.TakeDelta()
	s.Publish(&configv1.Config{Epoch: "e1", Version: 2, Hash: src.st.Hash(), Resources: src.st.Resources()}, src.st.Clone())

	r := openRaw(t, addr, "p")
	r.expectMarker("e1", 1)
	r.expectConfig("e1", 2, src.st.Hash())

	(&source{epoch: "e2"}).first(s)
	r.expectMarker("e2", 1)
	if completed != 1 {
		t.Fatalf("OnComplete ran %d times, want once", completed)
	}
}

// docs/design.md: a version is complete, or a delta onto the version before it with the
// hash of the state after it. The server publishes nothing that does not chain onto its
// newest version (a complete config whose hash is not its state's, anything of another
// epoch, a delta onto another base, one that removes what is not held or gives another
// hash): it logs and drops it, and its chain is intact for the next good delta.
func TestPublishDropsWhatDoesNotChainOntoTheNewest(t *testing.T) {
	type setup struct {
		src *source
		s   *Server
	}
	// delta is the next version's delta from src, not yet published (src is not changed);
	// each case breaks it in one way.
	delta := func(src *source) *configv1.ConfigDelta {
		st := src.st.Clone()
		st.Put(contract.VirtualHosts, src.host(20).GetHostname(), src.host(20))
		d := st.TakeDelta()
		d.Epoch, d.Version, d.BaseVersion, d.Hash = src.epoch, src.version+1, src.version, st.Hash()
		return d
	}
	for _, tc := range []struct {
		name string
		bad  func(x setup)
		log  string // what the server logs of it ("": another epoch's, dropped silently)
	}{
		{"a complete config whose hash is not its state's", func(x setup) {
			st := x.src.st.Clone()
			x.s.Publish(&configv1.Config{Epoch: "e1", Version: 2, Hash: "not-the-hash", Resources: st.Resources()}, st)
		}, "built a config that does not match its hash; not published: version=2"},
		{"a complete config of another epoch", func(x setup) {
			st := x.src.st.Clone()
			x.s.Publish(&configv1.Config{Epoch: "e0", Version: 2, Hash: st.Hash(), Resources: st.Resources()}, st)
		}, ""},
		{"a delta of another epoch", func(x setup) {
			d := delta(x.src)
			d.Epoch = "e0"
			x.s.PublishDelta(d, contract.Digests{})
		}, ""},
		{"a delta onto another base", func(x setup) {
			d := delta(x.src)
			d.BaseVersion = 0
			x.s.PublishDelta(d, contract.Digests{})
		}, "built a delta that does not apply onto the newest version; not published: version=2 error=\"a delta onto version 0, but version 1 is held\""},
		{"a delta removing a host not held", func(x setup) {
			d := delta(x.src)
			d.RemovedVirtualHosts = append(d.RemovedVirtualHosts, "never.example.com")
			x.s.PublishDelta(d, contract.Digests{})
		}, "does not apply onto the newest version; not published: version=2 error=\"broken config chain: the delta removes"},
		{"a delta with another resulting hash", func(x setup) {
			d := delta(x.src)
			d.Hash = x.src.st.Hash()
			x.s.PublishDelta(d, contract.Digests{})
		}, "does not apply onto the newest version; not published: version=2 error=\"broken config chain: the state after the delta has hash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &unitMetrics{}
			logs := &syncbuf.Buffer{}
			s, _ := newUnitServer(t, func(cfg *Config) {
				cfg.Metrics = m
				cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})
			})
			src := &source{epoch: "e1"}
			src.first(s)
			v1 := src.st.Hash()
			tc.bad(setup{src, s})
			if out := logs.String(); tc.log == "" && out != "" || !strings.Contains(out, tc.log) {
				t.Fatalf("the server logged %q, want %q", out, tc.log)
			}
			resp, err := s.GetStatus(context.Background(), &configv1.GetStatusRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetCurrent().GetEpoch() != "e1" || resp.GetCurrent().GetVersion() != 1 || resp.GetCurrent().GetHash() != v1 {
				t.Fatalf("after %s the current version is %v, want e1/1 unchanged", tc.name, resp.GetCurrent())
			}
			good := delta(src) // unbroken, it publishes
			s.PublishDelta(good, contract.Digests{})
			resp, err = s.GetStatus(context.Background(), &configv1.GetStatusRequest{IncludeResources: true})
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetCurrent().GetVersion() != 2 || resp.GetCurrent().GetHash() != good.GetHash() || contract.Hash(resp.GetCurrent().GetResources()) != good.GetHash() {
				t.Fatalf("the next good delta did not publish: current %v", contract.RefOf(resp.GetCurrent()))
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			if len(m.published) != 2 || m.published[0] != 1 || m.published[1] != 2 {
				t.Fatalf("versions counted published: %v, want [1 2]", m.published)
			}
		})
	}
}

// docs/design.md, "Who may do what" and scenario 10: an answer about a version the stream
// was never sent is refused. What a stream was sent is, per epoch, the versions from the
// first to the last it got and the last one's hash; the epoch before the current one is
// kept too (an ACK may cross the next epoch's marker), older ones are not.
func TestAnswersAreCheckedAgainstWhatTheStreamWasSent(t *testing.T) {
	full := func(epoch string, v uint64, hash string) *configv1.StreamConfigResponse {
		return &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Config{Config: &configv1.Config{Epoch: epoch, Version: v, Hash: hash}}}
	}
	delta := func(epoch string, base, v uint64, hash string) *configv1.StreamConfigResponse {
		return &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Delta{Delta: &configv1.ConfigDelta{Epoch: epoch, BaseVersion: base, Version: v, Hash: hash}}}
	}
	p := &peer{}
	for _, m := range []*configv1.StreamConfigResponse{
		full("e1", 1, "h11"), delta("e1", 1, 3, "h13"),
		{Message: &configv1.StreamConfigResponse_Heartbeat{Heartbeat: &configv1.Heartbeat{}}}, // not a version
		full("e2", 4, "h24"), delta("e2", 4, 5, "h25"),
	} {
		p.sent(m)
	}
	for _, tc := range []struct {
		name    string
		ref     *configv1.ConfigRef
		refused string // "" when accepted
	}{
		{"the last version sent", &configv1.ConfigRef{Epoch: "e2", Version: 5, Hash: "h25"}, ""},
		{"the last version sent, without a hash", &configv1.ConfigRef{Epoch: "e2", Version: 5}, ""},
		{"an earlier version of this epoch", &configv1.ConfigRef{Epoch: "e2", Version: 4, Hash: "any"}, ""},
		{"the last version of the epoch before (crossing the marker)", &configv1.ConfigRef{Epoch: "e1", Version: 3, Hash: "h13"}, ""},
		{"the last version sent, with another hash", &configv1.ConfigRef{Epoch: "e2", Version: 5, Hash: "h99"}, "ACK of version e2/5 with hash h99; that version was sent with hash h25"},
		{"the epoch before's last, with another hash", &configv1.ConfigRef{Epoch: "e1", Version: 3, Hash: "h99"}, "with hash h99; that version was sent with hash h13"},
		{"a version not sent yet", &configv1.ConfigRef{Epoch: "e2", Version: 6}, "ACK of version e2/6, which this stream was never sent (it was sent e2/4..5)"},
		{"a version before the first sent", &configv1.ConfigRef{Epoch: "e2", Version: 3}, "which this stream was never sent"},
		{"an epoch never sent", &configv1.ConfigRef{Epoch: "e9", Version: 5}, "which this stream was never sent"},
		{"no epoch", &configv1.ConfigRef{Version: 5}, "which this stream was never sent"},
	} {
		err := p.check("ACK", tc.ref)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.refused != "" && (status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.refused)):
			t.Errorf("%s: %v, want INVALID_ARGUMENT saying %q", tc.name, err, tc.refused)
		}
	}
	p.sent(full("e3", 1, "h31"))
	if err := p.check("ACK", &configv1.ConfigRef{Epoch: "e1", Version: 3}); err == nil {
		t.Error("an ACK of two epochs ago was accepted")
	}
	if err := p.check("ACK", &configv1.ConfigRef{Epoch: "e2", Version: 5}); err != nil {
		t.Errorf("an ACK of the epoch before was refused: %v", err)
	}
}

// docs/design.md: the translator shows what each pusher applied. An ACK records the version
// as applied (at the server's clock) and clears a rejection of that version or an older one
// of the same epoch; a rejection of a newer version stays shown. Every ACK and NACK is
// counted.
func TestAcksAndNacksAreRecordedPerPusher(t *testing.T) {
	type answer struct {
		ack     bool
		version uint64
	}
	for _, tc := range []struct {
		name         string
		answers      []answer
		applied      uint64
		rejected     uint64 // 0: none shown
		acks, nacks  int
		rejectedText string
	}{
		{"an ACK", []answer{{true, 2}}, 2, 0, 1, 0, ""},
		{"a NACK", []answer{{false, 2}}, 0, 2, 0, 1, "refused 2"},
		{"a NACK, then an ACK of a later version", []answer{{false, 2}, {true, 3}}, 3, 0, 1, 1, ""},
		{"a NACK, then an ACK of that version", []answer{{false, 2}, {true, 2}}, 2, 0, 1, 1, ""},
		{"a NACK, then an ACK of an older version", []answer{{true, 1}, {false, 3}, {true, 2}}, 2, 3, 2, 1, "refused 3"},
		{"an ACK, then a NACK of a later version", []answer{{true, 2}, {false, 3}}, 2, 3, 1, 1, "refused 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &unitMetrics{}
			now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			s, _ := newUnitServer(t, func(cfg *Config) { cfg.Metrics = m; cfg.Now = func() time.Time { return now } })
			s.register(&configv1.Hello{PusherId: "p"})
			pr := &peer{}
			for v := uint64(1); v <= 3; v++ {
				pr.sent(&configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Config{Config: &configv1.Config{Epoch: "e1", Version: v, Hash: "h"}}})
			}
			for _, a := range tc.answers {
				ref := &configv1.ConfigRef{Epoch: "e1", Version: a.version, Hash: "h"}
				req := nack("e1", a.version, "h", "refused "+string(rune('0'+a.version)))
				if a.ack {
					req = ack("e1", a.version, "h")
				}
				if err := s.record(s.log, "p", pr, req); err != nil {
					t.Fatalf("answer about %v: %v", ref, err)
				}
			}
			resp, err := s.GetStatus(context.Background(), &configv1.GetStatusRequest{})
			if err != nil {
				t.Fatal(err)
			}
			ps := resp.GetPushers()[0]
			if ps.GetApplied().GetVersion() != tc.applied || ps.GetRejected().GetVersion() != tc.rejected || ps.GetRejectedError() != tc.rejectedText {
				t.Fatalf("shown: applied %d, rejected %d (%q); want applied %d, rejected %d (%q)",
					ps.GetApplied().GetVersion(), ps.GetRejected().GetVersion(), ps.GetRejectedError(), tc.applied, tc.rejected, tc.rejectedText)
			}
			if tc.applied != 0 && !ps.GetAppliedAt().AsTime().Equal(now) {
				t.Fatalf("applied at %v, want the server's clock %v", ps.GetAppliedAt().AsTime(), now)
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.acks != tc.acks || m.nack != tc.nacks {
				t.Fatalf("counted %d ACKs and %d NACKs, want %d and %d", m.acks, m.nack, tc.acks, tc.nacks)
			}
		})
	}
}

// docs/design.md, reliability scenario 10, a NACK storm: one stream's NACKs are logged at most once per nackLogEvery; the
// next one logged says how many were left out since the last.
func TestNackLogIsRateLimitedPerStream(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var l nackLog
	for _, st := range []struct {
		at      time.Duration
		logged  bool
		skipped int
	}{
		{0, true, 0},
		{100 * time.Millisecond, false, 0},
		{nackLogEvery - time.Nanosecond, false, 0},
		{nackLogEvery, true, 2},
		{nackLogEvery + time.Millisecond, false, 0},
		{10 * nackLogEvery, true, 1},
		{20 * nackLogEvery, true, 0},
	} {
		logged, skipped := l.next(t0.Add(st.at))
		if logged != st.logged || skipped != st.skipped {
			t.Fatalf("a NACK at +%s: logged %v (%d left out before it), want %v (%d)", st.at, logged, skipped, st.logged, st.skipped)
		}
	}
}

// docs/design.md: a shutdown never triggers a push. A stopping translator ends every config
// stream with UNAVAILABLE (the pusher keeps its data plane and reconnects) and serves no
// new one.
func TestStoppingEndsEveryStreamUnavailable(t *testing.T) {
	s, stop := newUnitServer(t, nil)
	addr := serve(t, s)
	src := &source{epoch: "e1"}
	src.first(s)
	r := openRaw(t, addr, "p")
	r.expectMarker("e1", 1)
	r.expectConfig("e1", 1, src.st.Hash())
	stop()
	for _, rs := range []*rawStream{r, openRaw(t, addr, "after")} {
		var err error
		for err == nil {
			var m *configv1.StreamConfigResponse
			if m, err = rs.stream.Recv(); err == nil && m.GetHeartbeat() == nil && rs != r {
				t.Fatalf("a stream opened while stopping got %v", m)
			}
		}
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "translator is shutting down") {
			t.Fatalf("a stream of a stopping translator ended with %v, want UNAVAILABLE saying it is shutting down", err)
		}
	}
}

// New rejects a Config without a logger or a stopping channel.
func TestNewRequiresLoggerAndStopping(t *testing.T) {
	for _, cfg := range []Config{{Stopping: make(chan struct{})}, {Logger: hclog.NewNullLogger()}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) made a server", cfg)
		}
	}
}
