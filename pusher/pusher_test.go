package main_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protojson"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sluice-io/sluice/internal/backend"
	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/internal/pki"
	"github.com/sluice-io/sluice/internal/promtext"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	"github.com/sluice-io/sluice/pusher/caddy"
	"github.com/sluice-io/sluice/translator/translate"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

// fakeTranslator is a scripted ConfigService: it records every message pushers send and
// lets the test send anything, in any order, on the current stream.
type fakeTranslator struct {
	configv1.UnimplementedConfigServiceServer
	mu      sync.Mutex
	streams chan *fakeStream
	answers []*configv1.StreamConfigRequest
	changed chan struct{}
}

type fakeStream struct {
	send func(*configv1.StreamConfigResponse) error
	end  chan struct{} // closed by the test to reset the stream
	gone chan struct{} // closed when the stream ended, by either side
}

func (f *fakeTranslator) StreamConfig(stream configv1.ConfigService_StreamConfigServer) error {
	if _, err := stream.Recv(); err != nil { // Hello
		return err
	}
	fs := &fakeStream{send: stream.Send, end: make(chan struct{}), gone: make(chan struct{})}
	defer close(fs.gone)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.answers = append(f.answers, m)
			f.mu.Unlock()
			select {
			case f.changed <- struct{}{}:
			default:
			}
		}
	}()
	f.streams <- fs
	select {
	case <-fs.end:
		return fmt.Errorf("stream reset by the test")
	case <-stream.Context().Done():
		return nil
	}
}

func (f *fakeTranslator) waitAnswer(t *testing.T, what string, ok func(*configv1.StreamConfigRequest) bool) *configv1.StreamConfigRequest {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		f.mu.Lock()
		for _, a := range f.answers {
			if ok(a) {
				f.mu.Unlock()
				return a
			}
		}
		f.mu.Unlock()
		select {
		case <-f.changed:
		case <-deadline:
			t.Fatalf("no %s from the pusher", what)
		}
	}
}

func startFake(t testing.TB) (*fakeTranslator, string) {
	t.Helper()
	f := &fakeTranslator{streams: make(chan *fakeStream, 4), changed: make(chan struct{}, 1)}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.MaxSendMsgSize(64 << 20))
	configv1.RegisterConfigServiceServer(s, f)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return f, lis.Addr().String()
}

func (f *fakeTranslator) nextStream(t testing.TB) *fakeStream {
	t.Helper()
	select {
	case s := <-f.streams:
		return s
	case <-time.After(30 * time.Second):
		t.Fatal("the pusher did not connect")
		return nil
	}
}

type env struct {
	caddy    *testenv.Caddy
	pusher   *testenv.Process
	grpcAddr string
	httpAddr string
	target   probe
	args     []string
}

// probe asks Caddy what it runs, as the pusher's target does.
type probe interface {
	Fingerprint(*configv1.Config) (string, error)
	Current(context.Context) (string, error)
}

// startPusher starts a pusher on a Caddy with Sluice's module (the default data plane).
func startPusher(t testing.TB, translatorAddr string, extra ...string) *env {
	t.Helper()
	return startPusherOn(t, false, translatorAddr, extra...)
}

// startPusherOn starts a pusher (--caddy-target auto) on Caddy with the module, or on stock
// Caddy, and checks the target the pusher chose.
func startPusherOn(t testing.TB, stock bool, translatorAddr string, extra ...string) *env {
	t.Helper()
	ctx := context.Background()
	start, want := testenv.StartCaddy, "target=caddy-module"
	if stock {
		start, want = testenv.StartStockCaddy, "target=caddy\n"
	}
	cd, err := start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cd.Kill)
	a := testenv.Addrs(t, 2)
	args := append([]string{"--translator-addr", translatorAddr, "--caddy-admin", cd.AdminURL, "--id", "test-pusher",
		"--proxy-http-listen", fmt.Sprintf("127.0.0.1:%d", cd.HTTPPort), "--proxy-https-listen", fmt.Sprintf("127.0.0.1:%d", cd.HTTPSPort),
		"--listen", a[0], "--http-listen", a[1], "--log-level", "debug"}, extra...)
	p := testenv.StartBinary(t, "pusher", args...)
	p.WaitLog(t, want)
	// The same options as the pusher's, so that fingerprints compare.
	cc := caddy.Config{Admin: cd.AdminURL, Render: caddy.RenderOptions{
		HTTPListen: fmt.Sprintf("127.0.0.1:%d", cd.HTTPPort), HTTPSListen: fmt.Sprintf("127.0.0.1:%d", cd.HTTPSPort)}}
	for i := 0; i+1 < len(extra); i++ {
		if extra[i] == "--proxy-listener" {
			l, err := caddy.ParseListener(extra[i+1])
			if err != nil {
				t.Fatal(err)
			}
			cc.Render.Listeners = append(cc.Render.Listeners, l)
		}
	}
	var target probe
	if stock {
		target, err = caddy.New(cc)
	} else {
		target, err = caddy.NewModule(cc)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &env{caddy: cd, pusher: p, grpcAddr: a[0], httpAddr: a[1], target: target, args: args}
}

