package grpcx

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	"github.com/sluice-io/sluice/internal/pki"
)

// files writes a certificate for uri (empty: none) from ca, and the CA bundle of cas.
func files(t *testing.T, dir, name string, ca *pki.CA, uri string, bundle ...*pki.CA) TLSFiles {
	t.Helper()
	f := TLSFiles{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key"), CA: filepath.Join(dir, name+"-ca.crt")}
	writeFiles(t, f, ca, uri, bundle...)
	return f
}

func writeFiles(t *testing.T, f TLSFiles, ca *pki.CA, uri string, bundle ...*pki.CA) {
	t.Helper()
	o := pki.CertOptions{CommonName: "test", DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true, Client: true}
	if uri != "" {
		o.URIs = []string{uri}
	}
	crt, key, err := ca.Issue(o)
	if err != nil {
		t.Fatal(err)
	}
	var pem []byte
	for _, c := range bundle {
		pem = append(pem, c.CertPEM...)
	}
	for path, b := range map[string][]byte{f.Cert: crt, f.Key: key, f.CA: pem} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func newCA(t *testing.T, name string) *pki.CA {
	t.Helper()
	ca, err := pki.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// serve starts a server on a loopback port with the services register adds, stopped when the
// test ends.
func serve(t *testing.T, cfg ServerConfig, register ...func(*grpc.Server)) (*Server, string) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range register {
		r(srv.Server)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Server.Serve(lis)
	t.Cleanup(srv.Stop)
	return srv, lis.Addr().String()
}

// No accidental plaintext (docs/operations.md, "Security model"): off loopback, a server or a client without mutual TLS
// refuses to start unless --insecure says so, and then warns; loopback is allowed as it is.
func TestNoPlaintextOffLoopbackUnlessInsecure(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "ca")
	mtls := files(t, dir, "w", ca, "spiffe://cluster.local/sluice/watcher", ca)
	serverOnly := mtls
	serverOnly.CA = ""
	cases := []struct {
		name     string
		addr     string
		tls      TLSFiles
		insecure bool
		refused  bool
		warned   bool
	}{
		{"plaintext off loopback", "0.0.0.0:18000", TLSFiles{}, false, true, false},
		{"plaintext to a host name", "sluice-watcher:18000", TLSFiles{}, false, true, false},
		{"server-only TLS off loopback", "10.1.2.3:18000", serverOnly, false, true, false},
		{"plaintext off loopback, --insecure", "0.0.0.0:18000", TLSFiles{}, true, false, true},
		{"mutual TLS off loopback", "10.1.2.3:18000", mtls, false, false, false},
		{"plaintext on loopback", "127.0.0.1:18000", TLSFiles{}, false, false, false},
		{"plaintext on localhost", "localhost:1", TLSFiles{}, false, false, false},
		{"plaintext on ::1", "[::1]:1", TLSFiles{}, false, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Warn})
			_, serr := NewServer(ServerConfig{Logger: log, Address: c.addr, TLS: c.tls, Insecure: c.insecure})
			conn, cerr := Dial(c.addr, ClientConfig{Logger: log, TLS: c.tls, Insecure: c.insecure})
			if conn != nil {
				conn.Close()
			}
			for side, err := range map[string]error{"server": serr, "client": cerr} {
				if c.refused != (err != nil) || (err != nil && !errors.Is(err, ErrInsecure)) {
					t.Errorf("%s: error %v, want refused=%v", side, err, c.refused)
				}
			}
			if warned := strings.Count(buf.String(), "insecure:"); c.warned && warned != 2 || !c.warned && warned != 0 {
				t.Errorf("%d warnings, want them=%v:\n%s", warned, c.warned, buf.String())
			}
		})
	}
}

// Authorization by identity: with mutual TLS every call is checked against the policy; a
// certificate from the CA that names no Sluice identity, or a role the method does not
// allow, gets PERMISSION_DENIED, logged once per identity and method and counted each time.
func TestCallsAreAuthorizedByTheCallersRole(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "ca")
	srvFiles := files(t, dir, "server", ca, "spiffe://cluster.local/sluice/watcher", ca)
	var buf bytes.Buffer
	var mu sync.Mutex
	denied := map[string]int{}
	_, addr := serve(t, ServerConfig{Logger: hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Warn}), TLS: srvFiles,
		OnDenied: func(method, role string) { mu.Lock(); denied[role]++; mu.Unlock() }})
	cases := []struct {
		name string
		uri  string
		want codes.Code
	}{
		{"pusher may check health", "spiffe://cluster.local/sluice/pusher", codes.OK},
		{"operator may check health", "spiffe://cluster.local/sluice/operator", codes.OK},
		{"no identity", "", codes.PermissionDenied},
		{"another trust domain", "spiffe://evil.example/sluice/translator/sluice", codes.PermissionDenied},
		{"unknown role", "spiffe://cluster.local/sluice/admin", codes.PermissionDenied},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cf := files(t, dir, "client", ca, c.uri, ca)
			cf.ServerName, cf.ExpectRole = "localhost", identity.Watcher
			conn, err := Dial(addr, ClientConfig{TLS: cf})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			for i := 0; i < 3; i++ {
				_, err = healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
				if status.Code(err) != c.want {
					t.Fatalf("call %d: %v, want %s", i, err, c.want)
				}
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if denied["none"] != 9 {
		t.Errorf("denials counted %v, want 9 for role none (3 calls x 3 callers)", denied)
	}
	if n := strings.Count(buf.String(), "call denied"); n != 3 {
		t.Errorf("%d denials logged, want one per identity and method (3):\n%s", n, buf.String())
	}
}

// A client that expects a role refuses a server whose certificate names another: a pusher's
// certificate cannot stand in for the translator.
func TestClientRefusesAServerOfAnotherRole(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "ca")
	_, addr := serve(t, ServerConfig{TLS: files(t, dir, "server", ca, "spiffe://cluster.local/sluice/pusher", ca)})
	cf := files(t, dir, "client", ca, "spiffe://cluster.local/sluice/pusher", ca)
	cf.ServerName, cf.ExpectRole = "localhost", identity.Translator
	conn, err := Dial(addr, ClientConfig{TLS: cf})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "not a Sluice translator") {
		t.Fatalf("got %v, want the handshake refused: not a Sluice translator", err)
	}
}

