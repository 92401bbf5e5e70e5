// Command demo runs the whole of Sluice on this machine (`make demo`): etcd and
// kube-apiserver, two HTTP backends in a network namespace, Caddy, and the watcher,
// translator and pusher as separate processes; it applies examples/ with kubectl, shows
// requests flowing through Caddy, and keeps running until Ctrl-C.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-io/sluice/internal/harness/stack"
	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/internal/pki"
)

func main() {
	binDir := flag.String("bin", "bin", "directory with the watcher, translator and pusher binaries (make build)")
	examples := flag.String("examples", "examples", "directory with the sample manifests")
	gatewayCRDs := flag.String("gateway-crds", "deploy/gateway-api/standard-install.yaml", "the Gateway API CRDs (standard channel), applied before the watcher starts")
	once := flag.Bool("once", false, "exit after showing the requests instead of running until Ctrl-C")
	flag.Parse()
	for _, p := range []*string{binDir, examples, gatewayCRDs} {
		if abs, err := filepath.Abs(*p); err == nil {
			*p = abs
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	code := run(ctx, *binDir, *examples, *gatewayCRDs, *once)
	testenv.Cleanup()
	os.Exit(code)
}

var stepN, steps = 0, 11

// step runs one step and prints what it did and how long it took.
func step(what string, fn func() (string, error)) error {
	stepN++
	fmt.Printf("[%d/%d] %s ... ", stepN, steps, what)
	start := time.Now()
	detail, err := fn()
	took := time.Since(start).Round(time.Millisecond)
	if err != nil {
		fmt.Printf("FAILED (%s)\n", took)
		return err
	}
	if detail != "" {
		detail = " " + detail
	}
	fmt.Printf("ok (%s)%s\n", took, detail)
	return nil
}

func run(ctx context.Context, binDir, examples, gatewayCRDs string, once bool) int {
	var (
		cluster  *testenv.Cluster
		backends = map[string]*testenv.Backend{}
		st       *stack.Stack
		dir      string
	)
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "\ndemo: %v\n", err)
		if st != nil {
			fmt.Fprintf(os.Stderr, "\nrecent logs:\n%s", st.Logs(15))
			st.Stop()
		}
		if cluster != nil {
			cluster.Stop()
		}
		return 1
	}
	kubectl, err := testenv.ToolPath("kubectl")
	if err != nil {
		return fail(err)
	}
	dir, err = os.MkdirTemp("", "sluice-demo-")
	if err != nil {
		return fail(err)
	}
	if err := step("starting etcd and kube-apiserver", func() (string, error) {
		var err error
		cluster, err = testenv.StartCluster(ctx)
		if err != nil {
			return "", err
		}
		return cluster.Host, nil
	}); err != nil {
		return fail(err)
	}
	if err := step("installing the Gateway API CRDs (standard channel)", func() (string, error) {
		// Before the watcher starts, so that its first epoch serves the Gateway API kinds
		// (--gateway-api=auto); installed later, they would start a new epoch.
		env := append(os.Environ(), "KUBECONFIG="+cluster.AdminKubeconfig)
		for _, args := range [][]string{
			{"apply", "--server-side", "-f", gatewayCRDs},
			{"wait", "--for", "condition=Established", "--timeout", "60s", "crd/gatewayclasses.gateway.networking.k8s.io",
				"crd/gateways.gateway.networking.k8s.io", "crd/httproutes.gateway.networking.k8s.io", "crd/referencegrants.gateway.networking.k8s.io"},
		} {
			cmd := exec.CommandContext(ctx, kubectl, args...)
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				return "", fmt.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
		return filepath.Base(gatewayCRDs), nil
	}); err != nil {
		return fail(err)
	}
	if err := step("starting two HTTP backends in a network namespace", func() (string, error) {
		n, err := testenv.NewNet()
		if err != nil {
			return "", fmt.Errorf("%w\n(the apiserver refuses loopback endpoint addresses, so the demo's backends need a network namespace: run make demo as root)", err)
		}
		for _, name := range []string{"alpha", "beta"} {
			b, err := n.StartBackend(name)
			if err != nil {
				return "", err
			}
			backends[name] = b
		}
		return fmt.Sprintf("alpha=%s beta=%s", backends["alpha"].URL(), backends["beta"].URL()), nil
	}); err != nil {
		return fail(err)
	}
	if err := step("starting Caddy, watcher, translator and pusher", func() (string, error) {
		var err error
		// The proxy's address goes into every served Ingress's status (kubectl get ingress).
		st, err = stack.Start(ctx, stack.Config{Cluster: cluster, BinDir: binDir, Dir: dir,
			HTTPAddr: pick("127.0.0.1:8080"), HTTPSAddr: pick("127.0.0.1:8443"), TranslatorArgs: []string{"--publish-address", "127.0.0.1"}})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("proxy on http://%s and https://%s", st.HTTPAddr(), st.HTTPSAddr()), nil
	}); err != nil {
		return fail(err)
	}
	if err := step("waiting for the watcher's barrier and the first config in Caddy", func() (string, error) {
		return "", waitReady(ctx, "http://"+st.PusherHTTP+"/readyz", time.Minute)
	}); err != nil {
		return fail(err)
	}
	if err := step("applying examples/ with kubectl", func() (string, error) {
		return applyExamples(ctx, kubectl, cluster.AdminKubeconfig, examples, dir, backends)
	}); err != nil {
		return fail(err)
	}
	probes := []struct{ scheme, host, path, header string }{
		{"http", "shop.sluice.local", "/", ""},
		{"http", "shop.sluice.local", "/api/orders", ""},
		{"http", "shop.sluice.local", "/apiary", ""},
		{"http", "shop.sluice.local", "/healthz", ""},
		{"http", "team1.apps.sluice.local", "/", ""},
		{"https", "secure.sluice.local", "/", ""},
		{"http", "unknown.example.com", "/", ""},
		{"http", "broken.sluice.local", "/", ""},
		// The HTTPRoute of examples/50-gateway.yaml.
		{"http", "store.gw.sluice.local", "/", ""},
		{"http", "store.gw.sluice.local", "/", "x-canary: true"},
		{"http", "store.gw.sluice.local", "/old/page", ""},
		{"http", "store.gw.sluice.local", "/v1/items", ""},
	}
	if err := step("waiting until Caddy serves the examples", func() (string, error) {
		deadline := time.Now().Add(time.Minute)
		for {
			if strings.Contains(request(st, "http", "shop.sluice.local", "/api/x", ""), "beta") &&
				strings.Contains(request(st, "http", "store.gw.sluice.local", "/", "x-canary: true"), "beta") {
				return "", nil
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return "", fmt.Errorf("caddy does not serve the examples yet")
			}
			time.Sleep(100 * time.Millisecond)
		}
	}); err != nil {
		return fail(err)
	}
	_ = step("sending requests through Caddy", func() (string, error) { return "", nil })
	for _, p := range probes {
		what := p.scheme + "://" + p.host + p.path
		if p.header != "" {
			what += " (" + p.header + ")"
		}
		fmt.Printf("      %-5s %-58s -> %s\n", strings.ToUpper(p.scheme), what, request(st, p.scheme, p.host, p.path, p.header))
	}
	if err := step("waiting for the watcher to write the Ingresses' and the Gateway API's status and Events", func() (string, error) {
		deadline := time.Now().Add(time.Minute)
		for {
			addr, _ := exec.CommandContext(ctx, kubectl, "--kubeconfig", cluster.AdminKubeconfig, "get", "ingress", "-n", "demo", "shop",
				"-o", "jsonpath={.status.loadBalancer.ingress[0].ip}").Output()
			ev, _ := exec.CommandContext(ctx, kubectl, "--kubeconfig", cluster.AdminKubeconfig, "get", "events", "-n", "demo",
				"--field-selector", "involvedObject.name=broken,type=Warning", "-o", "name").Output()
			programmed, _ := exec.CommandContext(ctx, kubectl, "--kubeconfig", cluster.AdminKubeconfig, "get", "gateway", "-n", "demo", "web",
				"-o", `jsonpath={.status.conditions[?(@.type=="Programmed")].status}`).Output()
			if string(addr) == "127.0.0.1" && len(ev) > 0 && string(programmed) == "True" {
				return "", nil
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return "", fmt.Errorf("no status or Event yet (address %q, Gateway programmed %q)", addr, programmed)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}); err != nil {
		return fail(err)
	}
	for _, args := range [][]string{
		{"get", "ingress", "-n", "demo"},
		{"get", "gatewayclass,gateway,httproute", "-n", "demo"},
		{"get", "httproute", "-n", "demo", "store", "-o", `jsonpath={range .status.parents[*].conditions[*]}{.type}={.status} ({.reason}){"\n"}{end}`},
		{"get", "events", "-n", "demo", "--field-selector", "involvedObject.kind=Ingress", "-o", "custom-columns=TYPE:.type,REASON:.reason,OBJECT:.involvedObject.name,MESSAGE:.message"},
	} {
		fmt.Printf("      $ kubectl %s\n", strings.Join(args, " "))
		out, _ := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", cluster.AdminKubeconfig}, args...)...).CombinedOutput()
		for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
			fmt.Println("      " + l)
		}
	}
	sluicectl := filepath.Join(binDir, "sluicectl")
	_ = step("the translator's view (sluicectl config)", func() (string, error) { return "", nil })
	out, _ := exec.CommandContext(ctx, sluicectl, "config", "--addr", st.TranslatorAddr).CombinedOutput()
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		fmt.Println("      " + l)
	}
	fmt.Printf(`
Sluice is running. Try it:
  export KUBECONFIG=%s
  %s get ingress -A
  %s config --addr %s          # the translator's config, findings and pushers
  %s watch --addr %s --quiet   # the watch stream and its verified marker
  curl -H 'Host: shop.sluice.local' http://%s/api
Change examples (kubectl apply, delete, edit) and watch them take effect.
Logs: %s
`, cluster.AdminKubeconfig, kubectl, sluicectl, st.TranslatorAddr, sluicectl, st.WatcherAddr, st.HTTPAddr(), dir)
	if !once {
		fmt.Println("Press Ctrl-C to stop everything the demo started.")
		<-ctx.Done()
		fmt.Println("\nstopping ...")
	}
	st.Stop()
	cluster.Stop()
	return 0
}

// pick returns addr if it is free, else a free loopback address.
func pick(addr string) string {
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		return addr
	}
	a, _ := testenv.FreeAddr()
	return a
}

