package testenv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/sluice-io/sluice/internal/harness/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// The apiserver answers and serves the kinds Sluice watches, and a CRD once installed.
func TestClusterServesIngressEndpointSliceAndCRD(t *testing.T) {
	c := testenv.SharedCluster(t)
	ctx := ctxT(t)
	ns := c.Namespace(t)
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: networkingv1.IngressSpec{
		DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}},
	}}
	if _, err := c.Client.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ingress: %v", err)
	}
	if _, err := c.Client.NetworkingV1().Ingresses(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Fatalf("get ingress: %v", err)
	}
	// Hand-made: this test is of what the apiserver accepts as an endpoint address.
	eps := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.251.0.9"}}},
	}
	if _, err := c.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, eps, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create endpointslice: %v", err)
	}
	// The reason test backends live in a network namespace: loopback addresses are refused.
	eps.Name, eps.Endpoints[0].Addresses = "web-loopback", []string{"127.0.0.1"}
	if _, err := c.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, eps, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("endpointslice with a loopback address: got %v, want Invalid", err)
	}

	group := testenv.RandSuffix() + ".example.com"
	crd := fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.%[1]s}
spec:
  group: %[1]s
  names: {kind: Widget, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`, group)
	if err := c.InstallCRD(ctx, []byte(crd)); err != nil {
		t.Fatalf("install CRD: %v", err)
	}
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	if _, err := c.Dynamic().Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("list custom resources: %v", err)
	}
}

// A restricted identity gets exactly what it was granted: 200 on that, 403 on the rest.
func TestRestrictedIdentityGetsOnlyItsRules(t *testing.T) {
	c := testenv.SharedCluster(t)
	ctx := ctxT(t)
	ns := c.Namespace(t)
	rules := []rbacv1.PolicyRule{{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses"}, Verbs: []string{"get", "list", "watch"}}}

	userName := "restricted-" + testenv.RandSuffix()
	userCfg, err := c.UserConfig(userName)
	if err != nil {
		t.Fatal(err)
	}
	user := kubernetes.NewForConfigOrDie(userCfg)
	if _, err := user.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("before the grant: list ingresses: got %v, want 403", err)
	}
	if err := c.Grant(ctx, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: userName}, rules); err != nil {
		t.Fatal(err)
	}
	waitAllowed(t, ctx, user, ns)
	if _, err := user.CoreV1().Services(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("list services: got %v, want 403", err)
	}

	saCfg, err := c.ServiceAccountConfig(ctx, ns, "watcher")
	if err != nil {
		t.Fatal(err)
	}
	sa := kubernetes.NewForConfigOrDie(saCfg)
	if err := c.Grant(ctx, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "watcher"}, rules); err != nil {
		t.Fatal(err)
	}
	waitAllowed(t, ctx, sa, ns)
	if _, err := sa.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("service account: list secrets: got %v, want 403", err)
	}
}

// waitAllowed waits until a fresh grant is in the authorizer's cache (RBAC is eventually
// consistent through the apiserver's informers).
func waitAllowed(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, "the granted rule to take effect", func() (bool, error) {
		_, err := cs.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{})
		return err == nil, err
	})
}

// Restarting the apiserver keeps the data (etcd stays).
func TestAPIServerRestartKeepsData(t *testing.T) {
	c := testenv.SharedCluster(t)
	ctx := ctxT(t)
	ns := c.Namespace(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"}, Data: map[string]string{"k": "v"}}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, "kept", metav1.GetOptions{})
	if err != nil || got.Data["k"] != "v" {
		t.Fatalf("after restart: %v %v", got, err)
	}
}

// Cutting the proxy breaks a watch; restoring it lets a new watch see new events.
func TestCutProxyBreaksWatchAndRestoreRecovers(t *testing.T) {
	c := testenv.SharedCluster(t)
	ctx := ctxT(t)
	ns := c.Namespace(t)
	p, err := testenv.NewTCPProxy(strings.TrimPrefix(c.Host, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cfg := c.AdminConfig()
	cfg.Host = "https://" + p.Addr()
	cfg.ServerName = "localhost"
	cs := kubernetes.NewForConfigOrDie(cfg)
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Cut()
	select {
	case _, ok := <-w.ResultChan():
		for ok {
			_, ok = <-w.ResultChan()
		}
	case <-ctx.Done():
		t.Fatal("watch survived the cut")
	}
	// client-go retries a refused GET for a while; two seconds are plenty to show it fails.
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().ConfigMaps(ns).List(short, metav1.ListOptions{}); err == nil {
		t.Fatal("list through a cut proxy succeeded")
	}
	p.Restore()
	w, err = cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch after restore: %v", err)
	}
	defer w.Stop()
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Added {
			t.Fatalf("event %v", ev.Type)
		}
	case <-ctx.Done():
		t.Fatal("no event after restore")
	}
}

// Caddy accepts a config through /load and serves it; a restart loses it.
func TestCaddyLoadServeAndRestart(t *testing.T) {
	ctx := ctxT(t)
	cd, err := testenv.StartCaddy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cd.Stop()
	cfg := fmt.Sprintf(`{"admin":{"listen":%q},"apps":{"http":{"servers":{"s":{"listen":["127.0.0.1:%d"],
		"routes":[{"handle":[{"handler":"static_response","body":"hello from caddy"}]}]}}}}}`,
		strings.TrimPrefix(cd.AdminURL, "http://"), cd.HTTPPort)
	if err := cd.Load(ctx, []byte(cfg)); err != nil {
		t.Fatal(err)
	}
	if body := get(t, fmt.Sprintf("http://127.0.0.1:%d/", cd.HTTPPort), ""); body != "hello from caddy" {
		t.Fatalf("body %q", body)
	}
	if err := cd.Load(ctx, []byte(`{"apps":{"http":{"servers":{"s":{"listen":["not an address"]}}}}}`)); err == nil {
		t.Fatal("caddy accepted an invalid config")
	}
	cd.Kill()
	if err := cd.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := cd.Config(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got), "hello from caddy") {
		t.Fatalf("config survived a restart: %s", got)
	}
}

// An EndpointSlice pointing at a test backend is accepted, and Caddy reaches the backend.
func TestEndpointSliceBackendReachableThroughCaddy(t *testing.T) {
	c := testenv.SharedCluster(t)
	ctx := ctxT(t)
	ns := c.Namespace(t)
	n := testenv.SharedNet(t)
	b, err := n.StartBackend("alpha")
	if err != nil {
		t.Fatal(err)
	}
	eps := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "alpha-1", Labels: map[string]string{discoveryv1.LabelServiceName: "alpha"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{b.Address}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(b.Port))}},
	}
	got, err := c.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, eps, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("apiserver refused the backend's address: %v", err)
	}
	cd, err := testenv.StartCaddy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cd.Stop()
	dial := fmt.Sprintf("%s:%d", got.Endpoints[0].Addresses[0], *got.Ports[0].Port)
	cfg := fmt.Sprintf(`{"admin":{"listen":%q},"apps":{"http":{"servers":{"s":{"listen":["127.0.0.1:%d"],
		"routes":[{"handle":[{"handler":"reverse_proxy","upstreams":[{"dial":%q}]}]}]}}}}}`,
		strings.TrimPrefix(cd.AdminURL, "http://"), cd.HTTPPort, dial)
	if err := cd.Load(ctx, []byte(cfg)); err != nil {
		t.Fatal(err)
	}
	var ans testenv.BackendAnswer
	if err := json.Unmarshal([]byte(get(t, fmt.Sprintf("http://127.0.0.1:%d/x", cd.HTTPPort), "example.com")), &ans); err != nil {
		t.Fatal(err)
	}
	if ans.Backend != "alpha" || ans.Path != "/x" || ans.Host != "example.com" {
		t.Fatalf("answer %+v", ans)
	}
}

func get(t *testing.T, url, host string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if host != "" {
		req.Host = host
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	return strings.TrimSpace(string(b))
}