// caddyHash is the fingerprint of the config Caddy runs ("" for none of ours).
func (e *env) caddyHash(t *testing.T) string {
	t.Helper()
	fp, err := caddy.CurrentWithin(context.Background(), e.target, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// fp is the fingerprint Caddy runs for cfg.
func (e *env) fp(t testing.TB, cfg *configv1.Config) string {
	t.Helper()
	fp, err := e.target.Fingerprint(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// waitConfig waits until Caddy runs cfg.
func (e *env) waitConfig(t *testing.T, cfg *configv1.Config) {
	t.Helper()
	want := e.fp(t, cfg)
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("caddy to run %q", want), func() (bool, error) {
		got, err := caddy.CurrentWithin(context.Background(), e.target, 10*time.Second)
		if err == nil && got != want {
			err = fmt.Errorf("caddy runs %q\n%s", got, e.pusher.LogTail(20))
		}
		return err == nil, err
	})
}

// metric reads one sample from the pusher's /metrics ("name" or `name{label="v"}`).
func (e *env) metric(t *testing.T, sample string) float64 {
	t.Helper()
	return promtext.Value(e.httpAddr, sample)
}

func (e *env) waitMetric(t *testing.T, sample string, want float64) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("%s = %v", sample, want), func() (bool, error) {
		got := e.metric(t, sample)
		return got == want, fmt.Errorf("it is %v\n%s", got, e.pusher.LogTail(20))
	})
}

func marker(epoch string, version uint64) *configv1.StreamConfigResponse {
	return &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_InitialSyncComplete{InitialSyncComplete: &configv1.InitialSyncComplete{Epoch: epoch, Version: version}}}
}

func configMsg(c *configv1.Config) *configv1.StreamConfigResponse {
	return &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Config{Config: c}}
}