func waitReady(ctx context.Context, url string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s not ready", url)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func applyExamples(ctx context.Context, kubectl, kubeconfig, examples, dir string, backends map[string]*testenv.Backend) (string, error) {
	out := filepath.Join(dir, "examples")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	vars := map[string]string{}
	for name, b := range backends {
		vars["${"+strings.ToUpper(name)+"_IP}"] = b.Address
		vars["${"+strings.ToUpper(name)+"_PORT}"] = strconv.Itoa(b.Port)
	}
	files, err := filepath.Glob(filepath.Join(examples, "*"))
	if err != nil {
		return "", err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		s := string(data)
		for k, v := range vars {
			s = strings.ReplaceAll(s, k, v)
		}
		if err := os.WriteFile(filepath.Join(out, strings.TrimSuffix(filepath.Base(f), ".tmpl")), []byte(s), 0o644); err != nil {
			return "", err
		}
	}
	certPEM, keyPEM, err := pki.SelfSigned("secure.sluice.local")
	if err != nil {
		return "", err
	}
	crt, key := filepath.Join(dir, "secure.crt"), filepath.Join(dir, "secure.key")
	if err := os.WriteFile(crt, certPEM, 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(key, keyPEM, 0o600); err != nil {
		return "", err
	}
	env := append(os.Environ(), "KUBECONFIG="+kubeconfig)
	runK := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, kubectl, args...)
		cmd.Env = env
		b, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return string(b), nil
	}
	// The namespace first, so that the Secret can go in before the Ingresses that use it.
	if _, err := runK("apply", "-f", filepath.Join(out, "10-services.yaml")); err != nil {
		return "", err
	}
	if _, err := runK("-n", "demo", "create", "secret", "tls", "secure-tls", "--cert", crt, "--key", key); err != nil {
		return "", err
	}
	res, err := runK("apply", "-f", out)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d objects", strings.Count(res, "\n")+1), nil
}

