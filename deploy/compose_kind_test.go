package deploy_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sluice-io/sluice/internal/backend"
	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/internal/pki"
)

// The compose kind profile (docker-compose.yaml + docker-compose.kind.yaml, unchanged) run
// next to the cluster in a box dressed as a kind cluster: a docker network named like kind's,
// the apiserver reachable from it as kind-control-plane:6443 with a certificate naming that
// host, and a kubeconfig shaped exactly as `kind get kubeconfig --internal` writes one. The
// watcher, with only deploy/'s RBAC, sees a Deployment's EndpointSlices written by the real
// controller-manager, and requests through the Caddy container's published port reach the
// Deployment's Pods. Everything is torn down whatever happens.
func TestComposeKindProfileServesADeployment(t *testing.T) {
	if err := exec.Command("docker", "info").Run(); err != nil {
		t.Skipf("SKIPPED LOUDLY: no Docker engine answers (docker info: %v); the compose kind profile was not tested", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED LOUDLY: the cluster in a box runs Pods in network namespaces, which needs root; the compose kind profile was not tested")
	}
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(root, "deploy/images/build.sh"), "scratch", "dev").CombinedOutput(); err != nil {
		t.Fatalf("build images: %v\n%s", err, out)
	}
	dir := t.TempDir()
	for _, f := range []string{"docker-compose.yaml", "docker-compose.kind.yaml", "caddy.json", "local-rbac.yaml"} {
		b, err := os.ReadFile(filepath.Join(root, "deploy/compose", f))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, f), b)
	}
	if out, err := exec.Command("go", "-C", root, "run", "./cmd/certs", "-out", filepath.Join(dir, "certs")).CombinedOutput(); err != nil {
		t.Fatalf("make certs: %v\n%s", err, out)
	}

	// The cluster: its own, since the apiserver is exposed on a docker network for a while.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cluster, err := testenv.StartCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Stop)
	w := cluster.Workloads(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-controller-manager log:\n%s", w.ControllerManagerLogs(30))
		}
	})

	// What `kind create cluster` makes: the docker network "kind" (or, when that exists, one
	// of the test's own, pointed at by the compose override below), the control plane on it.
	network := kindNetwork(t)
	gateway := docker(t, "network", "inspect", "-f", "{{range .IPAM.Config}}{{.Gateway}}{{end}}", network)
	if net.ParseIP(gateway).To4() == nil {
		t.Fatalf("docker network %s has gateway %q, want an IPv4 address", network, gateway)
	}
	// The control plane's apiserver answers on kind-control-plane:6443 inside that network;
	// here the host side of the network's bridge forwards to the apiserver on loopback.
	apiserver, err := url.Parse(cluster.Host)
	if err != nil {
		t.Fatal(err)
	}
	tcpForward(t, net.JoinHostPort(gateway, "6443"), apiserver.Host)
	t.Logf("docker network %s, apiserver forwarded from %s:6443", network, gateway)

	// `kind get kubeconfig --internal`'s shape, for a user deploy/'s RBAC binds (kind's own
	// is a cluster admin; the least-privilege identity also tests the watcher's role).
	cert, key, err := cluster.CA.Issue(pki.CertOptions{CommonName: "sluice-watcher", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "kind-kubeconfig"), []byte(kindKubeconfig(cluster.CA.CertPEM, cert, key)))
	override := "version: \"3.9\"\n" +
		"services:\n  watcher-kind:\n    extra_hosts: [\"kind-control-plane:" + gateway + "\"]\n"
	if network != "kind" {
		override += "networks:\n  kind:\n    external: true\n    name: " + network + "\n"
	}
	writeFile(t, filepath.Join(dir, "docker-compose.kind-test.yaml"), []byte(override))

	// The README's steps: deploy/'s namespace and RBAC, the user's binding; and Sluice's
	// IngressClass, a Deployment of the test backend, its Service and an Ingress.
	kubectl := func(args ...string) {
		t.Helper()
		bin, err := testenv.ToolPath("kubectl")
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.AdminKubeconfig)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	kubectl("apply", "-f", filepath.Join(root, "deploy/base/namespace.yaml"), "-f", filepath.Join(root, "deploy/base/rbac.yaml"),
		"-f", filepath.Join(dir, "local-rbac.yaml"), "-f", filepath.Join(root, "examples/00-ingressclass.yaml"))
	ns := cluster.Namespace(t)
	const app, host = "web", "web.kind.sluice.local"
	if _, err := cluster.Client.AppsV1().Deployments(ns).Create(ctx, testenv.BackendDeployment(app, 2, 0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Client.CoreV1().Services(ns).Create(ctx, testenv.BackendService(app), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	prefix := networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: app}, Spec: networkingv1.IngressSpec{
		IngressClassName: ptr.To("sluice"),
		Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: app, Port: networkingv1.ServiceBackendPort{Name: "http"}}}}},
		}}}},
	}}
	if _, err := cluster.Client.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitDeploymentReady(ctx, ns, app, app); err != nil {
		t.Fatal(err)
	}
	podList, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	pods := map[string]bool{}
	for _, p := range podList.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			pods[p.Name] = true
		}
	}
	if len(pods) != 2 {
		t.Fatalf("the deployment runs pods %v, want 2", pods)
	}

	// The README's command, with the test's override last.
	httpPort, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	httpsPort, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	c := &composeKind{t: t, dir: dir, project: "sluicekind" + testenv.RandSuffix(),
		env: []string{fmt.Sprintf("SLUICE_HTTP_PORT=%d", httpPort), fmt.Sprintf("SLUICE_HTTPS_PORT=%d", httpsPort)}}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := c.cmd("logs", "--tail", "30").CombinedOutput()
			t.Logf("compose logs:\n%s\nforwarding rules (the Caddy container reaches the Pods through the host):\n%s", out, firewall())
		}
		if out, err := c.cmd("down", "-v", "--timeout", "5").CombinedOutput(); err != nil {
			t.Errorf("tear down: %v\n%s", err, out)
		}
	})
	c.run("up", "-d")

	// Every answer through the Caddy container names a Pod of the Deployment, and each Pod
	// answers in time: the watcher in compose saw the EndpointSlices of the cluster's
	// controller-manager, and Caddy reaches the Pod IPs.
	seen := map[string]bool{}
	testenv.EventuallyEvery(t, 100*time.Millisecond, 3*time.Minute, "every pod of the deployment answering through the compose Caddy", func() (bool, error) {
		a, err := getAnswer(httpPort, host)
		if err != nil {
			return false, fmt.Errorf("%v (pods seen: %v)", err, keys(seen))
		}
		if a.Backend != app || !pods[a.Pod] {
			return false, testenv.Permanent(fmt.Errorf("answered by backend %q pod %q, not a pod of the deployment %v", a.Backend, a.Pod, keys(pods)))
		}
		seen[a.Pod] = true
		return len(seen) == len(pods), fmt.Errorf("pods seen %v of %v", keys(seen), keys(pods))
	})
	t.Logf("through the compose Caddy, answers from pods %v", keys(seen))
}

