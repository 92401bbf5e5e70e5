package main_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// The tests here install the Gateway API's CRDs on the package's shared cluster and delete
// them when they end: the other tests run watchers with --gateway-api=auto (the default)
// and count the kinds they watch.
func withoutGatewayAPI(t *testing.T, c *testenv.Cluster) {
	t.Helper()
	testenv.DeleteGatewayAPICRDs(t, c) // a failed earlier run may have left them
	t.Cleanup(func() { testenv.DeleteGatewayAPICRDs(t, c) })
}

var gatewayKindKeys = []string{
	"gateway.networking.k8s.io/v1/Gateway", "gateway.networking.k8s.io/v1/GatewayClass",
	"gateway.networking.k8s.io/v1/HTTPRoute", "gateway.networking.k8s.io/v1/ReferenceGrant",
	"gateway.networking.k8s.io/v1/ListenerSet",      // optional, and in the standard channel installed
	"gateway.networking.k8s.io/v1/BackendTLSPolicy", // likewise
	"/v1/Namespace", // watched with them: listeners select route namespaces by label
	"/v1/ConfigMap", // watched with BackendTLSPolicies: their CA certificates
}

// gatewayRules are the read rules of the four Gateway API kinds and Namespaces, less the verbs named in
// except ("httproutes/list").
func gatewayRules(except ...string) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	for _, r := range []string{"gatewayclasses", "gateways", "httproutes", "referencegrants", "namespaces"} {
		var verbs []string
		for _, v := range []string{"get", "list", "watch"} {
			if !slices.Contains(except, r+"/"+v) {
				verbs = append(verbs, v)
			}
		}
		group := "gateway.networking.k8s.io"
		if r == "namespaces" {
			group = ""
		}
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{r}, Verbs: verbs})
	}
	return rules
}

// epochSeen is one stream a reconnecting client followed.
type epochSeen struct {
	epoch string
	first *watchv1.WatchResponse
	// markerKinds are the KindKeys of the marker's inventory, sorted; nil before the marker.
	markerKinds []string
	end         error
}

// reconnecting follows the watcher as a translator does: one stream after another, each
// resuming from where the last ended, through one Mirror that checks every message.
type reconnecting struct {
	t       *testing.T
	mu      sync.Mutex
	mirror  *watchstream.Mirror
	streams []*epochSeen
	err     error // a broken stream (the Mirror refused a message), or a refusal
}

func followReconnecting(t *testing.T, addr string) *reconnecting {
	t.Helper()
	conn, err := grpcx.Dial(addr, grpcx.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &reconnecting{t: t, mirror: watchstream.NewMirror()}
	go func() {
		client := watchv1.NewWatchServiceClient(conn)
		for ctx.Err() == nil {
			r.mu.Lock()
			req := &watchv1.WatchRequest{ClientName: "reconnecting", ResumeEpoch: r.mirror.Epoch(), ResumeRevision: r.mirror.Revision()}
			r.mu.Unlock()
			stream, err := client.Watch(ctx, req, waitForReady)
			var first *watchv1.WatchResponse
			if err == nil {
				first, err = stream.Recv()
			}
			if err != nil {
				if status.Code(err) != codes.Unavailable {
					r.fail(err)
					return
				}
				time.Sleep(50 * time.Millisecond) // the watcher is between epochs; poll
				continue
			}
			seen := &epochSeen{epoch: first.GetEpoch(), first: first}
			r.mu.Lock()
			r.mirror.StartStream()
			r.streams = append(r.streams, seen)
			r.mu.Unlock()
			for m := first; ; {
				r.mu.Lock()
				ch, err := r.mirror.ApplyKeeping(m)
				if err == nil && m.GetEpoch() != seen.epoch {
					err = errEpochMidStream
				}
				if ch == watchstream.ChangeSynced {
					for _, ki := range m.GetInitialSyncComplete().GetInventory() {
						seen.markerKinds = append(seen.markerKinds, watchstream.KindKey(ki.GetKind()))
					}
					slices.Sort(seen.markerKinds)
				}
				r.mu.Unlock()
				if err != nil {
					r.fail(err)
					return
				}
				if m, err = stream.Recv(); err != nil {
					r.mu.Lock()
					seen.end = err
					r.mu.Unlock()
					break
				}
			}
		}
	}()
	return r
}

var errEpochMidStream = status.Error(codes.Internal, "another epoch mid-stream")

func (r *reconnecting) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if status.Code(err) != codes.Canceled { // the test ended
		r.err = err
	}
}

