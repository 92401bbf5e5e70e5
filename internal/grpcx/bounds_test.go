package grpcx

import (
	"context"
	"crypto/tls"
	"errors"
	"maps"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/internal/identity"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// countingListener counts the connections the server accepted: with TLS on, each is one
// handshake.
type countingListener struct {
	net.Listener
	accepted atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// watchHealth opens a Health.Watch stream on conn and reads its first answer.
func watchHealth(ctx context.Context, conn *grpc.ClientConn) (healthpb.Health_WatchClient, error) {
	w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return nil, err
	}
	if _, err := w.Recv(); err != nil {
		return nil, err
	}
	return w, nil
}

// Connections do not outlive trust: past its age a connection gets a GOAWAY, a stream still
// open on it after the grace ends with UNAVAILABLE, and the client's next stream goes over a
// new connection with a full TLS handshake. Once the server's CA bundle no longer trusts the
// client's certificate, that is the last stream it is served.
func TestConnectionAgeEndsStreamsAndTheClientHandshakesAgain(t *testing.T) {
	const age, grace = 500 * time.Millisecond, 250 * time.Millisecond
	dir := t.TempDir()
	ca, other := newCA(t, "ca"), newCA(t, "other")
	sf := files(t, dir, "server", ca, "spiffe://cluster.local/sluice/translator/sluice", ca)
	sf.ReloadInterval = -1 // every handshake reads the CA bundle
	cf := files(t, dir, "client", ca, "spiffe://cluster.local/sluice/pusher", ca)
	cf.ServerName, cf.ExpectRole = "localhost", identity.Translator

	srv, err := NewServer(ServerConfig{Logger: hclog.NewNullLogger(), TLS: sf, MaxConnectionAge: age, MaxConnectionAgeGrace: grace})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := &countingListener{Listener: inner}
	go srv.Server.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := Dial(lis.Addr().String(), ClientConfig{TLS: cf})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// cut opens a stream, as the pushers' and translators' loops do, and waits for the
	// connection's age to end it.
	cut := func() (handshakes int32) {
		t.Helper()
		w, err := watchHealth(ctx, conn)
		if err != nil {
			t.Fatalf("open a stream: %v", err)
		}
		opened, handshakes := time.Now(), lis.accepted.Load()
		_, err = w.Recv()
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("the stream ended with %v, want UNAVAILABLE once the connection's age and grace passed", err)
		}
		if ctx.Err() != nil {
			t.Fatal("the stream was never ended by the connection's age")
		}
		// The stream was open when the GOAWAY came, so the grace was its to finish in (half
		// of it, for the time the first answer took to be read).
		if d := time.Since(opened); d < grace/2 {
			t.Fatalf("the stream ended %s after it opened, within the grace it had (%s)", d, grace)
		}
		return handshakes
	}

	before := cut()
	// The client's next stream goes over a new connection, with a full handshake: the client
	// keeps no TLS session to resume, so it presents and the server verifies its certificate.
	w, err := watchHealth(ctx, conn)
	if err != nil {
		t.Fatalf("the client did not get a stream again after the GOAWAY: %v", err)
	}
	if got := lis.accepted.Load(); got <= before {
		t.Fatalf("the stream after the GOAWAY went over a connection the server already had (%d accepted, %d before)", got, before)
	}
	var p peer.Peer
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p)); err != nil {
		t.Fatal(err)
	}
	if info, ok := p.AuthInfo.(credentials.TLSInfo); !ok || info.State.DidResume || !info.State.HandshakeComplete {
		t.Fatalf("the new connection did not make a full TLS handshake: %+v", p.AuthInfo)
	}

	// The CA that issued the client's certificate is dropped from the server's bundle. The
	// stream open now is served until its connection's age; then the client is refused.
	if err := os.WriteFile(sf.CA, other.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("the stream opened before the CA was dropped ended with %v, want UNAVAILABLE at the connection's age", err)
	}
	testenv.Eventually(t, 10*time.Second, "the client to be refused a stream once its CA is no longer trusted", func() (bool, error) {
		sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
		defer scancel()
		_, err := watchHealth(sctx, conn)
		if err == nil {
			return false, testenv.Permanent(errors.New("the server opened a stream for a client certificate its CA bundle no longer trusts"))
		}
		return status.Code(err) == codes.Unavailable, err
	})
}