// simpleConfig routes host to the backend b.
func simpleConfig(epoch string, version uint64, host string, b *testenv.Backend) *configv1.Config {
	res := &configv1.Resources{
		VirtualHosts: []*configv1.VirtualHost{{Hostname: host, Routes: []*configv1.Route{{Name: "r",
			Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"}, Backends: []*configv1.WeightedBackend{{Backend: "be", Weight: 1}}}}}},
		Backends: []*configv1.Backend{{Name: "be", Endpoints: []*configv1.Endpoint{{Address: b.Address, Port: uint32(b.Port), Ready: true}}}},
	}
	return &configv1.Config{Epoch: epoch, Version: version, Hash: translate.Hash(res), Resources: res}
}

// get sends a request through Caddy and returns the answering backend's name, or the status.
func get(t testing.TB, port int, host, path string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", port, path), nil)
	req.Host = host
	resp, err := oneShot.Do(req)
	if err != nil {
		return "error: " + err.Error()
	}
	return answer(resp)
}

// oneShot sends each request on a connection of its own. Stock Caddy's /load replaces its
// HTTP servers and the old ones close their idle connections, so a request on a kept-alive
// connection may meet that close and fail with EOF: a property of the fallback target, not
// of what these tests check. The test that keeps its connection on purpose
// (TestModuleChangesRoutesInPlaceWithoutReload) has its own client.
var oneShot = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

func answer(resp *http.Response) string {
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return strconv.Itoa(resp.StatusCode)
	}
	var a testenv.BackendAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return "unparsable: " + string(body)
	}
	return a.Backend
}

// docs/design.md's pusher gate, against a test-double translator and a real Caddy: configs before
// the marker and older than the version it names are dropped; after it the newest is
// applied; a reset stream closes the gate again and Caddy keeps what it had; the next
// epoch's marker opens it.
func TestGateAppliesNothingBeforeTheMarkerNorAfterAReset(t *testing.T) {
	n := testenv.SharedNet(t)
	b1, err := n.StartBackend("one")
	if err != nil {
		t.Fatal(err)
	}
	b2, err := n.StartBackend("two")
	if err != nil {
		t.Fatal(err)
	}
	fake, addr := startFake(t)
	e := startPusher(t, addr)
	s := fake.nextStream(t)

	early := simpleConfig("e1", 1, "gate.example.com", b1)
	if err := s.send(configMsg(early)); err != nil {
		t.Fatal(err)
	}
	e.waitMetric(t, `sluice_pusher_configs_dropped_total{reason="before-marker"}`, 1)
	if h := e.caddyHash(t); h != "" {
		t.Fatalf("caddy runs %s before the marker", h)
	}
	_ = s.send(marker("e1", 3))
	_ = s.send(configMsg(simpleConfig("e1", 2, "gate.example.com", b2)))
	e.waitMetric(t, `sluice_pusher_configs_dropped_total{reason="older-than-marker"}`, 1)
	if h := e.caddyHash(t); h != "" {
		t.Fatalf("caddy runs %s, from a version older than the marker", h)
	}
	v3 := simpleConfig("e1", 3, "gate.example.com", b1)
	_ = s.send(configMsg(v3))
	e.waitConfig(t, v3)
	fake.waitAnswer(t, "ACK of version 3", func(a *configv1.StreamConfigRequest) bool { return a.GetAck().GetConfig().GetVersion() == 3 })
	if got := get(t, e.caddy.HTTPPort, "gate.example.com", "/"); got != "one" {
		t.Fatalf("after the marker: answered by %q, want one", got)
	}

	close(s.end) // the stream breaks
	s2 := fake.nextStream(t)
	_ = s2.send(configMsg(simpleConfig("e2", 1, "gate.example.com", b2)))
	e.waitMetric(t, `sluice_pusher_configs_dropped_total{reason="before-marker"}`, 2)
	if h := e.caddyHash(t); h != e.fp(t, v3) {
		t.Fatalf("caddy changed after a reset, before the new marker: %s", h)
	}
	if got := get(t, e.caddy.HTTPPort, "gate.example.com", "/"); got != "one" {
		t.Fatalf("after the reset: answered by %q, want one (unchanged)", got)
	}
	_ = s2.send(marker("e2", 1))
	v1e2 := simpleConfig("e2", 1, "gate.example.com", b2)
	_ = s2.send(configMsg(v1e2))
	e.waitConfig(t, v1e2)
	if got := get(t, e.caddy.HTTPPort, "gate.example.com", "/"); got != "two" {
		t.Fatalf("after the new marker: answered by %q, want two", got)
	}
}

func deltaMsg(d *configv1.ConfigDelta) *configv1.StreamConfigResponse {
	return &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Delta{Delta: d}}
}

// deltaTo is the delta that turns from into a state that also routes host to b.
func deltaTo(t *testing.T, from *configv1.Config, version uint64, host string, b *testenv.Backend) (*configv1.ConfigDelta, *contract.State) {
	t.Helper()
	st, err := contract.FromResources(from.GetResources(), from.GetHash())
	if err != nil {
		t.Fatal(err)
	}
	add := simpleConfig("", 0, host, b).GetResources()
	be := add.Backends[0]
	be.Name = "be-" + host
	add.VirtualHosts[0].Routes[0].Backends[0].Backend = be.Name
	st.Put(contract.VirtualHosts, host, add.VirtualHosts[0])
	st.Put(contract.Backends, be.Name, be)
	d := st.TakeDelta()
	d.Epoch, d.Version, d.BaseVersion, d.Hash = from.GetEpoch(), version, from.GetVersion(), st.Hash()
	return d, st
}

// docs/design.md's pusher gate with the delta config stream, against a real Caddy: a delta onto
// the version held is applied; a delta whose resulting hash differs (corrupt) or onto
// another base breaks the chain: the pusher asks for the complete state (Resync) and applies
// nothing from the broken chain until it comes; a version older than the one applied is
// never applied.
// servingOne starts two backends, a scripted translator and a pusher on Caddy with the
// module, and has Caddy serve host from the first backend at version 1 of epoch e1.
func servingOne(t *testing.T, host string) (b1, b2 *testenv.Backend, fake *fakeTranslator, e *env, s *fakeStream, v1 *configv1.Config) {
	t.Helper()
	n := testenv.SharedNet(t)
	var err error
	if b1, err = n.StartBackend("one"); err != nil {
		t.Fatal(err)
	}
	if b2, err = n.StartBackend("two"); err != nil {
		t.Fatal(err)
	}
	fake, addr := startFake(t)
	e = startPusher(t, addr)
	s = fake.nextStream(t)
	v1 = simpleConfig("e1", 1, host, b1)
	_ = s.send(marker("e1", 1))
	_ = s.send(configMsg(v1))
	e.waitConfig(t, v1)
	return b1, b2, fake, e, s, v1
}

func TestDeltaChainResyncAndNeverBack(t *testing.T) {
	b1, b2, fake, e, s, v1 := servingOne(t, "a.example.com")

	d2, st2 := deltaTo(t, v1, 2, "b.example.com", b2)
	v2 := &configv1.Config{Epoch: "e1", Version: 2, Hash: st2.Hash(), Resources: st2.Resources()}
	_ = s.send(deltaMsg(d2))
	e.waitConfig(t, v2)
	fake.waitAnswer(t, "ACK of version 2", func(a *configv1.StreamConfigRequest) bool { return a.GetAck().GetConfig().GetVersion() == 2 })
	if got := get(t, e.caddy.HTTPPort, "b.example.com", "/"); got != "two" {
		t.Fatalf("after the delta: b.example.com answered by %q, want two", got)
	}
	if got := get(t, e.caddy.HTTPPort, "a.example.com", "/"); got != "one" {
		t.Fatalf("after the delta: a.example.com answered by %q, want one", got)
	}

	// A corrupt delta: the right base, a wrong resulting hash.
	d3, _ := deltaTo(t, v2, 3, "c.example.com", b1)
	d3.Hash = strings.Repeat("0", 64)
	_ = s.send(deltaMsg(d3))
	resync := fake.waitAnswer(t, "a Resync", func(a *configv1.StreamConfigRequest) bool { return a.GetResync() != nil })
	if resync.GetResync().GetHave().GetVersion() != 2 || !strings.Contains(resync.GetResync().GetReason(), "hash") {
		t.Fatalf("Resync = %v, want it to hold version 2 and name the hash", resync.GetResync())
	}
	// A delta that would apply onto the corrupt one's result: nothing of the broken chain.
	d4, _ := deltaTo(t, v2, 4, "d.example.com", b1)
	d4.BaseVersion = 3
	_ = s.send(deltaMsg(d4))
	e.waitMetric(t, `sluice_pusher_configs_dropped_total{reason="broken-chain"}`, 2)
	if h := e.caddyHash(t); h != e.fp(t, v2) {
		t.Fatalf("caddy changed from a broken chain: %s", h)
	}

	// The complete state mends the chain; then a delta onto another base breaks it again.
	v4 := simpleConfig("e1", 4, "a.example.com", b2)
	_ = s.send(configMsg(v4))
	e.waitConfig(t, v4)
	d6, _ := deltaTo(t, v2, 6, "e.example.com", b1) // onto 2, but 4 is held
	_ = s.send(deltaMsg(d6))
	fake.waitAnswer(t, "a Resync for a delta onto another base", func(a *configv1.StreamConfigRequest) bool {
		return a.GetResync().GetHave().GetVersion() == 4 && strings.Contains(a.GetResync().GetReason(), "onto version 2")
	})

	// Never back: version 3, complete and valid, after version 4 was applied.
	_ = s.send(configMsg(simpleConfig("e1", 3, "a.example.com", b1)))
	e.waitMetric(t, `sluice_pusher_configs_dropped_total{reason="older-than-applied"}`, 1)
	if h := e.caddyHash(t); h != e.fp(t, v4) {
		t.Fatalf("caddy went back to an older version: %s", h)
	}
}

// A config Caddy rejects leaves the previous routes serving and is NACKed with Caddy's
// error; Caddy killed and restarted gets the last applied config again with no change
// upstream; SIGTERM to the pusher pushes nothing more (docs/design.md: a shutdown never
// pushes).
func TestRejectedConfigRestartAndShutdown(t *testing.T) {
	n := testenv.SharedNet(t)
	b1, err := n.StartBackend("steady")
	if err != nil {
		t.Fatal(err)
	}
	fake, addr := startFake(t)
	// The deletion guard, with a hold no test outlives, lets the pusher hold a config it
	// received and has not applied when it is told to stop.
	e := startPusher(t, addr, "--guard-max-delete-ratio", "0.5", "--guard-hold", "1h")
	s := fake.nextStream(t)
	good := simpleConfig("e1", 1, "keep.example.com", b1)
	_ = s.send(marker("e1", 1))
	_ = s.send(configMsg(good))
	e.waitConfig(t, good)

	bad := simpleConfig("e1", 2, "keep.example.com", b1)
	bad.Resources.Certificates = []*configv1.Certificate{{Name: "broken", CertificatePem: []byte("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"), PrivateKeyPem: []byte("x")}}
	bad.Resources.VirtualHosts[0].Certificate = "broken"
	bad.Hash = translate.Hash(bad.Resources)
	_ = s.send(configMsg(bad))
	nack := fake.waitAnswer(t, "NACK of version 2", func(a *configv1.StreamConfigRequest) bool { return a.GetNack().GetConfig().GetVersion() == 2 })
	if !strings.Contains(nack.GetNack().GetError(), "caddy rejected the config") {
		t.Fatalf("NACK error %q does not carry Caddy's answer", nack.GetNack().GetError())
	}
	if h := e.caddyHash(t); h != e.fp(t, good) {
		t.Fatalf("caddy runs %s after a rejected config, want the previous %s", h, e.fp(t, good))
	}
	if got := get(t, e.caddy.HTTPPort, "keep.example.com", "/"); got != "steady" {
		t.Fatalf("previous routes not served after a rejection: %q", got)
	}

	e.caddy.Kill()
	if err := e.caddy.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.waitConfig(t, good)
	if got := get(t, e.caddy.HTTPPort, "keep.example.com", "/"); got != "steady" {
		t.Fatalf("after a Caddy restart: %q", got)
	}

	// SIGTERM. The pusher ends its config stream as soon as it is told to stop, so no config
	// can be sent to it after it knows: what can be proven is (1) a config it received before
	// is not applied on the way out (version 3 removes every route, the guard holds it back,
	// and the pusher says so in a NACK), (2) it closes its config stream while it is still
	// running, without opening another, and (3) a config sent the moment it reports
	// stopping, racing that close, is not applied either, while it is still running nor
	// after it exited. A health Watch keeps the pusher's gRPC server draining (up to 5s), so
	// the pusher is still alive, shutting down, while (2) and (3) are checked.
	v3 := simpleConfig("e1", 3, "other.example.com", b1)
	_ = s.send(configMsg(v3))
	fake.waitAnswer(t, "the deletion guard's NACK of version 3", func(a *configv1.StreamConfigRequest) bool {
		return a.GetNack().GetConfig().GetVersion() == 3 && strings.Contains(a.GetNack().GetError(), "deletion guard")
	})
	health := e.watchHealth(t)
	mark := e.pusher.LogMark()
	if err := e.pusher.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	health.waitStatus(t, healthpb.HealthCheckResponse_NOT_SERVING) // the pusher is stopping
	v4 := simpleConfig("e1", 4, "keep.example.com", b1)
	v4.Resources.VirtualHosts = append(v4.Resources.VirtualHosts, simpleConfig("", 0, "also.example.com", b1).Resources.VirtualHosts...)
	v4.Hash = translate.Hash(v4.Resources)
	sendErr := s.send(configMsg(v4))
	select {
	case <-s.gone:
	case <-e.pusher.Done():
		t.Fatal("the pusher kept its config stream open until it exited")
	case <-time.After(30 * time.Second):
		t.Fatal("the pusher did not close its config stream after SIGTERM")
	}
	if e.pusher.Exited() {
		t.Fatal("the pusher exited while a health Watch held its gRPC server: the stream's end was not seen while it was stopping")
	}
	if h := e.caddyHash(t); h != e.fp(t, good) {
		t.Fatalf("caddy changed after the pusher's SIGTERM, while it was stopping: %s", h)
	}
	health.close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if code, err := e.pusher.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("pusher exit after SIGTERM: %d %v", code, err)
	}
	t.Logf("version 4, sent when the pusher reported stopping: send error %v", sendErr)
	select {
	case <-fake.streams:
		t.Fatal("the pusher opened a new config stream after SIGTERM")
	default:
	}
	if h := e.caddyHash(t); h != e.fp(t, good) {
		t.Fatalf("caddy changed after the pusher's SIGTERM: %s", h)
	}
	if logs := e.pusher.Logs()[mark:]; strings.Contains(logs, "config applied") {
		t.Fatalf("the pusher applied a config after SIGTERM:\n%s", logs)
	}
}

