package main_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/harness/testenv"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// countingConn dials files' identity with a TLS configuration that counts full handshakes
// (a resumed session would not present the certificate again, and is not counted).
func countingConn(t *testing.T, addr string, files grpcx.TLSFiles, handshakes *atomic.Int64) *grpc.ClientConn {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(files.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if !cs.DidResume {
				handshakes.Add(1)
			}
			return nil
		}}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// openWatch opens a Watch stream on conn and reads its first message.
func openWatch(ctx context.Context, conn *grpc.ClientConn) (grpc.ServerStreamingClient[watchv1.WatchResponse], error) {
	s, err := watchv1.NewWatchServiceClient(conn).Watch(ctx, &watchv1.WatchRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return nil, err
	}
	_, err = s.Recv()
	return s, err
}

// docs/design.md, who may do what: connections do not outlive trust. Against the real
// watcher: an operator holding its cap of Watch streams does not stop a translator from
// connecting, and its next stream is refused naming its role; a connection older than
// --max-connection-age is closed (GOAWAY, then the grace) and the client comes back through
// a fresh TLS handshake.
func TestConnectionsBoundedByAgeAndStreamsPerRole(t *testing.T) {
	c := testenv.SharedCluster(t)
	ns := c.Namespace(t)
	tlsArgs, translatorTLS, operatorTLS := identities(t, t.TempDir())
	const age, grace = 3 * time.Second, time.Second
	w := startWatcher(t, c.AdminKubeconfig, append([]string{"--namespaces", ns, "--kinds", namespacedKinds,
		"--max-connection-age", age.String(), "--max-connection-age-grace", grace.String(), "--max-operator-streams", "2"}, tlsArgs...)...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	t.Logf("watcher started")
	var opHandshakes, trHandshakes atomic.Int64
	op := countingConn(t, w.addr, operatorTLS, &opHandshakes)
	for i := range 2 {
		var err error
		testenv.Eventually(t, time.Minute, "an operator's Watch stream", func() (bool, error) {
			_, err = openWatch(ctx, op)
			if status.Code(err) == codes.Unavailable {
				return false, err // the watcher is still starting
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("operator stream %d: %v", i+1, err)
		}
	}
	if _, err := openWatch(ctx, op); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "role operator") {
		t.Fatalf("a third operator stream: %v; want RESOURCE_EXHAUSTED naming the role operator", err)
	}

	t.Logf("operators hold their cap")
	tr := countingConn(t, w.addr, translatorTLS, &trHandshakes)
	start := time.Now()
	// The watchdog: a stream that the age does not end runs into it (DeadlineExceeded).
	streamCtx, streamCancel := context.WithTimeout(ctx, time.Minute)
	defer streamCancel()
	stream, err := openWatch(streamCtx, tr)
	if err != nil {
		t.Fatalf("a translator's stream while the operator holds its cap: %v", err)
	}
	if trHandshakes.Load() != 1 {
		t.Fatalf("%d handshakes for the translator's first connection", trHandshakes.Load())
	}
	// The stream stays open until the connection's age and grace run out; then it ends, and
	// the next one is made over a new connection.
	var end error
	for end == nil {
		_, end = stream.Recv()
	}
	lived := time.Since(start)
	if status.Code(end) != codes.Unavailable {
		t.Fatalf("the translator's stream ended with %v; want UNAVAILABLE at the connection's age", end)
	}
	if _, err := openWatch(ctx, tr); err != nil {
		t.Fatalf("reconnecting after the connection's age: %v", err)
	}
	if n := trHandshakes.Load(); n < 2 {
		t.Fatalf("%d handshakes: the reconnect reused the old session or connection", n)
	}
	t.Logf("the stream lived %s (age %s, grace %s); %d translator handshakes", lived.Round(time.Millisecond), age, grace, trHandshakes.Load())
}
