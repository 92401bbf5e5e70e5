package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/harness/stack"
	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/internal/pki"
	"github.com/sluice-io/sluice/internal/watchstream"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// The components talk mTLS with the certificates `make certs` writes: the whole pipeline
// reaches Caddy with authorization on, and every server gives each identity exactly what the
// security model says (docs/operations.md, "Security model"; the matrix below).
func TestComponentsTalkMTLSWithGeneratedCertificates(t *testing.T) {
	c := testenv.SharedCluster(t)
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	certs := t.TempDir()
	if out, err := exec.Command("go", "-C", root, "run", "./cmd/certs", "-out", certs).CombinedOutput(); err != nil {
		t.Fatalf("make certs: %v\n%s", err, out)
	}
	tlsArgs := func(name string) []string {
		return []string{"--tls-cert", filepath.Join(certs, name+".crt"), "--tls-key", filepath.Join(certs, name+".key"), "--tls-ca", filepath.Join(certs, "ca.crt")}
	}
	bin, err := testenv.Binaries()
	if err != nil {
		t.Fatal(err)
	}
	ns := c.Namespace(t)
	tlsCrt, tlsKey, err := pki.SelfSigned("secure.matrix.test")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "matrix-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: tlsCrt, corev1.TLSPrivateKeyKey: tlsKey}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class := "sluice"
	if _, err := c.Client.NetworkingV1().Ingresses(ns).Create(ctx, &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "matrix"},
		Spec: networkingv1.IngressSpec{IngressClassName: &class,
			TLS:            []networkingv1.IngressTLS{{Hosts: []string{"secure.matrix.test"}, SecretName: "matrix-tls"}},
			DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "none", Port: networkingv1.ServiceBackendPort{Number: 80}}},
			Rules:          []networkingv1.IngressRule{{Host: "secure.matrix.test"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st, err := stack.Start(context.Background(), stack.Config{Cluster: c, BinDir: bin, Dir: t.TempDir(), Namespaces: []string{ns},
		WatcherArgs: tlsArgs("watcher"), TranslatorArgs: tlsArgs("translator"), PusherArgs: tlsArgs("pusher")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Stop()
	testenv.Eventually(t, time.Minute, "the pipeline over mTLS to apply a config (the pusher ready)", func() (bool, error) {
		resp, err := http.Get("http://" + st.PusherHTTP + "/readyz")
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("/readyz answered %s\n%s", resp.Status, st.Logs(20))
	})

	matrix(t, st, certs)
}

// role is one caller of the matrix.
type role struct {
	name string
	tls  grpcx.TLSFiles
	// handshake is false when the TLS handshake itself must fail (UNAVAILABLE).
	handshake bool
}

// rpcCase is one RPC of one server, and who gets what from it.
type rpcCase struct {
	server string
	rpc    string
	call   func(ctx context.Context, conn *grpc.ClientConn) (keys bool, err error)
	// want is the code per role name; keys, per role name, whether private keys must be
	// present (absent from the map: not a read of keys).
	want map[string]codes.Code
	keys map[string]bool
}

// matrix is the test matrix of docs/operations.md, "Security model": every role (translator, pusher, operator, a certificate
// of another CA that claims to be a translator, no certificate) against every RPC of the
// three servers, run against the real binaries with the certificates `make certs` writes.
// For Watch and the config reads it checks whether private keys are present.
func matrix(t *testing.T, st *stack.Stack, certs string) {
	t.Helper()
	ca := filepath.Join(certs, "ca.crt")
	own := func(name string) grpcx.TLSFiles {
		return grpcx.TLSFiles{Cert: filepath.Join(certs, name+".crt"), Key: filepath.Join(certs, name+".key"), CA: ca, ServerName: "localhost"}
	}
	// Another CA's certificate that claims a translator's identity: the claim is worth
	// nothing without the CA.
	other, err := pki.NewCA("intruder-ca")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	crt, key, err := other.Issue(pki.CertOptions{CommonName: "intruder", Client: true, URIs: []string{"spiffe://cluster.local/sluice/translator/sluice"}})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "x.crt"), crt)
	writeFile(t, filepath.Join(dir, "x.key"), key)
	roles := []role{
		{"translator", own("translator"), true},
		{"pusher", own("pusher"), true},
		{"operator", own("operator"), true},
		{"other-ca", grpcx.TLSFiles{Cert: filepath.Join(dir, "x.crt"), Key: filepath.Join(dir, "x.key"), CA: ca, ServerName: "localhost"}, false},
		{"no-cert", grpcx.TLSFiles{CA: ca, ServerName: "localhost"}, false},
	}
	ok, denied := codes.OK, codes.PermissionDenied
	health := func(ctx context.Context, conn *grpc.ClientConn) (bool, error) {
		_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return false, err
	}
	everyone := map[string]codes.Code{"translator": ok, "pusher": ok, "operator": ok}
	cases := []rpcCase{
		{server: st.WatcherAddr, rpc: "watcher Watch", call: watchKeys,
			want: map[string]codes.Code{"translator": ok, "pusher": denied, "operator": ok},
			keys: map[string]bool{"translator": true, "operator": false}},
		{server: st.WatcherAddr, rpc: "watcher ReportStatus", call: reportStatus,
			want: map[string]codes.Code{"translator": ok, "pusher": denied, "operator": denied}},
		{server: st.WatcherAddr, rpc: "watcher Health", call: health, want: everyone},
		{server: st.TranslatorAddr, rpc: "translator StreamConfig", call: streamConfigKeys,
			want: map[string]codes.Code{"translator": denied, "pusher": ok, "operator": ok},
			keys: map[string]bool{"pusher": true, "operator": false}},
		{server: st.TranslatorAddr, rpc: "translator GetStatus", call: getStatusKeys,
			want: map[string]codes.Code{"translator": denied, "pusher": denied, "operator": ok},
			keys: map[string]bool{"operator": false}},
		{server: st.TranslatorAddr, rpc: "translator Health", call: health, want: everyone},
		{server: st.PusherAddr, rpc: "pusher Health", call: health, want: everyone},
	}
	for _, c := range cases {
		for _, r := range roles {
			t.Run(c.rpc+"/"+r.name, func(t *testing.T) {
				conn, err := grpcx.Dial(c.server, grpcx.ClientConfig{TLS: r.tls})
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				want := codes.Unavailable // the handshake fails
				if r.handshake {
					want = c.want[r.name]
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				keys, err := c.call(ctx, conn)
				if status.Code(err) != want {
					t.Fatalf("got %v, want %s", err, want)
				}
				if wantKeys, ok := c.keys[r.name]; ok && err == nil && keys != wantKeys {
					t.Fatalf("private keys present: %v, want %v", keys, wantKeys)
				}
			})
		}
	}
}

// watchKeys follows a Watch stream to its marker and says whether any Secret carried a
// private key.
func watchKeys(ctx context.Context, conn *grpc.ClientConn) (bool, error) {
	s, err := watchv1.NewWatchServiceClient(conn).Watch(ctx, &watchv1.WatchRequest{ClientName: "matrix"})
	if err != nil {
		return false, err
	}
	keys, secrets := false, 0
	for {
		m, err := s.Recv()
		if err != nil {
			return false, err
		}
		if u := m.GetUpsert(); u != nil && u.GetObject().GetKind().GetKind() == "Secret" {
			secrets++
			obj, err := watchstream.Decode(u.GetObject())
			if err != nil {
				return false, err
			}
			if len(obj.(*corev1.Secret).Data[corev1.TLSPrivateKeyKey]) > 0 {
				keys = true
			}
		}
		if m.GetInitialSyncComplete() != nil {
			if secrets == 0 {
				return false, fmt.Errorf("no Secret in the snapshot: the matrix proves nothing about keys")
			}
			return keys, nil
		}
	}
}

// reportStatus opens a status stream with an empty full report and waits for the watcher's
// answer.
func reportStatus(ctx context.Context, conn *grpc.ClientConn) (bool, error) {
	var answer error
	// The status writer starts just after the barrier ("does not write statuses yet"): ask
	// again until it answers otherwise.
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		answer = nil
		s, err := watchv1.NewStatusServiceClient(conn).ReportStatus(ctx)
		if err != nil {
			return false, err
		}
		if err := s.Send(&watchv1.ReportStatusRequest{Source: "matrix", Full: true}); err != nil && !errors.Is(err, io.EOF) {
			return false, err
		}
		_, answer = s.Recv()
		return status.Code(answer) != codes.Unavailable || !strings.Contains(answer.Error(), "does not write statuses yet"), nil
	})
	if err != nil && answer == nil {
		return false, err // the call failed before any answer
	}
	return false, answer // the answer, or the last "not yet" when ctx ended
}