// Stream caps are per role: operators holding every slot they have do not stop a translator
// from streaming, and the operator's next stream is refused with a message naming the
// method, the role and its cap, and counted with the method and the role.
func TestAnOperatorAtItsCapDoesNotStopATranslator(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "ca")
	// Health.Watch stands in for Watch: translators with full access, operators read-only.
	policy := identity.DefaultPolicy()
	policy[identity.HealthWatch] = identity.Rule{Full: []identity.Role{identity.Translator}, Redacted: []identity.Role{identity.Operator}}
	var mu sync.Mutex
	limited := map[[2]string]int{}
	_, addr := serve(t, ServerConfig{TLS: files(t, dir, "server", ca, "spiffe://cluster.local/sluice/watcher", ca), Policy: policy,
		StreamLimits: map[string]StreamLimit{identity.HealthWatch: LimitByAccess(policy, identity.HealthWatch, 3, 2)},
		OnLimited:    func(method, role string) { mu.Lock(); limited[[2]string{method, role}]++; mu.Unlock() }})
	dial := func(uri string) *grpc.ClientConn {
		t.Helper()
		cf := files(t, dir, strings.NewReplacer("/", "-", ":", "-").Replace(uri), ca, uri, ca)
		cf.ServerName, cf.ExpectRole = "localhost", identity.Watcher
		conn, err := Dial(addr, ClientConfig{TLS: cf})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Two sluicectl sessions on their own connections.
	ops := []*grpc.ClientConn{dial("spiffe://cluster.local/sluice/operator"), dial("spiffe://cluster.local/sluice/operator")}
	for i := range 2 {
		if _, err := watchHealth(ctx, ops[i]); err != nil {
			t.Fatalf("operator stream %d: %v", i, err)
		}
	}
	_, err := watchHealth(ctx, ops[0])
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("the operator's third stream: %v, want RESOURCE_EXHAUSTED", err)
	}
	for _, want := range []string{identity.HealthWatch, "role operator", "2 concurrent streams"} {
		if !strings.Contains(status.Convert(err).Message(), want) {
			t.Errorf("the refusal %q does not say %q", status.Convert(err).Message(), want)
		}
	}
	tr := dial("spiffe://cluster.local/sluice/translator/sluice")
	for i := range 3 {
		if _, err := watchHealth(ctx, tr); err != nil {
			t.Fatalf("translator stream %d while the operators hold their cap: %v", i, err)
		}
	}
	if _, err := watchHealth(ctx, tr); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "role translator already holds 3") {
		t.Fatalf("the translator's fourth stream: %v, want RESOURCE_EXHAUSTED naming the role translator and its cap 3", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := map[[2]string]int{{identity.HealthWatch, "operator"}: 1, {identity.HealthWatch, "translator"}: 1}; !maps.Equal(limited, want) {
		t.Errorf("limited streams counted %v, want %v", limited, want)
	}
}

// LimitByAccess gives the roles with full access to a method, and anonymous callers, the
// full cap, and the others the read-only one.
func TestLimitByAccessFollowsThePolicy(t *testing.T) {
	l := LimitByAccess(identity.DefaultPolicy(), watchv1.WatchService_Watch_FullMethodName, 64, 8)
	want := map[identity.Role]int{identity.Translator: 64, Anonymous: 64, identity.Operator: 8, identity.Pusher: 8, identity.Watcher: 8, "someone-else": 8}
	for role, n := range want {
		if got := l.capOf(role); got != n {
			t.Errorf("cap of %s on Watch: %d, want %d", role, got, n)
		}
	}
}

// Health.Watch is capped on every server without being asked (HealthWatchStreams per role):
// any identity may open it.
func TestHealthWatchIsCappedByDefault(t *testing.T) {
	_, addr := serve(t, ServerConfig{})
	conn, err := Dial(addr, ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range HealthWatchStreams {
		if _, err := watchHealth(ctx, conn); err != nil {
			t.Fatalf("Health.Watch stream %d of %d: %v", i+1, HealthWatchStreams, err)
		}
	}
	if _, err := watchHealth(ctx, conn); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), identity.HealthWatch) {
		t.Fatalf("Health.Watch stream %d: %v, want RESOURCE_EXHAUSTED naming the method", HealthWatchStreams+1, err)
	}
}

// One connection carries at most MaxConcurrentStreams streams: the client's next stream waits
// for one of them to end (it is not refused, and never reaches the server), while another
// connection still opens streams.
func TestStreamsPerConnectionAreBounded(t *testing.T) {
	_, addr := serve(t, ServerConfig{MaxConcurrentStreams: 2})
	dial := func() *grpc.ClientConn {
		t.Helper()
		conn, err := Dial(addr, ClientConfig{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	conn := dial()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	firstCtx, endFirst := context.WithCancel(ctx)
	defer endFirst()
	if _, err := watchHealth(firstCtx, conn); err != nil {
		t.Fatal(err)
	}
	if _, err := watchHealth(ctx, conn); err != nil {
		t.Fatal(err)
	}
	// The third stream on the connection waits for the connection's stream quota: it does
	// not open within its deadline.
	waitCtx, endWait := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := watchHealth(waitCtx, conn)
	endWait()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a third stream on one connection: %v, want it to wait (DEADLINE_EXCEEDED) while two are open", err)
	}
	if _, err := watchHealth(ctx, dial()); err != nil {
		t.Fatalf("a stream on another connection: %v", err)
	}
	// Once one of the two ends, the connection carries a new one.
	endFirst()
	if _, err := watchHealth(ctx, conn); err != nil {
		t.Fatalf("a stream once one of the two ended: %v", err)
	}
}

// The server never resumes a TLS session, even for a client that keeps one: each connection
// verifies the client's certificate against the CA bundle of the moment.
func TestServerNeverResumesATLSSession(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "ca")
	_, addr := serve(t, ServerConfig{TLS: files(t, dir, "server", ca, "spiffe://cluster.local/sluice/translator/sluice", ca)})
	cf := files(t, dir, "client", ca, "spiffe://cluster.local/sluice/pusher", ca)
	cf.ServerName = "localhost"
	tlsCfg, err := cf.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	for i := range 2 {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)))
		if err != nil {
			t.Fatal(err)
		}
		var p peer.Peer
		_, err = healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Peer(&p))
		conn.Close()
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		if info, ok := p.AuthInfo.(credentials.TLSInfo); !ok || info.State.DidResume {
			t.Fatalf("connection %d resumed a TLS session: %+v", i, p.AuthInfo)
		}
	}
}
