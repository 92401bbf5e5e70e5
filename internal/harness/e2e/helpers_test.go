package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-io/sluice/internal/harness/stack"
	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/pusher/caddy"
	"github.com/sluice-io/sluice/translator/translate"
)

const class = "sluice"

// world is one test's system: its namespace, backends, and stack.
type world struct {
	t      *testing.T
	c      *testenv.Cluster
	ns     string
	st     *stack.Stack
	target *caddy.ModuleTarget
}

// newWorld makes a namespace with Services alpha and beta, each selecting the Pods of a
// Deployment of the test backend that the cluster in a box runs (their EndpointSlices are the
// real controller's), and starts the stack watching that namespace (unless start is false).
func newWorld(t *testing.T, start bool, cfg stack.Config) *world {
	t.Helper()
	c := testenv.SharedCluster(t)
	c.Workloads(t)
	w := &world{t: t, c: c, ns: c.Namespace(t)}
	w.startBackends()
	ensureClass(t, c)
	if start {
		w.start(cfg)
	}
	return w
}

// startBackends deploys the backends alpha and beta with their Services and waits until
// their Pods are ready endpoints.
func (w *world) startBackends() {
	w.t.Helper()
	ctx := context.Background()
	for _, name := range []string{"alpha", "beta"} {
		if _, err := w.c.Client.AppsV1().Deployments(w.ns).Create(ctx, testenv.BackendDeployment(name, 1, 2), metav1.CreateOptions{}); err != nil {
			w.t.Fatal(err)
		}
		w.service(name, name)
	}
	for _, name := range []string{"alpha", "beta"} {
		if err := w.c.WaitDeploymentReady(ctx, w.ns, name, name); err != nil {
			w.t.Fatal(err)
		}
	}
}

func ensureClass(t *testing.T, c *testenv.Cluster) {
	t.Helper()
	_, err := c.Client.NetworkingV1().IngressClasses().Create(context.Background(), &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: networkingv1.IngressClassSpec{Controller: "sluice.io/ingress-controller"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func (w *world) start(cfg stack.Config) {
	w.t.Helper()
	bin, err := testenv.Binaries()
	if err != nil {
		w.t.Fatal(err)
	}
	// The world's namespace, and any other the test names.
	cfg.Cluster, cfg.BinDir, cfg.Namespaces, cfg.LogLevel = w.c, bin, append([]string{w.ns}, cfg.Namespaces...), "debug"
	if cfg.Dir == "" {
		cfg.Dir = w.t.TempDir()
	}
	st, err := stack.Start(context.Background(), cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	w.st = st
	w.t.Cleanup(func() {
		if w.t.Failed() {
			w.t.Logf("stack logs:\n%s", st.Logs(40))
		}
		st.Stop()
	})
	// The pusher's render options, so that fingerprints compare.
	w.target, err = caddy.NewModule(caddy.Config{Admin: st.Caddy.AdminURL, Render: caddy.RenderOptions{HTTPListen: st.HTTPAddr(), HTTPSListen: st.HTTPSAddr()}})
	if err != nil {
		w.t.Fatal(err)
	}
}

// service creates Service name selecting the Pods of backend's Deployment.
func (w *world) service(name, backend string) {
	w.t.Helper()
	svc := testenv.BackendService(backend)
	svc.Name = name
	if _, err := w.c.Client.CoreV1().Services(w.ns).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func ingress(name, host, svc string) *networkingv1.Ingress {
	pt := networkingv1.PathTypePrefix
	cls := class
	return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.IngressSpec{IngressClassName: &cls,
		Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pt, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: svc, Port: networkingv1.ServiceBackendPort{Name: "http"}}}}}}}}}}}
}

// host is the host name of route i in this world.
func (w *world) host(i int) string { return fmt.Sprintf("r%d.%s.example.com", i, w.ns) }

// createRoutes creates n Ingresses, alternating between alpha and beta.
func (w *world) createRoutes(from, n int) {
	w.t.Helper()
	if err := w.tryCreateRoutes(from, n); err != nil {
		w.t.Fatal(err)
	}
}

