package deploy_test

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/stack"
	"github.com/sluice-io/sluice/internal/pki"
	"github.com/sluice-io/sluice/internal/testenv"
)

// The components talk mTLS with the certificates `make certs` writes: the whole pipeline
// reaches Caddy, and a client without a valid certificate (none, a self-signed one, or
// plaintext) is refused by every server.
func TestComponentsTalkMTLSWithGeneratedCertificates(t *testing.T) {
	c := testenv.SharedCluster(t)
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	certs := t.TempDir()
	if out, err := exec.Command("go", "-C", root, "run", "./internal/tools/certs", "-out", certs).CombinedOutput(); err != nil {
		t.Fatalf("make certs: %v\n%s", err, out)
	}
	tlsArgs := func(name string) []string {
		return []string{"--tls-cert", filepath.Join(certs, name+".crt"), "--tls-key", filepath.Join(certs, name+".key"), "--tls-ca", filepath.Join(certs, "ca.crt")}
	}
	bin, err := testenv.Binaries()
	if err != nil {
		t.Fatal(err)
	}
	st, err := stack.Start(context.Background(), stack.Config{Cluster: c, BinDir: bin, Dir: t.TempDir(), Namespaces: []string{c.Namespace(t)},
		WatcherArgs: tlsArgs("watcher"), TranslatorArgs: tlsArgs("translator"), PusherArgs: tlsArgs("pusher")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Stop()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get("http://" + st.PusherHTTP + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pipeline over mTLS never applied a config:\n%s", st.Logs(20))
		}
		time.Sleep(50 * time.Millisecond)
	}

	selfSigned := t.TempDir()
	crt, key, err := pki.SelfSigned("intruder")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(selfSigned, "x.crt"), crt)
	writeFile(t, filepath.Join(selfSigned, "x.key"), key)
	ca := filepath.Join(certs, "ca.crt")
	for _, addr := range []string{st.WatcherAddr, st.TranslatorAddr, st.PusherAddr} {
		cases := []struct {
			name string
			args []string
			ok   bool
		}{
			{"valid client certificate", []string{"--tls-ca", ca, "--tls-cert", filepath.Join(certs, "pusher.crt"), "--tls-key", filepath.Join(certs, "pusher.key")}, true},
			{"no client certificate", []string{"--tls-ca", ca}, false},
			{"certificate from another CA", []string{"--tls-ca", ca, "--tls-cert", filepath.Join(selfSigned, "x.crt"), "--tls-key", filepath.Join(selfSigned, "x.key")}, false},
			{"plaintext", nil, false},
		}
		for _, tc := range cases {
			p := testenv.StartBinary(t, "sluicectl", append([]string{"health", "--addr", addr, "--timeout", "3s"}, tc.args...)...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			code, err := p.Wait(ctx)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			if (code == 0) != tc.ok {
				t.Errorf("%s, %s: exit %d, want success=%v:\n%s", addr, tc.name, code, tc.ok, p.Logs())
			}
			if tc.ok && !strings.Contains(p.Logs(), "SERVING") {
				t.Errorf("%s: %s", addr, p.Logs())
			}
		}
	}
}