// streamConfigKeys reads a config stream to its complete config and says whether any
// certificate carried a private key.
func streamConfigKeys(ctx context.Context, conn *grpc.ClientConn) (bool, error) {
	s, err := configv1.NewConfigServiceClient(conn).StreamConfig(ctx)
	if err != nil {
		return false, err
	}
	if err := s.Send(&configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Hello{Hello: &configv1.Hello{PusherId: "matrix"}}}); err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	var chain contract.Chain
	for {
		m, err := s.Recv()
		if err != nil {
			return false, err
		}
		cfg, err := chain.Receive(m)
		if err != nil {
			return false, fmt.Errorf("the stream does not verify: %w", err)
		}
		if c := m.GetConfig(); c != nil && cfg != nil {
			return certKeys(c.GetResources())
		}
	}
}

func getStatusKeys(ctx context.Context, conn *grpc.ClientConn) (bool, error) {
	resp, err := configv1.NewConfigServiceClient(conn).GetStatus(ctx, &configv1.GetStatusRequest{IncludeResources: true})
	if err != nil {
		return false, err
	}
	return certKeys(resp.GetCurrent().GetResources())
}

func certKeys(r *configv1.Resources) (bool, error) {
	if len(r.GetCertificates()) == 0 {
		return false, fmt.Errorf("no certificate in the config: the matrix proves nothing about keys")
	}
	for _, c := range r.GetCertificates() {
		if strings.Contains(string(c.GetPrivateKeyPem()), "PRIVATE KEY") {
			return true, nil
		}
	}
	return false, nil
}
