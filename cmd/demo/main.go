// Command demo runs the whole of Sluice on this machine (`make demo`): etcd and
// kube-apiserver, a cluster in a box (kube-controller-manager and a pod runner that runs Pods
// as processes in network namespaces), Caddy, and the watcher, translator and pusher as
// separate processes. It applies examples/ with kubectl, runs the backends as Deployments,
// shows requests flowing through Caddy, scales a Deployment and shows the traffic spreading
// to its new Pods, and keeps running until Ctrl-C (or exits, with -once).
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
	"slices"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

var stepN, steps = 0, 14

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
		cluster   *testenv.Cluster
		workloads *testenv.Workloads
		st        *stack.Stack
		dir       string
	)
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "\ndemo: %v\n", err)
		if workloads != nil {
			fmt.Fprintf(os.Stderr, "\nkube-controller-manager:\n%s\n", workloads.ControllerManagerLogs(15))
		}
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
	if err := step("starting kube-controller-manager and the pod runner (the cluster in a box)", func() (string, error) {
		var err error
		workloads, err = cluster.StartWorkloads(ctx)
		if err != nil {
			return "", fmt.Errorf("%w\n(Pods run in network namespaces, which need root: run make demo as root)", err)
		}
		return fmt.Sprintf("node %s, Pods on a bridge at %s", testenv.NodeName, workloads.Network.HostIP), nil
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
	// The backends' Pods are ready before the Ingresses arrive, so that no route starts
	// without endpoints.
	if err := step("applying examples/10-services.yaml and running alpha and beta as Deployments", func() (string, error) {
		cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", cluster.AdminKubeconfig, "apply", "-f", filepath.Join(examples, "10-services.yaml"))
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("kubectl apply: %v\n%s", err, out)
		}
		for _, name := range []string{"alpha", "beta"} {
			d := testenv.BackendDeployment(name, 1, 0)
			d.Namespace = "demo"
			if _, err := cluster.Client.AppsV1().Deployments("demo").Create(ctx, d, metav1.CreateOptions{}); err != nil {
				return "", err
			}
		}
		// The EndpointSlice controller, not the demo, turns the ready Pods into endpoints.
		for _, name := range []string{"alpha", "beta"} {
			if err := cluster.WaitDeploymentReady(ctx, "demo", name, name); err != nil {
				return "", err
			}
		}
		return "Pods ready, EndpointSlices written by kube-controller-manager", nil
	}); err != nil {
		return fail(err)
	}
	kc := func(args ...string) {
		fmt.Printf("      $ kubectl %s\n", strings.Join(args, " "))
		out, _ := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", cluster.AdminKubeconfig}, args...)...).CombinedOutput()
		for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
			fmt.Println("      " + l)
		}
	}
	kc("get", "pods", "-n", "demo", "-o", "wide")
	if err := step("applying examples/ with kubectl", func() (string, error) {
		return applyExamples(ctx, kubectl, cluster.AdminKubeconfig, examples, dir)
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
		// ingress-nginx's use-regex and rewrite-target, served unchanged.
		{"http", "legacy.sluice.local", "/shop/cart/items", ""},
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
		kc(args...)
	}
	sluicectl := filepath.Join(binDir, "sluicectl")
	_ = step("the translator's view (sluicectl config)", func() (string, error) { return "", nil })
	out, _ := exec.CommandContext(ctx, sluicectl, "config", "--addr", st.TranslatorAddr).CombinedOutput()
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		fmt.Println("      " + l)
	}
	if err := scaleOut(ctx, cluster, st, kubectl, kc); err != nil {
		return fail(err)
	}
	fmt.Printf(`
Sluice is running. Try it:
  export KUBECONFIG=%s
  %s get ingress -A
  %s config --addr %s          # the translator's config, findings and pushers
  %s watch --addr %s --quiet   # the watch stream and its verified marker
  %s -n demo scale deployment beta --replicas 2
  %s -n demo logs deployment/alpha   # a Pod's output, through the pod runner
  curl -H 'Host: shop.sluice.local' http://%s/api
Change examples (kubectl apply, delete, edit) and watch them take effect.
Logs: %s
`, cluster.AdminKubeconfig, kubectl, sluicectl, st.TranslatorAddr, sluicectl, st.WatcherAddr, kubectl, kubectl, st.HTTPAddr(), dir)
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