// healthWatch follows the pusher's gRPC health (service ""), which turns NOT_SERVING when
// the pusher starts to stop; while it is open, the pusher's gRPC server waits for it.
type healthWatch struct {
	statuses chan healthpb.HealthCheckResponse_ServingStatus
	cancel   context.CancelFunc
}

func (e *env) watchHealth(t *testing.T) *healthWatch {
	t.Helper()
	conn, err := grpcx.Dial(e.grpcAddr, grpcx.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	first, err := w.Recv()
	if err != nil {
		t.Fatalf("health watch: %v", err)
	}
	if first.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health watch: %v before SIGTERM, want SERVING", first.GetStatus())
	}
	h := &healthWatch{statuses: make(chan healthpb.HealthCheckResponse_ServingStatus, 8), cancel: cancel}
	go func() {
		defer close(h.statuses)
		for {
			m, err := w.Recv()
			if err != nil {
				return
			}
			select {
			case h.statuses <- m.GetStatus():
			case <-ctx.Done():
				return
			}
		}
	}()
	return h
}

func (h *healthWatch) waitStatus(t *testing.T, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case st, ok := <-h.statuses:
			if !ok {
				t.Fatalf("health watch ended before %v", want)
			}
			if st == want {
				return
			}
		case <-timeout:
			t.Fatalf("health never turned %v", want)
		}
	}
}

func (h *healthWatch) close() { h.cancel() }