// waitEpoch waits until the latest stream is of an epoch other than those in not, its marker
// came, and cond holds over it and the mirror; it returns that stream.
func (r *reconnecting) waitEpoch(d time.Duration, what string, not []string, cond func(s *epochSeen, m *watchstream.Mirror) bool) *epochSeen {
	r.t.Helper()
	var got *epochSeen
	testenv.Eventually(r.t, d, what, func() (bool, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if n := len(r.streams); n > 0 {
			s := r.streams[n-1]
			if s.markerKinds != nil && !slices.Contains(not, s.epoch) && cond(s, r.mirror) {
				got = s
				return true, nil
			}
		}
		if r.err != nil {
			return false, testenv.Permanent(r.err)
		}
		return false, nil
	})
	return got
}

func (r *reconnecting) mirrorHas(k watchstream.ObjectKey) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mirror.Object(k) != nil
}

// endOf returns how the stream of epoch ended (nil while it is open).
func (r *reconnecting) endOf(epoch string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.streams {
		if s.epoch == epoch && s.end != nil {
			return s.end
		}
	}
	return nil
}

func (r *reconnecting) streamsOf(epoch string) []*epochSeen {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*epochSeen
	for _, s := range r.streams {
		if s.epoch == epoch {
			out = append(out, s)
		}
	}
	return out
}

var gatewayGVR = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"}

// Scenario 11: with --gateway-api=auto, the Gateway API's CRDs appear and disappear while the
// watcher runs. Each change starts a new epoch: the old epoch's stream ends UNAVAILABLE naming
// it, a client resuming it gets a snapshot of the new epoch, and the new marker's inventory
// lists exactly the kinds now served: the four Gateway API kinds once installed (with the
// Gateway in the new epoch's snapshot), none once deleted.
func TestScenario11GatewayAPIAppearsAndDisappearsNewEpochs(t *testing.T) {
	c := testenv.SharedCluster(t)
	withoutGatewayAPI(t, c)
	ns := c.Namespace(t)
	w := startWatcher(t, c.AdminKubeconfig, "--namespaces", ns, "--kinds", namespacedKinds, "--discovery-interval", "200ms")
	r := followReconnecting(t, w.addr)
	base := []string{"/v1/Secret", "/v1/Service", "discovery.k8s.io/v1/EndpointSlice", "networking.k8s.io/v1/Ingress"}
	slices.Sort(base)
	e1 := r.waitEpoch(time.Minute, "the first epoch's marker", nil, func(*epochSeen, *watchstream.Mirror) bool { return true })
	if !slices.Equal(e1.markerKinds, base) {
		t.Fatalf("first marker's inventory %v, want %v (no Gateway API kinds without their CRDs)", e1.markerKinds, base)
	}

	testenv.InstallGatewayAPICRDs(t, c)
	gw := unstructuredOf(map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": "gw", "namespace": ns},
		"spec": map[string]any{"gatewayClassName": "sluice", "listeners": []any{
			map[string]any{"name": "http", "protocol": "HTTP", "port": int64(80)}}}})
	if _, err := c.Dynamic().Resource(gatewayGVR).Namespace(ns).Create(context.Background(), gw, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gwKey := watchstream.ObjectKey{Kind: "gateway.networking.k8s.io/v1/Gateway", Namespace: ns, Name: "gw"}
	withGateway := append(append([]string{}, base...), gatewayKindKeys...)
	slices.Sort(withGateway)
	// The CRDs become served one after another: epochs may start in between, each covering
	// the kinds served then; the one that serves all four comes, with the Gateway.
	e2 := r.waitEpoch(time.Minute, "an epoch with the four Gateway API kinds", []string{e1.epoch}, func(s *epochSeen, _ *watchstream.Mirror) bool {
		return slices.Equal(s.markerKinds, withGateway)
	})
	r.waitEpoch(time.Minute, "the Gateway", []string{e1.epoch}, func(s *epochSeen, m *watchstream.Mirror) bool {
		return s.epoch == e2.epoch && m.Object(gwKey) != nil
	})
	if end := r.endOf(e1.epoch); status.Code(end) != codes.Unavailable || !strings.Contains(end.Error(), "epoch "+e1.epoch+" ended") {
		t.Fatalf("the first epoch's stream ended with %v, want UNAVAILABLE naming epoch %s", end, e1.epoch)
	}
	for _, s := range r.streamsOf(e2.epoch) {
		if s.first.GetSnapshotStart() == nil {
			t.Fatalf("a client resuming epoch %s got %v first, want the new epoch's snapshot", e1.epoch, s.first)
		}
	}
	// A client that connects now gets the Gateway in the new epoch's snapshot.
	fresh := follow(t, w.addr, &watchv1.WatchRequest{ClientName: "fresh"})
	fresh.waitMarker(time.Minute)
	fresh.mu.Lock()
	inSnapshot := slices.ContainsFunc(fresh.objectsAtMarker, func(o *watchv1.Object) bool { return watchstream.KeyOf(o) == gwKey })
	freshEpoch := fresh.mirror.Epoch()
	fresh.mu.Unlock()
	if freshEpoch == e1.epoch || !inSnapshot {
		t.Fatalf("a fresh client got epoch %s (first was %s), Gateway in its snapshot %v", freshEpoch, e1.epoch, inSnapshot)
	}
	if !strings.Contains(w.Logs(), "served kinds changed; starting a new epoch") {
		t.Fatalf("the watcher did not say why a new epoch started:\n%s", w.LogTail(20))
	}

	testenv.DeleteGatewayAPICRDs(t, c)
	e3 := r.waitEpoch(time.Minute, "an epoch without the Gateway API kinds", []string{e1.epoch, e2.epoch}, func(s *epochSeen, m *watchstream.Mirror) bool {
		return slices.Equal(s.markerKinds, base)
	})
	if m := r.mirrorHas(gwKey); m {
		t.Fatalf("the Gateway is still held in epoch %s, whose marker lists no Gateway API kind", e3.epoch)
	}
	if end := r.endOf(e2.epoch); status.Code(end) != codes.Unavailable {
		t.Fatalf("the second epoch's stream ended with %v, want UNAVAILABLE", end)
	}
	if code := httpStatus(t, "http://"+w.httpAddr+"/readyz"); code != 200 {
		t.Fatalf("/readyz answered %d after the third epoch's barrier opened", code)
	}
}

