package main_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/kinds"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

var namespacedKinds = "networking.k8s.io/v1/ingresses,v1/services,discovery.k8s.io/v1/endpointslices,v1/secrets?type=kubernetes.io/tls"

func createServices(t *testing.T, cs kubernetes.Interface, ns, prefix string, n int) {
	t.Helper()
	if err := tryCreateServices(cs, ns, prefix, n); err != nil {
		t.Fatal(err)
	}
}

// tryCreateServices is createServices for any goroutine: it returns the first error.
func tryCreateServices(cs kubernetes.Interface, ns, prefix string, n int) error {
	for i := 0; i < n; i++ {
		if _, err := cs.CoreV1().Services(ns).Create(context.Background(), service(fmt.Sprintf("%s-%d", prefix, i)), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create service %s-%d: %w", prefix, i, err)
		}
	}
	return nil
}

// service is headless: the test cluster's service range has room for 254 cluster IPs only.
func service(name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{
		ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
}

func ingress(name string) *networkingv1.Ingress {
	return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.IngressSpec{
		DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name, Port: networkingv1.ServiceBackendPort{Number: 80}}}}}
}

func inventoryCount(f *follower, kind string) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ki := range f.msgs[f.markerAt].GetInitialSyncComplete().GetInventory() {
		if watchstream.KindKey(ki.GetKind()) == kind {
			return ki.GetCount()
		}
	}
	return 0
}