// docs/design.md's "Real parts": every golden case of the translator (Ingress and Gateway
// API), and the data plane fixture that uses every field of a route
// (internal/contract/testdata/dataplane.json), served by a real Caddy, answers exactly as
// the reference (contract.OutcomeOf) says, over HTTP and (with SNI) HTTPS: the probes
// (contract.Probes) carry the method, headers and query each route needs, and the same
// requests without each of them; what matches nothing gets 404, a route without endpoints
// 503 (500 when it has an invalid share), a redirect its status and Location, a CORS
// preflight 204 with the policy's headers from the proxy, and a proxied request reaches a
// backend of the route with the rewritten Host and path and the modified request headers,
// and comes back with the CORS headers and the modified response headers.
func TestCaddyRoutesEveryGoldenCaseLikeTheReference(t *testing.T) {
	for _, target := range []string{"module", "load"} {
		t.Run(target, func(t *testing.T) { replayGoldens(t, target == "load") })
	}
}

func replayGoldens(t *testing.T, stock bool) {
	n := testenv.SharedNet(t)
	backends := map[string]*testenv.Backend{}
	for _, name := range []string{"web", "api", "v6", "empty", "tls", "mtls"} {
		start := n.StartBackend
		switch name {
		case "tls":
			start = n.StartTLSBackend // Services named tls speak TLS (backend-protocol HTTPS)
		case "mtls":
			start = n.StartMTLSBackend // and those named mtls require a client certificate
		}
		b, err := start(name)
		if err != nil {
			t.Fatal(err)
		}
		backends[name] = b
	}
	goldens, err := filepath.Glob("../translator/translate/testdata/*.yaml")
	if err != nil || len(goldens) == 0 {
		t.Fatalf("golden inputs: %v", err)
	}
	// The further listeners the cases' routes name, each bound to a loopback port of its own,
	// as a fleet's pushers are given them (--proxy-listener).
	bound := map[string]int{}
	var listenerFlags []string
	for _, path := range goldens {
		res := translateGolden(t, path, nil)
		for _, l := range contract.ListenersOf(res) {
			if _, ok := bound[l.Name]; ok {
				continue
			}
			a := testenv.Addrs(t, 1)[0]
			_, port, _ := net.SplitHostPort(a)
			bound[l.Name], _ = strconv.Atoi(port)
			listenerFlags = append(listenerFlags, "--proxy-listener", caddy.Listener{Name: l.Name, HTTPS: l.HTTPS, Listen: a}.Flag())
		}
	}
	fake, addr := startFake(t)
	e := startPusherOn(t, stock, addr, listenerFlags...)
	s := fake.nextStream(t)
	cases := append(goldens, "../internal/contract/testdata/dataplane.json")
	for i, path := range cases {
		t.Run(filepath.Base(path), func(t *testing.T) {
			var res *configv1.Resources
			if strings.HasSuffix(path, ".json") {
				res = fixture(t, path, backends)
			} else {
				res = translateGolden(t, path, backends)
			}
			cfg := &configv1.Config{Epoch: "golden", Version: uint64(i + 1), Hash: translate.Hash(res), Resources: res}
			if i == 0 {
				_ = s.send(marker("golden", 1))
			}
			_ = s.send(configMsg(cfg))
			// Stock Caddy cannot express every config (docs/translation.md): the renderer
			// refuses it, and the pusher NACKs it naming the routes' sources, which the
			// translator then leaves out.
			if _, _, err := caddy.Render(cfg, caddy.RenderOptions{}); stock && err != nil {
				var re *caddy.RenderError
				if !errors.As(err, &re) {
					t.Fatalf("render: %v", err)
				}
				nack := fake.waitAnswer(t, "the NACK of a config stock Caddy cannot express", func(a *configv1.StreamConfigRequest) bool {
					return a.GetNack().GetConfig().GetVersion() == cfg.GetVersion()
				})
				if len(nack.GetNack().GetObjectsAtFault()) == 0 || !strings.Contains(nack.GetNack().GetError(), re.Error()) {
					t.Errorf("NACK %v, want one naming the sources of %v", nack.GetNack(), re)
				}
				return
			}
			e.waitConfig(t, cfg)
			probes := 0
			// Every probe on the main listeners, over both schemes, and on each further
			// listener the routes name, over its scheme.
			type on struct {
				listener, scheme string
				port             int
			}
			ons := []on{{"", "http", e.caddy.HTTPPort}, {"", "https", e.caddy.HTTPSPort}}
			for _, l := range contract.ListenersOf(res) {
				ons = append(ons, on{l.Name, map[bool]string{false: "http", true: "https"}[l.HTTPS], bound[l.Name]})
			}
			for _, req := range contract.Probes(res) {
				for _, o := range ons {
					if o.scheme == "https" && !hasCertificate(res, req.Host) {
						continue
					}
					req.Scheme, req.Listener = o.scheme, o.listener
					if rt := contract.Match(res, req); rt.GetExternalAuth() != nil {
						// The authentication service is a test backend: /status/NNN answers NNN.
						req.AuthStatus = backend.StatusOf(rt.GetExternalAuth().GetPath())
					}
					got, err := send(t, o.port, req, leafFor(res, req.Host))
					if stock && errors.Is(err, syscall.ECONNRESET) {
						// Stock Caddy's /load replaces its servers, and the outgoing one may
						// still accept a connection it then resets; the module changes routes
						// in place and never does (docs/design.md, "The pusher gate"). The
						// probe is sent again on a new connection, and its answer is checked
						// as strictly.
						got, err = send(t, o.port, req, leafFor(res, req.Host))
					}
					if err != nil {
						t.Errorf("%s %s://%s%s?%s on listener %q: %v", req.Method, o.scheme, req.Host, req.Path, req.RawQuery, o.listener, err)
						continue
					}
					if want, have := expected(res, req, got); have != want {
						t.Errorf("%s %s://%s%s?%s %v on listener %q:\n got %s\nwant %s", req.Method, o.scheme, req.Host, req.Path, req.RawQuery, req.Header, o.listener, have, want)
					}
					probes++
				}
			}
			t.Logf("%d probes", probes)
		})
	}
}