// Scenario 2 for the Gateway API: with --gateway-api=on its kinds are required; without their
// CRDs no marker is ever sent and the watcher exits non-zero naming them.
func TestScenario2GatewayAPIOnWithoutCRDsExitsNamingTheKind(t *testing.T) {
	c := testenv.SharedCluster(t)
	withoutGatewayAPI(t, c)
	w := startWatcher(t, c.AdminKubeconfig, "--gateway-api", "on", "--sync-timeout", "3s")
	if code := w.Process.WaitExit(t, time.Minute); code == 0 {
		t.Fatal("watcher exited 0 with --gateway-api=on and no Gateway API CRDs")
	}
	logs := w.Logs()
	for _, want := range []string{"initial sync did not complete within 3s", "gateway.networking.k8s.io/v1/gatewayclasses: not served by the apiserver", "gateway.networking.k8s.io/v1/httproutes: not served by the apiserver"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, w.LogTail(10))
		}
	}
}

// Scenario 1 for HTTPRoute: with --gateway-api=on and the CRDs installed, an identity that
// may not list and watch httproutes gets no marker; the watcher exits after the timeout
// naming httproutes and the 403.
func TestScenario1HTTPRouteListForbiddenNoMarkerExitNamingKind(t *testing.T) {
	// A cluster of its own: the CRDs stay installed until it stops.
	c, err := testenv.StartCluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	testenv.InstallGatewayAPICRDs(t, c)
	kc, _ := restrictedKubeconfig(t, c, append(watcherRules(), gatewayRules("httproutes/list", "httproutes/watch")...))
	w := startWatcher(t, kc, "--gateway-api", "on", "--sync-timeout", "5s")
	f := follow(t, w.addr, &watchv1.WatchRequest{ClientName: "scenario1-httproute"})
	if code := w.Process.WaitExit(t, time.Minute); code == 0 {
		t.Fatalf("watcher exited 0 after a sync timeout")
	}
	logs := w.Logs()
	for _, want := range []string{"initial sync did not complete within 5s", "gateway.networking.k8s.io/v1/httproutes: forbidden (403)", `resource \"httproutes\"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, w.LogTail(15))
		}
	}
	<-f.done
	if f.hasMarker() {
		t.Fatal("a marker was sent although httproutes never synced")
	}
}