// Scenario 1: listing Ingresses is forbidden by RBAC (list and watch: client-go lists through
// a streaming watch, see below). No marker is ever sent; after the sync timeout the watcher
// exits non-zero naming the kind and the 403.
func TestScenario1IngressListForbiddenNoMarkerExitNamingKind(t *testing.T) {
	c := testenv.SharedCluster(t)
	kc, _ := restrictedKubeconfig(t, c, watcherRules("ingresses/list", "ingresses/watch"))
	w := startWatcher(t, kc, "--sync-timeout", "5s")
	f := follow(t, w.addr, &watchv1.WatchRequest{ClientName: "scenario1"})
	if code := w.Process.WaitExit(t, time.Minute); code == 0 {
		t.Fatalf("watcher exited 0 after a sync timeout")
	}
	logs := w.Logs()
	for _, want := range []string{"initial sync did not complete within 5s", "networking.k8s.io/v1/ingresses: forbidden (403)", `resource \"ingresses\"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, w.LogTail(15))
		}
	}
	<-f.done
	if f.hasMarker() {
		t.Fatal("a marker was sent although ingresses never synced")
	}
}

// With only the list verb missing, client-go's streaming list (a watch with initial events)
// still delivers every Ingress: the view is complete, so the marker comes and counts them.
// This pins that behaviour: the barrier trusts completeness, not the verb used.
func TestListVerbAloneMissingStillCompleteThroughStreamingList(t *testing.T) {
	c := testenv.SharedCluster(t)
	ns := c.Namespace(t)
	for i := 0; i < 3; i++ {
		if _, err := c.Client.NetworkingV1().Ingresses(ns).Create(context.Background(), ingress(fmt.Sprintf("ing-%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kc, _ := restrictedKubeconfig(t, c, watcherRules("ingresses/list"))
	w := startWatcher(t, kc, "--namespaces", ns, "--kinds", namespacedKinds)
	f := follow(t, w.addr, &watchv1.WatchRequest{})
	f.waitMarker(time.Minute)
	if got := inventoryCount(f, "networking.k8s.io/v1/Ingress"); got != 3 {
		t.Fatalf("inventory: %d ingresses, want 3", got)
	}
}

// Scenario 2: a required custom resource kind that is not served keeps the barrier shut and
// the watcher exits naming it; an optional one is skipped from discovery, and said so.
func TestScenario2RequiredKindMissingExitsOptionalSkipped(t *testing.T) {
	c := testenv.SharedCluster(t)
	required := strings.Join(append(append([]string{}, kinds.DefaultRequired...), "widgets.sluice.example/v1/widgets"), ",")
	w := startWatcher(t, c.AdminKubeconfig, "--kinds", required, "--sync-timeout", "3s")
	if code := w.Process.WaitExit(t, time.Minute); code == 0 {
		t.Fatal("watcher exited 0 with a required kind missing")
	}
	if logs := w.Logs(); !strings.Contains(logs, "widgets.sluice.example/v1/widgets: not served by the apiserver") {
		t.Fatalf("log does not name the missing kind:\n%s", w.LogTail(10))
	}

	ns := c.Namespace(t)
	w2 := startWatcher(t, c.AdminKubeconfig, "--namespaces", ns, "--optional-kinds", "gadgets.sluice.example/v1/gadgets")
	f := follow(t, w2.addr, &watchv1.WatchRequest{})
	f.waitMarker(time.Minute)
	if !strings.Contains(w2.Logs(), `optional kind not served by the apiserver; not watched: kind=gadgets.sluice.example/v1/gadgets`) {
		t.Fatalf("the skipped optional kind was not logged:\n%s", w2.LogTail(20))
	}
	if n := len(f.mirror.Kinds()); n != len(kinds.DefaultRequired) {
		t.Fatalf("stream carries %d kinds, want %d", n, len(kinds.DefaultRequired))
	}
}

// An optional custom resource kind that is served is watched (dynamic informer, JSON on the
// wire) and is part of the marker's inventory.
func TestOptionalCustomResourceWatchedWhenServed(t *testing.T) {
	c := testenv.SharedCluster(t)
	ctx := context.Background()
	group := "g" + testenv.RandSuffix() + ".sluice.example"
	crd := fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.%[1]s}
spec:
  group: %[1]s
  names: {kind: Gizmo, plural: gizmos, singular: gizmo}
  scope: Namespaced
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
`, group)
	if err := c.InstallCRD(ctx, []byte(crd)); err != nil {
		t.Fatal(err)
	}
	ns := c.Namespace(t)
	w := startWatcher(t, c.AdminKubeconfig, "--namespaces", ns, "--kinds", "v1/services", "--optional-kinds", group+"/v1/gizmos")
	f := follow(t, w.addr, &watchv1.WatchRequest{})
	f.waitMarker(time.Minute)
	if got := inventoryCount(f, group+"/v1/Gizmo"); got != 0 {
		t.Fatalf("gizmos in inventory: %d", got)
	}
	u := map[string]any{"apiVersion": group + "/v1", "kind": "Gizmo", "metadata": map[string]any{"name": "g1", "namespace": ns}, "spec": map[string]any{"size": 3}}
	if _, err := c.Dynamic().Resource(gvr(group, "gizmos")).Namespace(ns).Create(ctx, unstructuredOf(u), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitFor(30*time.Second, "the gizmo", func(m *watchstream.Mirror) bool {
		o := m.Object(watchstream.ObjectKey{Kind: group + "/v1/Gizmo", Namespace: ns, Name: "g1"})
		return o != nil && o.GetContentType() == kinds.ContentTypeJSON && strings.Contains(string(o.GetRaw()), `"size":3`)
	})
}

// Scenario 3: zero objects of every kind: the marker still comes, with empty inventories.
func TestScenario3ZeroObjectsMarkerComes(t *testing.T) {
	c := testenv.SharedCluster(t)
	ns := c.Namespace(t)
	w := startWatcher(t, c.AdminKubeconfig, "--namespaces", ns, "--kinds", namespacedKinds)
	f := follow(t, w.addr, &watchv1.WatchRequest{})
	f.waitMarker(time.Minute)
	f.mu.Lock()
	defer f.mu.Unlock()
	inv := f.msgs[f.markerAt].GetInitialSyncComplete().GetInventory()
	if len(inv) != 4 {
		t.Fatalf("inventory of %d kinds, want 4", len(inv))
	}
	for _, ki := range inv {
		if ki.GetCount() != 0 {
			t.Fatalf("kind %s: %d objects in an empty namespace", watchstream.KindKey(ki.GetKind()), ki.GetCount())
		}
	}
}

// A client that connects before the barrier opens gets the marker later, among the deltas,
// after exactly the objects that existed; one that connects after gets it right after
// SnapshotEnd. Scenario 4's other half: what existed before the watcher started is all in
// the view the marker certifies.
func TestScenario4MarkerAfterExactlyTheObjectsThatExisted(t *testing.T) {
	c := testenv.SharedCluster(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	for i := 0; i < 20; i++ {
		if _, err := c.Client.NetworkingV1().Ingresses(ns).Create(ctx, ingress(fmt.Sprintf("ing-%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The watcher cannot list Ingresses at first, so the barrier stays shut while a client
	// connects; then the permission is granted and the list completes.
	kc, user := restrictedKubeconfig(t, c, watcherRules("ingresses/list", "ingresses/watch"))
	w := startWatcher(t, kc, "--namespaces", ns, "--kinds", namespacedKinds, "--sync-timeout", "2m")
	early := follow(t, w.addr, &watchv1.WatchRequest{ClientName: "early"})
	early.waitFor(30*time.Second, "the early snapshot", func(m *watchstream.Mirror) bool { return early.snapshotEnd >= 0 })
	w.Process.WaitLog(t, "forbidden (403)")
	if early.hasMarker() {
		t.Fatal("marker before ingresses could be listed")
	}
	if code := httpStatus(t, "http://"+w.httpAddr+"/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz answered %d before the barrier opened", code)
	}
	subject := rbacSubject(user)
	if err := c.Grant(ctx, subject, watcherRules("")); err != nil {
		t.Fatal(err)
	}
	early.waitMarker(time.Minute)
	if code := httpStatus(t, "http://"+w.httpAddr+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz answered %d after the barrier opened", code)
	}
	early.mu.Lock()
	if early.markerAt <= early.snapshotEnd+1 || early.msgs[early.markerAt].GetRevision() != early.msgs[early.markerAt-1].GetRevision()+1 {
		early.mu.Unlock()
		t.Fatalf("early client: marker at message %d (snapshot ended at %d), want it among the deltas", early.markerAt, early.snapshotEnd)
	}
	held := map[string]bool{}
	for _, o := range early.objectsAtMarker {
		held[o.GetName()] = true
	}
	early.mu.Unlock()
	for i := 0; i < 20; i++ {
		if !held[fmt.Sprintf("ing-%d", i)] {
			t.Fatalf("ing-%d existed before the watcher started but is not in the view at the marker", i)
		}
	}
	if got := inventoryCount(early, "networking.k8s.io/v1/Ingress"); got != 20 {
		t.Fatalf("inventory: %d ingresses, want 20", got)
	}

	late := follow(t, w.addr, &watchv1.WatchRequest{ClientName: "late"})
	late.waitMarker(30 * time.Second)
	late.mu.Lock()
	defer late.mu.Unlock()
	if late.markerAt != late.snapshotEnd+1 || late.msgs[late.markerAt].GetRevision() != late.msgs[late.snapshotEnd].GetRevision() {
		t.Fatalf("late client: marker at message %d, snapshot ended at %d; want right after", late.markerAt, late.snapshotEnd)
	}
}

// Scenario 4: objects created while the watcher starts. Everything created before it started
// is in the view at the marker; everything created after arrives later; nothing is lost.
func TestScenario4ObjectsCreatedWhileWatcherStarts(t *testing.T) {
	c := testenv.SharedCluster(t)
	ns := c.Namespace(t)
	createServices(t, c.Client, ns, "before", 150)
	created := make(chan error, 1)
	go func() { created <- tryCreateServices(c.Client, ns, "during", 150) }()
	w := startWatcher(t, c.AdminKubeconfig, "--namespaces", ns, "--kinds", namespacedKinds)
	f := follow(t, w.addr, &watchv1.WatchRequest{})
	f.waitMarker(time.Minute)
	held := map[string]bool{}
	for _, o := range f.objectsAtMarker {
		held[o.GetName()] = true
	}
	for i := 0; i < 150; i++ {
		if !held[fmt.Sprintf("before-%d", i)] {
			t.Fatalf("before-%d is missing from the view at the marker", i)
		}
	}
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	f.waitFor(time.Minute, "all 300 services", func(m *watchstream.Mirror) bool {
		return countKind(m, "/v1/Service") == 300
	})
}

// Scenario 5: SIGTERM during the initial sync: the watcher sends nothing more and exits
// cleanly; no marker ever reaches the client.
func TestScenario5SIGTERMDuringSyncSendsNothing(t *testing.T) {
	c := testenv.SharedCluster(t)
	kc, _ := restrictedKubeconfig(t, c, watcherRules("services/list", "services/watch"))
	w := startWatcher(t, kc, "--sync-timeout", "2m")
	f := follow(t, w.addr, &watchv1.WatchRequest{})
	w.Process.WaitLog(t, "forbidden (403)")
	sigterm(t, w.Process)
	if code := w.Process.WaitExit(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	<-f.done
	if f.hasMarker() {
		t.Fatal("marker sent during shutdown")
	}
	if !isUnavailable(f.streamErr()) {
		t.Fatalf("stream ended with %v, want UNAVAILABLE", f.streamErr())
	}
	if !strings.Contains(w.Logs(), "no marker was sent") {
		t.Fatalf("the watcher did not say it stopped before the marker:\n%s", w.LogTail(10))
	}
}

// Revisions have no gap across thousands of changes (the Mirror checks every one), and the
// client's view converges to the cluster's.
func TestRevisionsGapFreeAcrossThousandsOfChanges(t *testing.T) {
	c := testenv.SharedCluster(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	w := startWatcher(t, c.AdminKubeconfig, "--namespaces", ns, "--kinds", namespacedKinds)
	f := follow(t, w.addr, &watchv1.WatchRequest{})
	f.waitMarker(time.Minute)
	const workers, per = 4, 500
	var wg sync.WaitGroup
	for wk := 0; wk < workers; wk++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			svcs := c.Client.CoreV1().Services(ns)
			for i := 0; i < per; i++ {
				name := fmt.Sprintf("w%d-%d", wk, i)
				if _, err := svcs.Create(ctx, service(name), metav1.CreateOptions{}); err != nil {
					t.Error(err)
					return
				}
				switch i % 4 {
				case 1:
					s, err := svcs.Get(ctx, name, metav1.GetOptions{})
					if err == nil {
						s.Labels = map[string]string{"touched": "yes"}
						_, err = svcs.Update(ctx, s, metav1.UpdateOptions{})
					}
					if err != nil {
						t.Error(err)
					}
				case 2:
					if err := svcs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	list, err := c.Client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, s := range list.Items {
		want[s.Name] = s.ResourceVersion
	}
	f.waitFor(time.Minute, "the cluster's services", func(m *watchstream.Mirror) bool { return sameServices(m, ns, want) })
	if f.mirror.Revision() < workers*per {
		t.Fatalf("only %d revisions for %d creations", f.mirror.Revision(), workers*per)
	}
}

// The apiserver restarted and the connection cut: the informers recover, the view converges,
// no delete is emitted for an object that still exists, and no second marker comes.
func TestAPIServerRestartAndCutConnectionConverge(t *testing.T) {
	c := testenv.SharedCluster(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	proxy, kc := c.ProxiedKubeconfig(t, "via-proxy")
	createServices(t, c.Client, ns, "keep", 20)
	w := startWatcher(t, kc, "--namespaces", ns, "--kinds", namespacedKinds)
	f := follow(t, w.addr, &watchv1.WatchRequest{})
	f.waitMarker(time.Minute)

	before := proxy.Refused()
	proxy.Cut()
	createServices(t, c.Client, ns, "cut", 5)
	for i := 0; i < 3; i++ {
		if err := c.Client.CoreV1().Services(ns).Delete(ctx, fmt.Sprintf("cut-%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if !proxy.WaitRefused(before, time.Minute) {
		t.Fatal("the watcher never tried to reach the apiserver through the cut")
	}
	proxy.Restore()
	converge(t, c, f, ns)

	if err := c.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	createServices(t, c.Client, ns, "after", 5)
	converge(t, c, f, ns)

	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.msgs {
		if d := m.GetDelete(); d != nil && strings.HasPrefix(d.GetObject().GetName(), "keep-") {
			t.Fatalf("delete emitted for %s, which still exists", d.GetObject().GetName())
		}
	}
	if f.markers != 1 {
		t.Fatalf("%d markers on one stream", f.markers)
	}
}

// A client resuming with (epoch, revision) that the watcher still holds gets only the
// deltas after it (no snapshot), and the marker once, right after them.
func TestResumeSendsOnlyDeltas(t *testing.T) {
	c := testenv.SharedCluster(t)
	ns := c.Namespace(t)
	createServices(t, c.Client, ns, "r", 3)
	w := startWatcher(t, c.AdminKubeconfig, "--namespaces", ns, "--kinds", namespacedKinds)
	f := follow(t, w.addr, &watchv1.WatchRequest{})
	f.waitMarker(time.Minute)
	epoch, rev := f.mirror.Epoch(), f.mirror.Revision()
	createServices(t, c.Client, ns, "s", 2)
	conn, err := grpcx.Dial(w.addr, grpcx.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.waitFor(30*time.Second, "two new services", func(m *watchstream.Mirror) bool { return countKind(m, "/v1/Service") == 5 })
	stream, err := watchv1.NewWatchServiceClient(conn).Watch(ctx, &watchv1.WatchRequest{ResumeEpoch: epoch, ResumeRevision: rev})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if first.GetResumeStart().GetFromRevision() != rev {
		t.Fatalf("first message %v, want ResumeStart from %d", first, rev)
	}
	var ups int
	for {
		m, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if m.GetSnapshotStart() != nil {
			t.Fatal("a snapshot on a resumed stream")
		}
		if m.GetUpsert() != nil {
			ups++
		}
		if m.GetInitialSyncComplete() != nil {
			if ups != 2 {
				t.Fatalf("%d upserts before the marker, want the 2 new services", ups)
			}
			return
		}
	}
}

func httpStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func converge(t *testing.T, c *testenv.Cluster, f *follower, ns string) {
	t.Helper()
	list, err := c.Client.CoreV1().Services(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, s := range list.Items {
		want[s.Name] = s.ResourceVersion
	}
	f.waitFor(2*time.Minute, "convergence", func(m *watchstream.Mirror) bool { return sameServices(m, ns, want) })
}

func sameServices(m *watchstream.Mirror, ns string, want map[string]string) bool {
	n := 0
	for _, o := range m.Objects() {
		if watchstream.KindKey(o.GetKind()) != "/v1/Service" || o.GetNamespace() != ns {
			continue
		}
		n++
		if want[o.GetName()] != o.GetResourceVersion() {
			return false
		}
	}
	return n == len(want)
}

func countKind(m *watchstream.Mirror, kind string) int {
	n := 0
	for _, o := range m.Objects() {
		if watchstream.KindKey(o.GetKind()) == kind {
			n++
		}
	}
	return n
}
