package main_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/harness/testenv"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

// configFollower is a Config stream client that applies nothing and records what it got.
type configFollower struct {
	mu      sync.Mutex
	markers []*configv1.InitialSyncComplete
	configs []*configv1.Config
	chain   contract.Chain // followed as a pusher follows it
	errs    []error
	changed chan struct{}
	client  configv1.ConfigServiceClient
}

func followConfig(t *testing.T, addr string) *configFollower {
	t.Helper()
	conn, err := grpcx.Dial(addr, grpcx.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f := &configFollower{changed: make(chan struct{}, 1), client: configv1.NewConfigServiceClient(conn)}
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, err := range f.errs {
			t.Errorf("the config stream broke its chain: %v", err)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := f.client.StreamConfig(ctx, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Hello{Hello: &configv1.Hello{
		PusherId: "test-follower", DataPlane: configv1.DataPlaneKind_DATA_PLANE_KIND_NONE}}}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			f.mu.Lock()
			if mk := m.GetInitialSyncComplete(); mk != nil {
				f.markers = append(f.markers, mk)
			}
			// Follow the chain as a pusher does: the complete state, then deltas onto it.
			var c *configv1.Config
			if v, err := f.chain.Receive(m); err != nil {
				f.errs = append(f.errs, err)
			} else if v != nil {
				c = contract.RefOf(v)
				c.Resources = f.chain.State.Resources()
			}
			if c != nil {
				// No ACK: a follower of data plane NONE applies nothing, and may not say so.
				f.configs = append(f.configs, c)
			}
			f.mu.Unlock()
			select {
			case f.changed <- struct{}{}:
			default:
			}
		}
	}()
	return f
}

func (f *configFollower) waitFor(t *testing.T, what string, cond func(markers []*configv1.InitialSyncComplete, cfgs []*configv1.Config) bool) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		f.mu.Lock()
		ok := cond(f.markers, f.configs)
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-f.changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (f *configFollower) counts() (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.markers), len(f.configs)
}

func createApp(t *testing.T, c *testenv.Cluster, ns string) {
	t.Helper()
	ctx := context.Background()
	cls := "sluice-" + ns
	if _, err := c.Client.NetworkingV1().IngressClasses().Create(ctx, &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: cls},
		Spec: networkingv1.IngressClassSpec{Controller: "sluice.io/ingress-controller"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A hand-made EndpointSlice: these tests are about the streams, and need one fixed endpoint
	// that nothing serves rather than a workload (the e2e scenarios run on Deployments).
	if _, err := c.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}, AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080))}}, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.251.200.2"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pt := networkingv1.PathTypePrefix
	if _, err := c.Client.NetworkingV1().Ingresses(ns).Create(ctx, &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: networkingv1.IngressSpec{
		IngressClassName: &cls,
		Rules: []networkingv1.IngressRule{{Host: ns + ".example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pt, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func watcherRules(withIngresses bool) []rbacv1.PolicyRule {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingressclasses"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"services", "secrets"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
	}
	if withIngresses {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses"}, Verbs: []string{"get", "list", "watch"}})
	}
	return rules
}

// The translator builds and serves no config before the watcher's marker; once the marker
// comes, its own marker names the first complete version, which is sent next. A watcher
// restart opens a new epoch, and the new marker comes only after the new stream is complete.
func TestNoConfigBeforeMarkerAndNewEpochOnWatcherRestart(t *testing.T) {
	c := testenv.SharedCluster(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	createApp(t, c, ns)
	user := "watcher-" + testenv.RandSuffix()
	cfg, err := c.UserConfig(user)
	if err != nil {
		t.Fatal(err)
	}
	subject := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}
	if err := c.Grant(ctx, subject, watcherRules(false)); err != nil {
		t.Fatal(err)
	}
	kc, err := c.WriteKubeconfig(cfg, user)
	if err != nil {
		t.Fatal(err)
	}
	a := testenv.Addrs(t, 4)
	wargs := []string{"--kubeconfig", kc, "--listen", a[0], "--http-listen", a[1], "--sync-timeout", "5m"}
	w := testenv.StartBinary(t, "watcher", wargs...)
	tr := testenv.StartBinary(t, "translator", "--watcher-addr", a[0], "--listen", a[2], "--http-listen", a[3],
		"--ingress-class", "sluice-"+ns, "--log-level", "debug")
	f := followConfig(t, a[2])
	w.WaitLog(t, "forbidden (403)")
	tr.WaitLog(t, "read-only config stream opened")
	// The translator is connected to a watcher whose barrier is shut: nothing may come.
	st, err := f.client.GetStatus(ctx, &configv1.GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if st.GetSynced() || st.GetCurrent() != nil {
		t.Fatalf("translator has a config before the watcher's marker: %v", st)
	}
	if m, n := f.counts(); m != 0 || n != 0 {
		t.Fatalf("%d markers and %d configs before the watcher's marker", m, n)
	}

	if err := c.Grant(ctx, subject, watcherRules(true)); err != nil {
		t.Fatal(err)
	}
	f.waitFor(t, "the first config", func(ms []*configv1.InitialSyncComplete, cs []*configv1.Config) bool { return len(cs) >= 1 })
	f.mu.Lock()
	first, mk := f.configs[0], f.markers[0]
	f.mu.Unlock()
	if mk.GetVersion() != first.GetVersion() || mk.GetEpoch() != first.GetEpoch() {
		t.Fatalf("marker names %s/%d, first config is %s/%d", mk.GetEpoch(), mk.GetVersion(), first.GetEpoch(), first.GetVersion())
	}
	if vh := first.GetResources().GetVirtualHosts(); len(vh) != 1 || vh[0].GetHostname() != ns+".example.com" {
		t.Fatalf("first config hosts: %v", vh)
	}

	// Restart the watcher: a new watcher epoch, so a new translator epoch and a new marker.
	w.Kill()
	w2 := testenv.StartBinary(t, "watcher", wargs...)
	_ = w2
	f.waitFor(t, "the second marker", func(ms []*configv1.InitialSyncComplete, cs []*configv1.Config) bool {
		return len(ms) == 2 && len(cs) >= 2 && cs[len(cs)-1].GetEpoch() == ms[1].GetEpoch()
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	m2, c2 := f.markers[1], f.configs[len(f.configs)-1]
	if m2.GetEpoch() == mk.GetEpoch() || m2.GetWatcherEpoch() == mk.GetWatcherEpoch() {
		t.Fatalf("after a watcher restart the epochs did not change: %v then %v", mk, m2)
	}
	if c2.GetHash() != first.GetHash() {
		t.Fatalf("the same cluster gave a different config after the restart")
	}
}
