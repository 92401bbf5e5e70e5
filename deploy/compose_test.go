package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/internal/kubeconfig"
)

// compose runs docker-compose for one project.
type compose struct {
	t       *testing.T
	dir     string
	project string
	env     []string
}

func (c *compose) run(args ...string) string {
	c.t.Helper()
	cmd := exec.Command("docker-compose", append([]string{"-p", c.project, "--profile", "local"}, args...)...)
	cmd.Dir, cmd.Env = c.dir, append(os.Environ(), c.env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		c.t.Fatalf("docker-compose %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// The compose stack (local profile: etcd and kube-apiserver in containers too, every image
// built here from static binaries on scratch) serves the sample Ingresses through the Caddy
// container; with the translator's container cut off the network while objects change,
// Caddy keeps serving the last routes, and after reconnecting it converges. The stack is
// torn down whatever happens.
func TestComposeStackSurvivesATranslatorPartition(t *testing.T) {
	if err := exec.Command("docker", "info").Run(); err != nil {
		t.Skipf("SKIPPED LOUDLY: no Docker engine answers (docker info: %v); the compose stack was not tested", err)
	}
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(root, "deploy/images/build.sh"), "scratch", "dev").CombinedOutput(); err != nil {
		t.Fatalf("build images: %v\n%s", err, out)
	}
	dir := t.TempDir()
	for _, f := range []string{"docker-compose.yaml", "caddy.json", "local-rbac.yaml"} {
		b, err := os.ReadFile(filepath.Join(root, "deploy/compose", f))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, f), b)
	}
	if out, err := exec.Command("go", "-C", root, "run", "./cmd/certs", "-out", filepath.Join(dir, "certs")).CombinedOutput(); err != nil {
		t.Fatalf("make certs: %v\n%s", err, out)
	}
	ports := make([]int, 3)
	for i := range ports {
		if ports[i], err = testenv.FreePort(); err != nil {
			t.Fatal(err)
		}
	}
	c := &compose{t: t, dir: dir, project: "sluicetest" + testenv.RandSuffix(), env: []string{
		fmt.Sprintf("SLUICE_HTTP_PORT=%d", ports[0]), fmt.Sprintf("SLUICE_HTTPS_PORT=%d", ports[1]), fmt.Sprintf("SLUICE_APISERVER_PORT=%d", ports[2])}}
	t.Cleanup(func() {
		if t.Failed() {
			cmd := exec.Command("docker-compose", "-p", c.project, "--profile", "local", "logs", "--tail", "30")
			cmd.Dir, cmd.Env = c.dir, append(os.Environ(), c.env...)
			out, _ := cmd.CombinedOutput()
			t.Logf("compose logs:\n%s", out)
		}
		cmd := exec.Command("docker-compose", "-p", c.project, "--profile", "local", "down", "-v", "--timeout", "5")
		cmd.Dir, cmd.Env = c.dir, append(os.Environ(), c.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("tear down: %v\n%s", err, out)
		}
	})
	c.run("up", "-d")

	// The apiserver in its container, reached through its published port with the admin
	// certificate; kubectl applies deploy/'s RBAC and the examples.
	certs := filepath.Join(dir, "certs")
	admin := &rest.Config{Host: fmt.Sprintf("https://127.0.0.1:%d", ports[2]), TLSClientConfig: rest.TLSClientConfig{
		CAFile: filepath.Join(certs, "ca.crt"), CertFile: filepath.Join(certs, "admin.crt"), KeyFile: filepath.Join(certs, "admin.key")}}
	cs := kubernetes.NewForConfigOrDie(admin)
	testenv.EventuallyEvery(t, 200*time.Millisecond, time.Minute, "the apiserver container", func() (bool, error) {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		return err == nil, err
	})
	kc := filepath.Join(dir, "admin.kubeconfig")
	if err := kubeconfig.Write(mustLoad(t, admin), kc); err != nil {
		t.Fatal(err)
	}
	k := func(args ...string) {
		t.Helper()
		bin, _ := testenv.ToolPath("kubectl")
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kc)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	k("apply", "-f", filepath.Join(root, "deploy/base/namespace.yaml"), "-f", filepath.Join(root, "deploy/base/rbac.yaml"), "-f", filepath.Join(dir, "local-rbac.yaml"))
	network := c.project + "_sluice"
	ip := func(svc string) string {
		return docker(t, "inspect", "-f", `{{(index .NetworkSettings.Networks "`+network+`").IPAddress}}`, c.project+"_"+svc+"_1")
	}
	examples := filepath.Join(dir, "examples")
	if err := os.MkdirAll(examples, 0o755); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(root, "examples", "*"))
	repl := strings.NewReplacer("${ALPHA_IP}", ip("backend-alpha"), "${BETA_IP}", ip("backend-beta"), "${ALPHA_PORT}", "8080", "${BETA_PORT}", "8080")
	for _, f := range files {
		if filepath.Base(f) == "50-gateway.yaml" {
			continue // needs the Gateway API's CRDs, which this test is not about
		}
		if fi, err := os.Stat(f); err != nil || fi.IsDir() {
			continue // the client's Go examples, not manifests
		}
		b, _ := os.ReadFile(f)
		writeFile(t, filepath.Join(examples, strings.TrimSuffix(filepath.Base(f), ".tmpl")), []byte(repl.Replace(string(b))))
	}
	k("apply", "-f", filepath.Join(examples, "10-services.yaml"))
	k("-n", "demo", "create", "secret", "tls", "secure-tls", "--cert", filepath.Join(certs, "translator.crt"), "--key", filepath.Join(certs, "translator.key"))
	k("apply", "-f", examples)

	get := func(host, path string) string {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", ports[0], path), nil)
		req.Host = host
		resp, err := (&http.Client{Timeout: 3 * time.Second}).Do(req)
		if err != nil {
			return "error"
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var a struct{ Backend string }
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &a) != nil {
			return fmt.Sprint(resp.StatusCode)
		}
		return a.Backend
	}
	// Unmatched hosts and paths fall to the examples' defaultBackend (alpha).
	testenv.EventuallyEvery(t, 200*time.Millisecond, 2*time.Minute, "the examples served through the Caddy container", func() (bool, error) {
		shop, team := get("shop.sluice.local", "/api"), get("team1.apps.sluice.local", "/")
		return shop == "beta" && team == "beta", fmt.Errorf("shop.sluice.local/api answered %s, team1.apps.sluice.local/ %s", shop, team)
	})

	translator := c.project + "_translator_1"
	docker(t, "network", "disconnect", network, translator)
	k("-n", "demo", "delete", "ingress", "shop")
	k("-n", "demo", "create", "ingress", "late", "--class", "sluice", "--rule", "late.sluice.local/*=beta:80")
	// For as long as the partition lasts, Caddy keeps the last routes it had.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
		if got := get("shop.sluice.local", "/api"); got != "beta" {
			t.Fatalf("during the partition shop.sluice.local/api answered %s; the last routes must stay", got)
		}
		if got := get("team1.apps.sluice.local", "/"); got != "beta" {
			t.Fatalf("during the partition the wildcard route answered %s", got)
		}
		time.Sleep(100 * time.Millisecond) // the partition's length, not a synchronisation
	}
	docker(t, "network", "connect", network, translator)
	testenv.EventuallyEvery(t, 200*time.Millisecond, 2*time.Minute, "convergence after the partition", func() (bool, error) {
		late, shop := get("late.sluice.local", "/"), get("shop.sluice.local", "/api")
		return late == "beta" && shop == "alpha", fmt.Errorf("late.sluice.local/ answered %s, shop.sluice.local/api %s", late, shop)
	})
}

func mustLoad(t *testing.T, cfg *rest.Config) *rest.Config {
	t.Helper()
	out := rest.CopyConfig(cfg)
	for _, f := range []struct {
		path string
		dst  *[]byte
	}{{cfg.CAFile, &out.CAData}, {cfg.CertFile, &out.CertData}, {cfg.KeyFile, &out.KeyData}} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		*f.dst = b
	}
	return out
}