// request sends one request through Caddy and describes the answer.
func request(st *stack.Stack, scheme, host, path, header string) string {
	addr := st.HTTPAddr()
	client := &http.Client{Timeout: 5 * time.Second}
	if scheme == "https" {
		addr = st.HTTPSAddr()
		// The demo's certificate is self-signed: check it names the host, not its issuer.
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{ServerName: host, InsecureSkipVerify: true,
			VerifyConnection: func(cs tls.ConnectionState) error { return cs.PeerCertificates[0].VerifyHostname(host) }}}
	}
	req, _ := http.NewRequest(http.MethodGet, scheme+"://"+addr+path, nil)
	req.Host = host
	if name, value, ok := strings.Cut(header, ": "); ok {
		req.Header.Set(name, value)
	}
	// Redirects are shown, not followed.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var a testenv.BackendAnswer
	if resp.StatusCode == http.StatusOK && json.Unmarshal(body, &a) == nil {
		extra := ""
		if a.TLS || scheme == "https" {
			extra = " (TLS, certificate for " + host + ")"
		}
		if a.Path != path {
			extra += " (backend saw path " + a.Path + ")"
		}
		return fmt.Sprintf("%d from backend %s%s", resp.StatusCode, a.Backend, extra)
	}
	if loc := resp.Header.Get("Location"); loc != "" {
		return fmt.Sprintf("%d Location: %s", resp.StatusCode, loc)
	}
	return fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
}