// Rotation (docs/operations.md, "Security model"): every certificate and CA is replaced mid-stream. The open stream
// keeps going; new connections present and verify the new certificates; a peer still holding
// a certificate of the old CA is refused once the CA bundle no longer has it; and a rotation
// caught half-written keeps the previous files.
func TestRotationMidStreamNewConnectionsUseTheNewCertificates(t *testing.T) {
	dir := t.TempDir()
	oldCA, newCAx := newCA(t, "old"), newCA(t, "new")
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func() { mu.Lock(); now = now.Add(2 * DefaultReloadInterval); mu.Unlock() }
	sf := files(t, dir, "server", oldCA, "spiffe://cluster.local/sluice/translator/sluice", oldCA)
	cf := files(t, dir, "client", oldCA, "spiffe://cluster.local/sluice/pusher", oldCA)
	sf.Now, cf.Now = clock, clock
	cf.ServerName, cf.ExpectRole = "localhost", identity.Translator

	srv, err := NewServer(ServerConfig{Logger: hclog.NewNullLogger(), TLS: sf})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Server.Serve(lis)
	defer srv.Stop()

	dial := func() *grpc.ClientConn {
		t.Helper()
		conn, err := Dial(lis.Addr().String(), ClientConfig{TLS: cf})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	serverCA := func(conn *grpc.ClientConn) (string, error) {
		var p peer.Peer
		_, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Peer(&p))
		if err != nil {
			return "", err
		}
		return p.AuthInfo.(credentials.TLSInfo).State.PeerCertificates[0].Issuer.CommonName, nil
	}

	// An open stream before the rotation.
	old := dial()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := healthpb.NewHealthClient(old).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := w.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first health message: %v %v", m, err)
	}

	// A half-written rotation: the new certificate without its key. It is not used.
	half := newCAx
	crt, _, err := half.Issue(pki.CertOptions{CommonName: "test", DNSNames: []string{"localhost"}, Server: true, Client: true,
		URIs: []string{"spiffe://cluster.local/sluice/translator/sluice"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sf.Cert, crt, 0o600); err != nil {
		t.Fatal(err)
	}
	advance()
	if got, err := serverCA(dial()); err != nil || got != "old" {
		t.Fatalf("during a half-written rotation the server presented a certificate of %q (%v), want the previous one (old)", got, err)
	}

	// The whole rotation: new certificates, and CA bundles that hold only the new CA. A
	// client made before it connects only now, within the reload interval: both sides
	// still use what they read.
	early := dial()
	writeFiles(t, sf, newCAx, "spiffe://cluster.local/sluice/translator/sluice", newCAx)
	writeFiles(t, cf, newCAx, "spiffe://cluster.local/sluice/pusher", newCAx)
	if got, err := serverCA(early); err != nil || got != "old" {
		t.Fatalf("before the reload interval passed the server presented %q (%v), want the old certificate still", got, err)
	}
	advance()
	if got, err := serverCA(dial()); err != nil || got != "new" {
		t.Fatalf("after the rotation a new connection got a certificate of %q (%v), want the new CA's", got, err)
	}

	// The stream opened before the rotation still delivers.
	srv.Health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	if m, err := w.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("the stream opened before the rotation: %v %v, want it to keep delivering", m, err)
	}

	// A client that still presents a certificate of the old CA is refused now.
	stale := files(t, dir, "stale", oldCA, "spiffe://cluster.local/sluice/pusher", newCAx)
	stale.ServerName = "localhost"
	conn, err := Dial(lis.Addr().String(), ClientConfig{TLS: stale})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := serverCA(conn); err == nil {
		t.Fatal("a client certificate of the old CA was accepted after the CA bundle dropped it")
	}
}

// Stream caps: past the limit of a method, a stream gets RESOURCE_EXHAUSTED; when one
// ends, another may open. Without mutual TLS every caller counts as one role, anonymous.
func TestStreamLimitRefusesStreamsOverTheCap(t *testing.T) {
	_, addr := serve(t, ServerConfig{StreamLimits: map[string]StreamLimit{identity.HealthWatch: {Default: 1}}})
	conn, err := Dial(addr, ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	open := func() (healthpb.Health_WatchClient, context.CancelFunc, error) {
		ctx, cancel := context.WithCancel(context.Background())
		w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = w.Recv()
		}
		return w, cancel, err
	}
	_, cancel1, err := open()
	if err != nil {
		t.Fatal(err)
	}
	_, cancel2, err := open()
	defer cancel2()
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "role anonymous") {
		t.Fatalf("second stream: %v, want RESOURCE_EXHAUSTED naming the role anonymous (no mutual TLS)", err)
	}
	cancel1()
	// Polling the server's count of open streams.
	testenv.Eventually(t, 10*time.Second, "a stream once the first one ended", func() (bool, error) {
		_, cancel3, err := open()
		cancel3()
		if err != nil && status.Code(err) != codes.ResourceExhausted {
			return false, testenv.Permanent(err)
		}
		return err == nil, err
	})
}