// translateGolden translates the translator's golden case at path with its options
// (translate.CaseOptions), its endpoints pointed at backends when given.
func translateGolden(t *testing.T, path string, backends map[string]*testenv.Backend) *configv1.Resources {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	in, _, err := translate.LoadManifests(path, data)
	if err != nil {
		t.Fatal(err)
	}
	if backends != nil {
		pointAtBackends(&in, backends)
	}
	opts := translate.Options{IngressClass: "sluice", ControllerName: "sluice.io/ingress-controller", Now: time.Now()}
	if err := translate.CaseOptions(path, &opts); err != nil {
		t.Fatal(err)
	}
	return translate.Translate(in, opts)
}

// fixture is the data plane fixture with its backends at the test's backends (by Service
// name) and a certificate for its hosts.
func fixture(t *testing.T, path string, backends map[string]*testenv.Backend) *configv1.Resources {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	res := &configv1.Resources{}
	if err := protojson.Unmarshal(data, res); err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, vh := range res.GetVirtualHosts() {
		hosts = append(hosts, vh.GetHostname())
	}
	crt, key, err := pki.SelfSigned(hosts...)
	if err != nil {
		t.Fatal(err)
	}
	res.Certificates = []*configv1.Certificate{{Name: "dp/tls", CertificatePem: crt, PrivateKeyPem: key, DnsNames: hosts}}
	for _, b := range res.GetBackends() {
		if tb, ok := backends[b.GetService().GetName()]; ok {
			b.Endpoints = []*configv1.Endpoint{{Address: tb.Address, Port: uint32(tb.Port), Ready: true}}
		}
	}
	return res
}

// hasCertificate says whether HTTPS requests for host complete a handshake with both
// targets: the first host that applies and has a certificate (contract.CertificateFor) is
// the exact name, its one-label wildcard or the catch-all's default (stock Caddy's SNI
// match of a wildcard is one label deep, so deeper names are not probed over HTTPS).
func hasCertificate(res *configv1.Resources, host string) bool {
	for _, c := range contract.HostCandidates(host) {
		for _, vh := range res.GetVirtualHosts() {
			if vh.GetHostname() == c.Name && vh.GetCertificate() != "" {
				return !c.Deep
			}
		}
	}
	return false
}

// answered is what came back for one request, in the terms of contract.Outcome.
type answered struct {
	status                 int
	location, backend      string
	host, path             string
	header, responseHeader http.Header
}

// expected is what the reference says req gets, and shows both it and got in one form: the
// status; for a redirect its Location; for a proxied request the backend's Service (got's
// when it is one of the route's), the Host, path and headers the backend got (those the
// request carried or the route's modifier names) and the response headers the route's
// modifier names.
func expected(res *configv1.Resources, req contract.Request, got answered) (want, have string) {
	o := contract.OutcomeOf(res, req)
	show := func(a answered) string {
		switch a.status {
		case http.StatusOK:
		case http.StatusMovedPermanently, http.StatusFound:
			return fmt.Sprintf("%d %s", a.status, a.location)
		case http.StatusNoContent:
			return fmt.Sprintf("204 %s", shown(a.responseHeader, corsNames))
		default:
			return strconv.Itoa(a.status)
		}
		return fmt.Sprintf("200 %s %s %s %s %s", a.backend, a.host, a.path,
			shown(a.header, forwardedNames(o.Route, req)), shown(a.responseHeader, append(modifierNames(o.Route.GetResponseHeaders()), corsNames...)))
	}
	w := answered{status: o.Status, location: o.Location, responseHeader: o.Header}
	if o.InvalidShare && o.Status == http.StatusOK && got.status == http.StatusInternalServerError {
		w = answered{status: got.status} // the route's invalid share was drawn
	}
	if w.status == http.StatusOK {
		service := func(name string) string {
			for _, b := range res.GetBackends() {
				if b.GetName() == name {
					return b.GetService().GetName()
				}
			}
			return ""
		}
		// Any backend of the route may answer, with what the reference says that backend
		// receives (the route's and then its own request header modifier).
		var candidates []answered
		var services []string
		for _, f := range o.Forwards {
			c := w
			c.backend, c.host, c.path, c.header = service(f.Backend), f.Host, f.Path, f.Header
			c.responseHeader = http.Header{"Content-Type": {"application/json"}, "X-Sluice-Backend": {c.backend}}
			contract.ApplyResponseCORS(o.Route.GetCors(), req, c.responseHeader)
			contract.ModifyHeaders(o.Route.GetResponseHeaders(), c.responseHeader)
			candidates = append(candidates, c)
			services = append(services, c.backend)
		}
		w = candidates[0]
		w.backend = strings.Join(services, "|")
		for _, c := range candidates {
			if show(c) == show(got) {
				w = c
				break
			}
		}
	}
	return show(w), show(got)
}

// corsNames are the response headers a CORS policy sets, compared on every answer (a route
// without a policy must send none of them).
var corsNames = []string{"Vary", "Access-Control-Allow-Origin", "Access-Control-Allow-Credentials", "Access-Control-Allow-Methods",
	"Access-Control-Allow-Headers", "Access-Control-Expose-Headers", "Access-Control-Max-Age"}

// forwardedNames are the request headers worth comparing: those the request carried and
// those the route's and its backends' request modifiers name (a proxy adds others of its
// own).
func forwardedNames(rt *configv1.Route, req contract.Request) []string {
	var out []string
	for n := range req.Header {
		out = append(out, n)
	}
	for _, wb := range rt.GetBackends() {
		out = append(out, modifierNames(wb.GetRequestHeaders())...)
	}
	return append(out, modifierNames(rt.GetRequestHeaders())...)
}

