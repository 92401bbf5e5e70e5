package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/identity"
	"github.com/sluice-io/sluice/internal/pki"
)

// cleanManifests translate without a finding: an Ingress whose Service has a ready endpoint.
const cleanManifests = `
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: sluice}
spec: {controller: sluice.io/ingress-controller}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: shop, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints: [{addresses: [10.0.0.1], conditions: {ready: true}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: shop}
spec:
  ingressClassName: sluice
  rules:
  - host: web.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}
`

// syncWriter is a buffer the command writes while the test reads it; it tells when stop
// has been written.
type syncWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	stop string
	seen chan struct{}
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if w.stop != "" && strings.Contains(w.buf.String(), w.stop) {
		close(w.seen)
		w.stop = ""
	}
	return n, err
}

func (w *syncWriter) String() string { w.mu.Lock(); defer w.mu.Unlock(); return w.buf.String() }

// exampleCommand turns one line of an Example into sluicectl's arguments: the command of
// "source <(sluicectl ...)", without a "> file" redirection, quotes removed.
func exampleCommand(line string) ([]string, bool) {
	_, rest, ok := strings.Cut(line, "sluicectl")
	if !ok {
		return nil, false
	}
	rest, _, _ = strings.Cut(rest, ")")
	rest, _, _ = strings.Cut(rest, " > ")
	var args []string
	for _, f := range strings.Fields(rest) {
		args = append(args, strings.Trim(f, `"'`))
	}
	return args, true
}

// Every --help example runs as printed and succeeds (exit 0, something printed): against
// a translator and a watcher where it names their default addresses (one with mutual TLS
// where it gives the operator's certificate), on files of the names it uses. A command that
// follows a stream until interrupted is interrupted once it printed what it is for.
func TestEveryHelpExampleRuns(t *testing.T) {
	examples, err := filepath.Abs("../../examples")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	if err := exec.Command("cp", "-r", examples, "examples").Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir("manifests", 0o755); err != nil {
		t.Fatal(err)
	}
	for path, body := range map[string]string{"cluster.yaml": fixtureManifests, "ingress.yaml": fixtureManifests, "manifests/web.yaml": cleanManifests} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The operator's certificate, as copied out of sluice-operator-tls, and a translator's.
	ca, err := pki.NewCA("sluice-test")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("ca.crt", ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	td := identity.DefaultTrustDomain
	if err := ca.WriteFiles(pki.CertOptions{CommonName: "operator", Client: true, URIs: []string{identity.Identity{TrustDomain: td, Role: identity.Operator}.URI()}}, "operator.crt", "operator.key"); err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteFiles(pki.CertOptions{CommonName: "translator", Server: true, Client: true, IPs: []net.IP{net.ParseIP("127.0.0.1")},
		URIs: []string{identity.Identity{TrustDomain: td, Role: identity.Translator, Class: "sluice"}.URI()}}, "server.crt", "server.key"); err != nil {
		t.Fatal(err)
	}
	st := fixtureStatus(t)
	plain := startFakeTranslator(t, &fakeTranslator{st: st, deltas: 3})
	mtls := startFakeTranslatorTLS(t, &fakeTranslator{st: st, deltas: 3}, grpcx.TLSFiles{CA: "ca.crt", Cert: "server.crt", Key: "server.key"})

	n := 0
	walk(newRoot(nil, nil), func(c *cobra.Command) {
		for _, line := range strings.Split(c.Example, "\n") {
			args, ok := exampleCommand(line)
			if !ok {
				continue
			}
			n++
			addr := plain
			if strings.Contains(line, "--tls-ca") {
				addr = mtls
			}
			// The defaults the examples name (or leave to --addr) are the processes'
			// ports; the fakes serve both streams.
			if cmd, _, err := newRoot(nil, nil).Find(args); err == nil && cmd.Flags().Lookup("addr") != nil {
				replaced := false
				for i, a := range args {
					if a == "127.0.0.1:18010" || a == "127.0.0.1:18000" {
						args[i], replaced = addr, true
					}
				}
				if !replaced {
					args = append(args, "--addr", addr)
				}
			}
			t.Run(strings.TrimSpace(line), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				stdout := &syncWriter{seen: make(chan struct{})}
				if args[0] == "watch" && !strings.Contains(line, "--until-synced") {
					stdout.stop = "initial-sync-complete" // then interrupted, as a user would
					go func() {
						select {
						case <-stdout.seen:
							cancel()
						case <-ctx.Done():
						}
					}()
				}
				var stderr bytes.Buffer
				code := execute(ctx, args, stdout, &stderr)
				if code != exitOK || strings.TrimSpace(stdout.String()) == "" {
					t.Fatalf("sluicectl %s: exit %d, want 0 and an answer:\n%s%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
				}
				if strings.Contains(line, "--service") && !strings.Contains(stdout.String(), "SERVING") {
					t.Errorf("the health of the service named is not SERVING:\n%s", stdout.String())
				}
				if args[0] == "version" && !strings.Contains(line, "--client") && !strings.Contains(stdout.String(), ": reachable, server version") {
					t.Errorf("version did not reach the server (it exits 0 either way):\n%s", stdout.String())
				}
				if strings.Contains(line, "--count 3") && strings.Count(stdout.String(), `"hash"`) < 3 {
					t.Errorf("--count 3 printed fewer than three versions:\n%s", stdout.String())
				}
			})
		}
	})
	if n < 20 {
		t.Errorf("ran %d examples, want every command's", n)
	}
}