func applyExamples(ctx context.Context, kubectl, kubeconfig, examples, dir string) (string, error) {
	out := filepath.Join(dir, "examples")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	files, err := filepath.Glob(filepath.Join(examples, "*.yaml"))
	if err != nil {
		return "", err
	}
	// Only the .yaml files: the templates (.tmpl) are the hand-written EndpointSlices for
	// where no controller-manager runs; here kube-controller-manager writes them.
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(out, filepath.Base(f)), data, 0o644); err != nil {
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
	// The namespace exists already (10-services.yaml, with the Deployments): the Secret goes
	// in before the Ingresses that use it.
	if _, err := runK("-n", "demo", "create", "secret", "tls", "secure-tls", "--cert", crt, "--key", key); err != nil {
		return "", err
	}
	res, err := runK("apply", "-f", out)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d objects", strings.Count(res, "\n")+1), nil
}

// scaleOut scales Deployment alpha from 1 to 3 replicas and shows Caddy spreading
// shop.sluice.local's requests over the new Pods; it fails unless at least two Pods answer.
func scaleOut(ctx context.Context, cluster *testenv.Cluster, st *stack.Stack, kubectl string, kc func(...string)) error {
	const replicas = 3
	if err := step(fmt.Sprintf("scaling Deployment alpha to %d replicas", replicas), func() (string, error) {
		cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", cluster.AdminKubeconfig, "-n", "demo", "scale", "deployment", "alpha", fmt.Sprintf("--replicas=%d", replicas))
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("kubectl scale: %v\n%s", err, out)
		}
		return "", cluster.WaitDeploymentReady(ctx, "demo", "alpha", "alpha")
	}); err != nil {
		return err
	}
	kc("get", "pods", "-n", "demo", "-l", "app=alpha", "-o", "wide")
	pods, err := cluster.Client.CoreV1().Pods("demo").List(ctx, metav1.ListOptions{LabelSelector: "app=alpha"})
	if err != nil {
		return err
	}
	var want []string
	for _, p := range pods.Items {
		want = append(want, p.Name)
	}
	// The new endpoints reach Caddy through the watcher, translator and pusher a moment
	// after the Pods are ready: wait until each Pod has answered once.
	if err := step("waiting until Caddy sends to every Pod of alpha", func() (string, error) {
		seen := map[string]bool{}
		deadline := time.Now().Add(time.Minute)
		for {
			if a, ok := answer(st, "shop.sluice.local", "/"); ok && slices.Contains(want, a.Pod) {
				seen[a.Pod] = true
			}
			if len(seen) == len(want) {
				return "", nil
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return "", fmt.Errorf("after a minute only %d of the Pods %v answered through Caddy", len(seen), want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}); err != nil {
		return err
	}
	_ = step("sending 12 requests to shop.sluice.local through Caddy", func() (string, error) { return "", nil })
	count := map[string]int{}
	for i := 1; i <= 12; i++ {
		a, ok := answer(st, "shop.sluice.local", "/")
		who := "no answer from a backend"
		if ok {
			who = fmt.Sprintf("backend %s, pod %s", a.Backend, a.Pod)
			count[a.Pod]++
		}
		fmt.Printf("      #%-2d http://shop.sluice.local/ -> %s\n", i, who)
	}
	var spread []string
	for _, p := range want {
		spread = append(spread, fmt.Sprintf("%s: %d", p, count[p]))
	}
	fmt.Printf("      answers by pod: %s\n", strings.Join(spread, ", "))
	if len(count) < 2 {
		return fmt.Errorf("after scaling alpha to %d replicas, only %d Pod answered 12 requests (%v): Caddy does not spread the traffic", replicas, len(count), count)
	}
	return nil
}

// answer sends a plain HTTP request through Caddy and returns the backend's answer.
func answer(st *stack.Stack, host, path string) (testenv.BackendAnswer, bool) {
	var a testenv.BackendAnswer
	req, _ := http.NewRequest(http.MethodGet, "http://"+st.HTTPAddr()+path, nil)
	req.Host = host
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return a, false
	}
	defer resp.Body.Close()
	return a, resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&a) == nil
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
		return fmt.Sprintf("%d from backend %s (pod %s)%s", resp.StatusCode, a.Backend, a.Pod, extra)
	}
	if loc := resp.Header.Get("Location"); loc != "" {
		return fmt.Sprintf("%d Location: %s", resp.StatusCode, loc)
	}
	return fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
}