// tryCreateRoutes is createRoutes for any goroutine: it returns the first error.
func (w *world) tryCreateRoutes(from, n int) error {
	for i := from; i < from+n; i++ {
		if _, err := w.c.Client.NetworkingV1().Ingresses(w.ns).Create(context.Background(), ingress(fmt.Sprintf("r%d", i), w.host(i), w.svcOf(i)), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create route %d: %w", i, err)
		}
	}
	return nil
}

func (w *world) svcOf(i int) string {
	if i%2 == 0 {
		return "alpha"
	}
	return "beta"
}

// answer sends one request through Caddy: the answering backend's Service, or the status.
func (w *world) answer(host, path string) string {
	req, _ := http.NewRequest(http.MethodGet, "http://"+w.st.HTTPAddr()+path, nil)
	req.Host = host
	resp, err := (&http.Client{Timeout: 3 * time.Second}).Do(req)
	if err != nil {
		return "error"
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return strconv.Itoa(resp.StatusCode)
	}
	var a testenv.BackendAnswer
	if json.Unmarshal(body, &a) != nil {
		return "unparsable"
	}
	return strings.TrimSuffix(a.Backend, "-"+w.ns)
}

// waitServed waits until routes [from, from+n) are all served by their backends.
func (w *world) waitServed(from, n int, d time.Duration) {
	w.t.Helper()
	next := from // the routes before next were served once: they are not asked again
	testenv.Eventually(w.t, d, fmt.Sprintf("routes %d to %d to be served", from, from+n-1), func() (bool, error) {
		for ; next < from+n; next++ {
			if got := w.answer(w.host(next), "/"); got != w.svcOf(next) {
				return false, fmt.Errorf("route %s not served by %s (got %s)", w.host(next), w.svcOf(next), got)
			}
		}
		return true, nil
	})
}

// caddyHash is the state hash of what Caddy's module routes by ("" for none).
func (w *world) caddyHash() string {
	w.t.Helper()
	fp, err := caddy.CurrentWithin(context.Background(), w.target, 10*time.Second)
	if err != nil {
		w.t.Fatal(err)
	}
	return fp
}

// expectedHash computes, independently of the watcher and translator, what Caddy must run
// for the cluster's objects: listed straight from the apiserver and translated; its state
// hash is what the module must hold.
func (w *world) expectedHash() (string, error) {
	return w.expectedHashOf(func(*networkingv1.Ingress) bool { return true })
}

// expectedHashOf is expectedHash with only the Ingresses keep keeps.
func (w *world) expectedHashOf(keep func(*networkingv1.Ingress) bool) (string, error) {
	ctx := context.Background()
	var in translate.Input
	ings, err := w.c.Client.NetworkingV1().Ingresses(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list ingresses: %w", err)
	}
	for i := range ings.Items {
		if keep(&ings.Items[i]) {
			in.Ingresses = append(in.Ingresses, &ings.Items[i])
		}
	}
	classes, err := w.c.Client.NetworkingV1().IngressClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list ingress classes: %w", err)
	}
	for i := range classes.Items {
		in.IngressClasses = append(in.IngressClasses, &classes.Items[i])
	}
	svcs, err := w.c.Client.CoreV1().Services(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list services: %w", err)
	}
	for i := range svcs.Items {
		in.Services = append(in.Services, &svcs.Items[i])
	}
	eps, err := w.c.Client.DiscoveryV1().EndpointSlices(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list endpointslices: %w", err)
	}
	for i := range eps.Items {
		in.EndpointSlices = append(in.EndpointSlices, &eps.Items[i])
	}
	// The watcher's kinds: kubernetes.io/tls Secrets, and Opaque ones for their ca.crt.
	for _, typ := range []string{"kubernetes.io/tls", "Opaque"} {
		secrets, err := w.c.Client.CoreV1().Secrets(w.ns).List(ctx, metav1.ListOptions{FieldSelector: "type=" + typ})
		if err != nil {
			return "", fmt.Errorf("list secrets: %w", err)
		}
		for i := range secrets.Items {
			in.Secrets = append(in.Secrets, &secrets.Items[i])
		}
	}
	res := translate.Translate(in, translate.Options{IngressClass: class, ControllerName: "sluice.io/ingress-controller", Now: time.Now()})
	return translate.Hash(res), nil
}