func modifierNames(m *configv1.HeaderModifier) []string {
	out := append([]string(nil), m.GetRemove()...)
	for _, h := range append(append([]*configv1.HeaderValue(nil), m.GetSet()...), m.GetAdd()...) {
		out = append(out, h.GetName())
	}
	return out
}

// shown is h restricted to names, in a stable form.
func shown(h http.Header, names []string) string {
	var out []string
	for _, n := range names {
		out = append(out, fmt.Sprintf("%s=%q", http.CanonicalHeaderKey(n), h.Values(n)))
	}
	sort.Strings(out)
	return "[" + strings.Join(slices.Compact(out), " ") + "]"
}

// send sends req to Caddy (not following redirects) and says what came back.
// leafFor is the DER of the leaf of the certificate a handshake for host gets
// (contract.CertificateFor), nil for none.
func leafFor(res *configv1.Resources, host string) []byte {
	name := contract.CertificateFor(res, host)
	for _, c := range res.GetCertificates() {
		if c.GetName() == name {
			if b, _ := pem.Decode(c.GetCertificatePem()); b != nil {
				return b.Bytes
			}
		}
	}
	return nil
}

// send sends req to Caddy; over HTTPS the handshake must present leaf (the certificate the
// reference names, which for the catch-all's default need not cover the name), else a
// certificate valid for the host.
func send(t *testing.T, port int, req contract.Request, leaf []byte) (answered, error) {
	t.Helper()
	target := req.Path
	if req.RawQuery != "" {
		target += "?" + req.RawQuery
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: req.Host, InsecureSkipVerify: true, // the golden certificate's CA is not kept
		VerifyConnection: func(cs tls.ConnectionState) error {
			if leaf != nil {
				if !bytes.Equal(cs.PeerCertificates[0].Raw, leaf) {
					return fmt.Errorf("served certificate %v, not the one the reference names", cs.PeerCertificates[0].DNSNames)
				}
				return nil
			}
			return cs.PeerCertificates[0].VerifyHostname(req.Host)
		}}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Timeout: 10 * time.Second, Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var reqBody io.Reader
	if req.BodySize > 0 {
		reqBody = bytes.NewReader(bytes.Repeat([]byte("x"), int(req.BodySize)))
	}
	// From 127.0.0.1, the probes' client address (contract.ProbeClient).
	r, err := http.NewRequest(req.Method, fmt.Sprintf("%s://127.0.0.1:%d%s", req.Scheme, port, target), reqBody)
	if err != nil {
		return answered{}, err
	}
	r.Host = req.Host
	r.Header = req.Header.Clone()
	resp, err := c.Do(r)
	if err != nil {
		return answered{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return answered{}, err
	}
	a := answered{status: resp.StatusCode, location: resp.Header.Get("Location")}
	if resp.StatusCode == http.StatusNoContent {
		a.responseHeader = resp.Header
	}
	if resp.StatusCode != http.StatusOK {
		return a, nil
	}
	var ba testenv.BackendAnswer
	if err := json.Unmarshal(body, &ba); err != nil {
		return answered{}, fmt.Errorf("unparsable answer %q: %w", body, err)
	}
	a.backend, a.host, a.path, a.header, a.responseHeader = ba.Backend, ba.Host, ba.Path, ba.Header, resp.Header
	return a, nil
}

// pointAtBackends replaces every EndpointSlice with one that points each Service port at the
// backend named after the Service (none for Services named "empty" or without a backend).
func pointAtBackends(in *translate.Input, backends map[string]*testenv.Backend) {
	in.EndpointSlices = nil
	for _, svc := range in.Services {
		b, ok := backends[svc.Name]
		if !ok || svc.Name == "empty" || svc.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		var ports []discoveryv1.EndpointPort
		for _, p := range svc.Spec.Ports {
			ports = append(ports, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Port: ptr.To(int32(b.Port))})
		}
		in.EndpointSlices = append(in.EndpointSlices, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: svc.Name + "-test", Namespace: svc.Namespace, Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}},
			AddressType: discoveryv1.AddressTypeIPv4, Ports: ports,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{b.Address}}},
		})
	}
}

func getTLS(t *testing.T, port int, host, path string) string {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: host, InsecureSkipVerify: true, // the golden certificate's CA is not kept
		VerifyConnection: func(cs tls.ConnectionState) error { return cs.PeerCertificates[0].VerifyHostname(host) }}}
	c := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d%s", port, path), nil)
	req.Host = host
	resp, err := c.Do(req)
	if err != nil {
		return "error: " + err.Error()
	}
	return answer(resp)
}

