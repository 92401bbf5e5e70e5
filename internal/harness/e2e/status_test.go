package e2e_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/sluice-io/sluice/internal/harness/stack"
	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/internal/promtext"
)

// metric sums a Prometheus metric over its label sets that contain every one of labels
// (written as `name="value"`); -1 when /metrics cannot be read.
func metric(httpAddr, name string, labels ...string) float64 {
	return promtext.Value(httpAddr, name+"{"+strings.Join(labels, ",")+"}")
}

// writesDone waits until the watcher at httpAddr counts at least want status writes done,
// and returns the count. A write is visible on the apiserver a moment before its writer
// counts it (the counter follows the PATCH's answer), so a count read once, right after the
// statuses were seen, can be one short.
func writesDone(t *testing.T, httpAddr string, want float64, d time.Duration) float64 {
	t.Helper()
	var got float64
	testenv.Eventually(t, d, fmt.Sprintf("at least %.0f status writes done", want), func() (bool, error) {
		got = metric(httpAddr, "sluice_watcher_status_writes_total", `result="done"`)
		return got >= want, fmt.Errorf("%.0f done", got)
	})
	return got
}

// withAddress counts the Ingresses of the namespace whose status.loadBalancer is exactly ip.
func (w *world) withAddress(ip string) int {
	w.t.Helper()
	n, err := w.addressed(ip)
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

func (w *world) addressed(ip string) (int, error) {
	list, err := w.c.Client.NetworkingV1().Ingresses(w.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, i := range list.Items {
		if lb := i.Status.LoadBalancer.Ingress; len(lb) == 1 && lb[0].IP == ip {
			n++
		}
	}
	return n, nil
}

// waitAddresses waits until n Ingresses of the namespace show ip. It lists them all, so it
// asks seldom.
func (w *world) waitAddresses(ip string, n int, d time.Duration) {
	w.t.Helper()
	testenv.EventuallyEvery(w.t, 200*time.Millisecond, d, fmt.Sprintf("%d Ingresses to show %s", n, ip), func() (bool, error) {
		got, err := w.addressed(ip)
		if err == nil && got != n {
			err = fmt.Errorf("%d show it", got)
		}
		return err == nil, err
	})
}

// createMany creates Ingresses r[from, from+n) with a few concurrent clients.
func (w *world) createMany(from, n int) {
	w.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if _, err := w.c.Client.NetworkingV1().Ingresses(w.ns).Create(context.Background(), ingress(fmt.Sprintf("r%d", i), w.host(i), w.svcOf(i)), metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := from; i < from+n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		w.t.Fatal(err)
	}
}

// Scenario 7: slow status writes never delay the first config. 2,000 Ingresses all need
// their status written at start, and the status writer is throttled to 10 writes a second
// (Contour's default is 5): the first config reaches Caddy while almost every status is still
// pending, as soon as with status writing off, and the statuses all converge afterwards.
func TestScenario7SlowStatusWritesNeverDelayTheFirstConfig(t *testing.T) {
	t.Parallel() // it mostly waits for the throttled writes
	const n, ip, qps = 2000, "203.0.113.7", 10
	w := newWorld(t, false, stack.Config{})
	w.createMany(0, n)

	firstConfig := func(watcherArgs ...string) time.Duration {
		t.Helper()
		start := time.Now()
		w.start(stack.Config{WatcherArgs: watcherArgs, TranslatorArgs: []string{"--publish-address", ip}})
		w.waitConverged(3 * time.Minute)
		return time.Since(start)
	}
	off := firstConfig("--status-writes=false")
	if got := w.withAddress(ip); got != 0 {
		t.Fatalf("status writing was off, yet %d Ingresses show %s", got, ip)
	}
	w.st.Stop()

	on := firstConfig("--status-qps", strconv.Itoa(qps), "--status-burst", strconv.Itoa(qps))
	written := w.withAddress(ip)
	pending := metric(w.st.WatcherHTTP, "sluice_watcher_status_writes_pending")
	t.Logf("first config in Caddy (%d routes, from process start): status writing off %v, on (throttled to %d/s) %v; at that moment %d statuses written, %.0f pending",
		n, off.Round(time.Millisecond), qps, on.Round(time.Millisecond), written, pending)
	// The config did not wait for the statuses: most were not written yet when it arrived.
	if written > n/2 {
		t.Fatalf("%d of %d statuses were written before the first config reached Caddy: the config path waited for status writes", written, n)
	}
	start := time.Now()
	w.waitAddresses(ip, n, 10*time.Minute)
	converged := time.Since(start)
	done := writesDone(t, w.st.WatcherHTTP, float64(n), 30*time.Second)
	t.Logf("all %d statuses converged %v after the first config; %.0f writes", n, converged.Round(time.Second), done)
	if p := metric(w.st.WatcherHTTP, "sluice_watcher_status_writes_pending"); p != 0 {
		t.Fatalf("%.0f status writes still pending after convergence", p)
	}
}

// leaseHolder is the holder of the namespace's watcher Lease.
func (w *world) leaseHolder() string {
	l, err := w.c.Client.CoordinationV1().Leases(w.ns).Get(context.Background(), "sluice-watcher", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// waitLeader waits until the Lease holder's identity starts with prefix; it returns how long
// that took.
func (w *world) waitLeader(prefix string, d time.Duration) time.Duration {
	w.t.Helper()
	start := time.Now()
	testenv.Eventually(w.t, d, "a lease holder named "+prefix+"*", func() (bool, error) {
		h := w.leaseHolder()
		return strings.HasPrefix(h, prefix), fmt.Errorf("the lease is held by %q", h)
	})
	return time.Since(start)
}

// Two watcher replicas elect a leader with a Lease: only the leader writes statuses (the
// translator talks to the other one, which relays); killing the leader moves the lease and
// writing resumes on the survivor; then the survivor, which is also the translator's watch
// source, is killed too and the translator fails over to a third replica. Through both
// failovers every route keeps being served (docs/design.md, scenario 6) and new ones appear.
func TestStatusLeaderElectionFailover(t *testing.T) {
	const ip = "203.0.113.20"
	w := newWorld(t, false, stack.Config{})
	election := func(id string) []string {
		return []string{"--leader-elect", "--id", id, "--leader-elect-namespace", w.ns, "--leader-elect-lease-duration", "3s",
			"--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "500ms"}
	}
	w.start(stack.Config{WatcherArgs: election("watcher-a"), TranslatorArgs: []string{"--publish-address", ip}})
	a := w.st.Watcher
	w.waitLeader("watcher-a@", 30*time.Second)
	b, err := w.st.StartWatcherReplica("watcher-b", election("watcher-b")...)
	if err != nil {
		t.Fatal(err)
	}
	b.WaitLog(t, "following") // serving, synced, and knows the leader
	// The translator prefers replica b, the follower: its status stream is relayed to a.
	w.st.Translator.Stop(5 * time.Second)
	if err := w.st.StartTranslator("--watcher-addr", b.Addr+","+w.st.WatcherAddr); err != nil {
		t.Fatal(err)
	}
	w.createRoutes(0, 6)
	w.waitServed(0, 6, time.Minute)
	w.waitAddresses(ip, 6, time.Minute)
	writesDone(t, w.st.WatcherHTTP, 6, 30*time.Second) // the leader wrote them
	if got := metric(b.HTTP, "sluice_watcher_status_writes_total"); got != 0 {
		t.Fatalf("the follower wrote %.0f statuses", got)
	}
	if metric(b.HTTP, "sluice_watcher_leader") != 0 || metric(w.st.WatcherHTTP, "sluice_watcher_leader") != 1 {
		t.Fatal("the leader gauges do not say a leads and b follows")
	}
	if !strings.Contains(w.st.Translator.Logs(), `relayed=true`) {
		t.Fatalf("the translator's status stream was not relayed by b:\n%s", w.st.Translator.LogTail(20))
	}

	k := w.keep(0, 6)
	a.Kill() // no lease release: b must wait for it to expire
	first := w.waitLeader("watcher-b@", 30*time.Second)
	w.createRoutes(6, 4)
	w.waitServed(6, 4, time.Minute)
	w.waitAddresses(ip, 10, time.Minute)
	writesDone(t, b.HTTP, 4, 30*time.Second) // after the failover, b wrote them
	k.mu.Lock()
	for i := 6; i < 10; i++ {
		k.routes[w.host(i)] = w.svcOf(i)
	}
	k.mu.Unlock()

	// Replica a comes back (a new process on a's address); then b, the leader and the
	// translator's watch source, dies: the translator moves its watch stream to a (its list is
	// b, a), and a takes the lease and writes.
	if err := w.st.StartWatcher(election("watcher-a2")...); err != nil {
		t.Fatal(err)
	}
	w.st.Watcher.WaitLog(t, "campaigning for the lease")
	b.Kill()
	second := w.waitLeader("watcher-a2@", 30*time.Second)
	t.Logf("lease moved %v after the leader was killed (lease duration 3s), and %v after the second kill", first.Round(10*time.Millisecond), second.Round(10*time.Millisecond))
	w.createRoutes(10, 2)
	w.waitServed(10, 2, time.Minute)
	w.waitAddresses(ip, 12, time.Minute)
	writesDone(t, w.st.WatcherHTTP, 2, 30*time.Second) // after the second failover, a2 wrote them
	k.finish()
	if n := strings.Count(w.st.Translator.Logs(), "watch stream verified complete"); n < 2 {
		t.Fatalf("the translator verified %d complete views; it should have re-synced from a2", n)
	}
}

// Scenario 8, on the Kubernetes side: a bad Ingress gets a Warning Event naming the cause
// (once, however often the config is rebuilt), and fixing it records that the finding is
// resolved and makes the route serve.
func TestFindingsBecomeEventsAndClearWhenFixed(t *testing.T) {
	const ip = "203.0.113.30"
	w := newWorld(t, true, stack.Config{TranslatorArgs: []string{"--publish-address", ip}})
	ctx := context.Background()
	host := "late." + w.ns + ".example.com"
	if _, err := w.c.Client.NetworkingV1().Ingresses(w.ns).Create(ctx, ingress("late", host, "late"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "spec.rules[0].http.paths[0].backend.service.name: Service " + w.ns + "/late not found; the route answers 503"
	warning := w.waitEvent("late", corev1.EventTypeWarning, "ServiceNotFound", time.Minute)
	if warning.Message != want {
		t.Fatalf("the Warning Event says %q, want %q", warning.Message, want)
	}
	// The Event comes from the status stream, which never waits for the config path: the
	// route is served once Caddy runs what the cluster says.
	w.waitConverged(time.Minute)
	if got := w.answer(host, "/"); got != "503" {
		t.Fatalf("the route to a missing Service answered %s, want 503", got)
	}
	w.waitAddresses(ip, 1, time.Minute) // a served Ingress with a finding still gets its address

	// Other changes rebuild the config many times; the finding is not said again.
	w.createRoutes(0, 4)
	w.waitServed(0, 4, time.Minute)
	w.waitAddresses(ip, 5, time.Minute)
	if ev := w.waitEvent("late", corev1.EventTypeWarning, "ServiceNotFound", time.Minute); ev.Count != 1 {
		t.Fatalf("the Warning Event was recorded %d times", ev.Count)
	}

	w.service("late", "alpha")
	resolved := w.waitEvent("late", corev1.EventTypeNormal, "FindingsResolved", time.Minute)
	t.Logf("events: %s %s %q; %s %s %q", warning.Type, warning.Reason, warning.Message, resolved.Type, resolved.Reason, resolved.Message)
	testenv.Eventually(t, time.Minute, "the fixed route to be served by alpha", func() (bool, error) {
		got := w.answer(host, "/")
		return got == "alpha", fmt.Errorf("it answers %s", got)
	})
	out, err := runCtl(t, "config", "--addr", w.st.TranslatorAddr)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "Ingress "+w.ns+"/late ") {
		t.Fatalf("the fixed Ingress still has a finding:\n%s", out)
	}
}

// waitEvent waits for an Event on Ingress name with the type and reason.
func (w *world) waitEvent(name, typ, reason string, d time.Duration) corev1.Event {
	w.t.Helper()
	sel := fields.Set{"involvedObject.kind": "Ingress", "involvedObject.name": name, "type": typ, "reason": reason}.AsSelector().String()
	var ev corev1.Event
	testenv.Eventually(w.t, d, fmt.Sprintf("a %s Event %s on Ingress %s/%s", typ, reason, w.ns, name), func() (bool, error) {
		list, err := w.c.Client.CoreV1().Events(w.ns).List(context.Background(), metav1.ListOptions{FieldSelector: sel})
		switch {
		case err != nil:
			return false, err
		case len(list.Items) > 1:
			return false, testenv.Permanent(fmt.Errorf("%d such Events, want one", len(list.Items)))
		case len(list.Items) == 1:
			ev = list.Items[0]
			return true, nil
		}
		return false, nil
	})
	return ev
}

var _ = networkingv1.PathTypePrefix