// waitConverged waits until Caddy runs exactly what the cluster says.
func (w *world) waitConverged(d time.Duration) {
	w.t.Helper()
	testenv.Eventually(w.t, d, "Caddy to run what the cluster says", func() (bool, error) {
		want, err := w.expectedHash()
		if err != nil {
			return false, err
		}
		got, err := caddy.CurrentWithin(context.Background(), w.target, 10*time.Second)
		if err != nil {
			return false, err
		}
		if got != want {
			return false, fmt.Errorf("caddy runs %.12s, the cluster says %.12s", got, want)
		}
		return true, nil
	})
}

// keeper polls Caddy with real requests for every kept route and records any answer that
// is not the route's backend.
type keeper struct {
	w          *world
	mu         sync.Mutex
	routes     map[string]string // host -> backend
	violations []string
	probes     atomic.Int64
	paused     atomic.Bool
	stop, done chan struct{}
}

func (w *world) keep(from, n int) *keeper {
	k := &keeper{w: w, routes: map[string]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	for i := from; i < from+n; i++ {
		k.routes[w.host(i)] = w.svcOf(i)
	}
	go k.run()
	w.t.Cleanup(k.finish)
	return k
}

func (k *keeper) run() {
	defer close(k.done)
	for {
		k.mu.Lock()
		hosts := make([]string, 0, len(k.routes))
		for h := range k.routes {
			hosts = append(hosts, h)
		}
		k.mu.Unlock()
		for _, h := range hosts {
			select {
			case <-k.stop:
				return
			default:
			}
			if k.paused.Load() {
				continue
			}
			got := k.w.answer(h, "/")
			k.probes.Add(1)
			k.mu.Lock()
			want, kept := k.routes[h]
			if kept && got != want && !k.paused.Load() && len(k.violations) < 20 {
				k.violations = append(k.violations, fmt.Sprintf("%s %s answered %s, want %s", time.Now().Format("15:04:05.000"), h, got, want))
			}
			k.mu.Unlock()
		}
		select {
		case <-k.stop:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// finish stops the keeper and fails the test on any violation.
func (k *keeper) finish() {
	select {
	case <-k.stop:
		return
	default:
	}
	close(k.stop)
	<-k.done
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.violations) > 0 {
		k.w.t.Errorf("route keeper: %d violations, first ones:\n%s", len(k.violations), strings.Join(k.violations, "\n"))
	}
	k.w.t.Logf("route keeper: %d probes", k.probes.Load())
}

// restrictedKubeconfig mints an identity with the watcher's rules minus the listed
// resources, and returns a kubeconfig for it.
func (w *world) restrictedKubeconfig(without ...string) string {
	w.t.Helper()
	all := map[string]string{"ingresses": "networking.k8s.io", "ingressclasses": "networking.k8s.io", "services": "", "endpointslices": "discovery.k8s.io", "secrets": "",
		"gatewayclasses": "gateway.networking.k8s.io", "gateways": "gateway.networking.k8s.io", "httproutes": "gateway.networking.k8s.io", "referencegrants": "gateway.networking.k8s.io",
		"namespaces": ""}
	var rules []rbacv1.PolicyRule
	for res, group := range all {
		skip := false
		for _, x := range without {
			skip = skip || x == res
		}
		if !skip {
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{res}, Verbs: []string{"get", "list", "watch"}})
		}
	}
	user := "e2e-" + testenv.RandSuffix()
	cfg, err := w.c.UserConfig(user)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := w.c.Grant(context.Background(), rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}, rules); err != nil {
		w.t.Fatal(err)
	}
	path, err := w.c.WriteKubeconfig(cfg, user)
	if err != nil {
		w.t.Fatal(err)
	}
	return path
}