// docs/design.md, "The config stream", against a real Caddy with Sluice's module: 1,000 successive route changes, each
// seen at once (the first request after the pusher's ACK) on a kept-alive HTTP/1.1
// connection and on a fresh one, with no failed request and no connection closed by Caddy:
// the module swaps its table in place and Caddy never reloads; its own config
// (GET /config/) stays byte-identical throughout.
func TestModuleChangesRoutesInPlaceWithoutReload(t *testing.T) {
	one, two, fake, e, s, v1 := servingOne(t, "keep.example.com")
	configBefore := e.caddyConfig(t)

	var dials int
	var mu sync.Mutex
	kept := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1,
		DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			mu.Lock()
			dials++
			mu.Unlock()
			var d net.Dialer
			return d.DialContext(ctx, network, a)
		}}}
	fresh := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	ask := func(c *http.Client, host string) string {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", e.caddy.HTTPPort), nil)
		req.Host = host
		resp, err := c.Do(req)
		if err != nil {
			return "error: " + err.Error()
		}
		return answer(resp)
	}
	if got := ask(kept, "keep.example.com"); got != "one" {
		t.Fatalf("before the changes: %q", got)
	}

	cur := v1
	for i := 1; i <= 1000; i++ {
		// Each change moves keep.example.com to the other backend and adds a host.
		b := map[bool]*testenv.Backend{true: two, false: one}[i%2 == 1]
		st, err := contract.FromResources(cur.GetResources(), cur.GetHash())
		if err != nil {
			t.Fatal(err)
		}
		be := &configv1.Backend{Name: "be", Endpoints: []*configv1.Endpoint{{Address: b.Address, Port: uint32(b.Port), Ready: true}}}
		st.Put(contract.Backends, "be", be)
		host := fmt.Sprintf("h%d.example.com", i)
		st.Put(contract.VirtualHosts, host, &configv1.VirtualHost{Hostname: host, Routes: []*configv1.Route{{Name: host,
			Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"}, Backends: []*configv1.WeightedBackend{{Backend: "be", Weight: 1}}}}})
		d := st.TakeDelta()
		d.Epoch, d.Version, d.BaseVersion, d.Hash = "e1", uint64(i+1), cur.GetVersion(), st.Hash()
		if err := s.send(deltaMsg(d)); err != nil {
			t.Fatal(err)
		}
		fake.waitAnswer(t, fmt.Sprintf("ACK of version %d", i+1), func(a *configv1.StreamConfigRequest) bool { return a.GetAck().GetConfig().GetVersion() == uint64(i+1) })
		for _, c := range []struct {
			name   string
			client *http.Client
		}{{"kept-alive", kept}, {"fresh", fresh}} {
			if got := ask(c.client, "keep.example.com"); got != b.Name {
				t.Fatalf("change %d, %s connection: keep.example.com answered by %q, want %q", i, c.name, got, b.Name)
			}
			if got := ask(c.client, host); got != b.Name {
				t.Fatalf("change %d, %s connection: the new host %s answered %q, want %q", i, c.name, host, got, b.Name)
			}
		}
		cur = &configv1.Config{Epoch: "e1", Version: uint64(i + 1), Hash: st.Hash(), Resources: st.Resources()}
	}
	mu.Lock()
	defer mu.Unlock()
	if dials != 1 {
		t.Fatalf("the kept-alive client dialed %d times over 1,000 changes: Caddy closed its connection", dials)
	}
	if after := e.caddyConfig(t); !bytes.Equal(after, configBefore) {
		t.Fatalf("Caddy's own config changed over the route changes:\nbefore %s\nafter  %s", configBefore, after)
	}
	if n := strings.Count(e.pusher.Logs(), "data plane does not run the delta's base"); n != 0 {
		t.Fatalf("the pusher fell back to the complete state %d times", n)
	}
}

// caddyConfig is what GET /config/ answers.
func (e *env) caddyConfig(t *testing.T) []byte {
	t.Helper()
	resp, err := http.Get(e.caddy.AdminURL + "/config/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// servedCert is the serial number of the certificate Caddy presents for a server name.
func servedCert(t *testing.T, port int, host string) string {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", fmt.Sprintf("127.0.0.1:%d", port),
		&tls.Config{ServerName: host, InsecureSkipVerify: true}) // self-signed in the test
	if err != nil {
		return "error: " + err.Error()
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// docs/design.md, "The config stream": certificates come from the module's table at handshake time, so a renewed Secret
// (the same certificate name, a new certificate) is presented on the next handshake, with no
// reload: Caddy's own config stays byte-identical.
func TestModuleServesRenewedCertificateWithoutReload(t *testing.T) {
	n := testenv.SharedNet(t)
	one, err := n.StartBackend("one")
	if err != nil {
		t.Fatal(err)
	}
	fake, addr := startFake(t)
	e := startPusher(t, addr)
	s := fake.nextStream(t)
	const host = "tls.example.com"
	issue := func() (*configv1.Certificate, string) {
		t.Helper()
		crt, key, err := pki.SelfSigned(host)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(crt, key)
		if err != nil {
			t.Fatal(err)
		}
		return &configv1.Certificate{Name: "app/tls", CertificatePem: crt, PrivateKeyPem: key, DnsNames: []string{host}}, pair.Leaf.SerialNumber.String()
	}
	first, firstSerial := issue()
	v1 := simpleConfig("e1", 1, host, one)
	v1.Resources.VirtualHosts[0].Certificate = first.GetName()
	v1.Resources.Certificates = []*configv1.Certificate{first}
	v1.Hash = translate.Hash(v1.Resources)
	_ = s.send(marker("e1", 1))
	_ = s.send(configMsg(v1))
	e.waitConfig(t, v1)
	before := e.caddyConfig(t)
	if got := servedCert(t, e.caddy.HTTPSPort, host); got != firstSerial {
		t.Fatalf("served certificate %s, want %s", got, firstSerial)
	}
	if got := getTLS(t, e.caddy.HTTPSPort, host, "/"); got != "one" {
		t.Fatalf("https %s answered %q", host, got)
	}
	if got := servedCert(t, e.caddy.HTTPSPort, "other.example.com"); !strings.HasPrefix(got, "error:") {
		t.Fatalf("a name without a certificate got one (%s), want the handshake to fail", got)
	}

	renewed, renewedSerial := issue()
	st, err := contract.FromResources(v1.GetResources(), v1.GetHash())
	if err != nil {
		t.Fatal(err)
	}
	st.Put(contract.Certificates, renewed.GetName(), renewed)
	d := st.TakeDelta()
	d.Epoch, d.Version, d.BaseVersion, d.Hash = "e1", 2, 1, st.Hash()
	_ = s.send(deltaMsg(d))
	fake.waitAnswer(t, "ACK of version 2", func(a *configv1.StreamConfigRequest) bool { return a.GetAck().GetConfig().GetVersion() == 2 })
	if got := servedCert(t, e.caddy.HTTPSPort, host); got != renewedSerial {
		t.Fatalf("after the renewal: served certificate %s, want the renewed %s", got, renewedSerial)
	}
	if after := e.caddyConfig(t); !bytes.Equal(after, before) {
		t.Fatalf("Caddy's own config changed for a renewed certificate:\nbefore %s\nafter  %s", before, after)
	}
}