// composeKind runs docker-compose for the kind profile with the test's override.
type composeKind struct {
	t       *testing.T
	dir     string
	project string
	env     []string
}

func (c *composeKind) cmd(args ...string) *exec.Cmd {
	base := []string{"-p", c.project, "-f", "docker-compose.yaml", "-f", "docker-compose.kind.yaml", "-f", "docker-compose.kind-test.yaml", "--profile", "kind"}
	cmd := exec.Command("docker-compose", append(base, args...)...)
	cmd.Dir, cmd.Env = c.dir, append(os.Environ(), c.env...)
	return cmd
}

func (c *composeKind) run(args ...string) string {
	c.t.Helper()
	out, err := c.cmd(args...).CombinedOutput()
	if err != nil {
		c.t.Fatalf("docker-compose %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// kindNetwork creates the docker network "kind" as `kind create cluster` does, or, when a
// network of that name exists already (a real kind cluster's, another test's), one named
// kind-sluicetest-<random>; it is removed when the test ends.
func kindNetwork(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"kind", "kind-sluicetest-" + testenv.RandSuffix()} {
		out, err := exec.Command("docker", "network", "create", "--label", "io.sluice.test=compose-kind", name).CombinedOutput()
		if err != nil {
			if strings.Contains(string(out), "already exists") {
				continue
			}
			t.Fatalf("docker network create %s: %v\n%s", name, err, out)
		}
		t.Cleanup(func() {
			if out, err := exec.Command("docker", "network", "rm", name).CombinedOutput(); err != nil {
				t.Errorf("docker network rm %s: %v\n%s", name, err, out)
			}
		})
		return name
	}
	t.Fatal("docker networks kind and kind-sluicetest-* exist already")
	return ""
}

// kindKubeconfig is a kubeconfig as `kind get kubeconfig --internal` writes it for the
// cluster "kind", with the given credentials.
func kindKubeconfig(ca, cert, key []byte) string {
	b64 := base64.StdEncoding.EncodeToString
	return `apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: ` + b64(ca) + `
    server: https://kind-control-plane:6443
  name: kind-kind
contexts:
- context:
    cluster: kind-kind
    user: kind-kind
  name: kind-kind
current-context: kind-kind
kind: Config
preferences: {}
users:
- name: kind-kind
  user:
    client-certificate-data: ` + b64(cert) + `
    client-key-data: ` + b64(key) + `
`
}

// tcpForward listens on addr and forwards every connection to target until the test ends.
func tcpForward(t *testing.T, addr, target string) {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s for the apiserver: %v", addr, err)
	}
	var (
		mu    sync.Mutex
		conns = map[net.Conn]bool{}
		wg    sync.WaitGroup
	)
	track := func(c net.Conn, on bool) {
		mu.Lock()
		defer mu.Unlock()
		if on {
			conns[c] = true
		} else {
			delete(conns, c)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				track(c, true)
				track(up, true)
				defer track(c, false)
				defer track(up, false)
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
				go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
}

// firewall is the host's forwarding rules (both iptables back ends), for a failure that may
// be a container's traffic to the Pods' bridge being dropped.
func firewall() string {
	var b strings.Builder
	for _, c := range [][]string{{"iptables", "-S", "FORWARD"}, {"iptables", "-S", "DOCKER-USER"}, {"iptables-legacy", "-S", "FORWARD"}} {
		out, err := exec.Command(c[0], c[1:]...).CombinedOutput()
		fmt.Fprintf(&b, "%s: %v\n%s\n", strings.Join(c, " "), err, out)
	}
	return b.String()
}

// getAnswer asks the compose Caddy's published HTTP port for host's /.
func getAnswer(port int, host string) (backend.Answer, error) {
	var a backend.Answer
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", port), nil)
	req.Host = host
	resp, err := (&http.Client{Timeout: 3 * time.Second}).Do(req)
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return a, fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return a, errors.Join(fmt.Errorf("not the backend's answer: %.200s", b), err)
	}
	return a, nil
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
