package e2e_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-io/sluice/internal/harness/stack"
	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/watcher/kinds"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

// pusherApplied is the pusher's count of applies (re-pushes included).
func (w *world) pusherApplied() float64 {
	return metric(w.st.PusherHTTP, "sluice_pusher_configs_applied_total")
}

// restartWatcherRestricted kills the watcher and starts it again with an identity that
// lacks the given resources, and a short sync timeout.
func (w *world) restartWatcherWith(kubeconfig string, extra ...string) {
	w.t.Helper()
	w.st.Watcher.Kill()
	args := append([]string{"--kubeconfig", kubeconfig}, extra...)
	if err := w.st.StartWatcher(args...); err != nil {
		w.t.Fatal(err)
	}
}

// Scenario 1: the watcher restarted with the list of Ingresses forbidden. The proxy keeps
// serving, nothing is pushed, and the watcher exits after the timeout naming the kind.
func TestScenario1WatcherRestartedWithIngressListForbidden(t *testing.T) {
	w := newWorld(t, true, stack.Config{})
	w.createRoutes(0, 6)
	w.waitServed(0, 6, time.Minute)
	w.waitConverged(time.Minute)
	k := w.keep(0, 6)
	hash, applied := w.caddyHash(), w.pusherApplied()

	w.restartWatcherWith(w.restrictedKubeconfig("ingresses"), "--sync-timeout", "4s")
	if code := w.st.Watcher.WaitExit(t, time.Minute); code == 0 {
		t.Fatal("the watcher exited 0")
	}
	if logs := w.st.Watcher.Logs(); !strings.Contains(logs, "networking.k8s.io/v1/ingresses: forbidden (403)") {
		t.Fatalf("the watcher did not name the kind and the 403:\n%s", w.st.Watcher.LogTail(5))
	}
	k.finish()
	if h := w.caddyHash(); h != hash {
		t.Fatalf("Caddy's config changed from %.12s to %.12s", hash, h)
	}
	if a := w.pusherApplied(); a != applied {
		t.Fatalf("the pusher applied %v configs while the watcher could not sync", a-applied)
	}
	// With its permissions back, the watcher converges the system again.
	if err := w.st.StartWatcher(); err != nil {
		t.Fatal(err)
	}
	w.createRoutes(6, 1)
	w.waitServed(0, 7, time.Minute)
	w.waitConverged(time.Minute)
}

// Scenario 2: a required custom resource kind is missing: same as scenario 1.
func TestScenario2RequiredCustomResourceMissing(t *testing.T) {
	w := newWorld(t, true, stack.Config{})
	w.createRoutes(0, 4)
	w.waitServed(0, 4, time.Minute)
	k := w.keep(0, 4)
	hash := w.caddyHash()
	required := strings.Join(append(append([]string{}, kinds.DefaultRequired...), "gateways.e2e.sluice.example/v1/gateways"), ",")
	w.restartWatcherWith(w.c.AdminKubeconfig, "--kinds", required, "--sync-timeout", "3s")
	if code := w.st.Watcher.WaitExit(t, time.Minute); code == 0 {
		t.Fatal("the watcher exited 0")
	}
	if !strings.Contains(w.st.Watcher.Logs(), "gateways.e2e.sluice.example/v1/gateways: not served by the apiserver") {
		t.Fatalf("the watcher did not name the missing kind:\n%s", w.st.Watcher.LogTail(5))
	}
	k.finish()
	if h := w.caddyHash(); h != hash {
		t.Fatal("Caddy's config changed while a required kind was missing")
	}
}

// Scenario 3: an empty cluster: the marker comes, an empty config is applied, then routes
// appear as objects are created.
func TestScenario3EmptyClusterThenRoutesAppear(t *testing.T) {
	c := testenv.SharedCluster(t)
	ensureClass(t, c)
	c.Workloads(t)
	w := &world{t: t, c: c, ns: c.Namespace(t)}
	w.start(stack.Config{})
	w.waitConverged(time.Minute) // the empty config
	if got := w.answer("anything.example.com", "/"); got != "404" {
		t.Fatalf("empty config answered %s, want 404", got)
	}
	w.startBackends()
	w.createRoutes(0, 3)
	w.waitServed(0, 3, time.Minute)
	w.waitConverged(time.Minute)
}

// Scenario 4: objects created while the watcher starts are all in the first config: it holds
// every Ingress created before the start and a gap-free first part of those created during
// it, as far as the watcher listed them (a watcher that loses one of them fails here).
func TestScenario4ObjectsCreatedWhileTheWatcherStartsAreInTheFirstConfig(t *testing.T) {
	w := newWorld(t, false, stack.Config{})
	w.createRoutes(0, 60)
	// Ingresses are created one after another from before the start until the first config
	// is applied (at most 1,000), so that the watcher lists while they come.
	created, applied := make(chan error, 1), make(chan struct{})
	last := 60
	go func() {
		defer close(created)
		for ; last < 1060; last++ {
			select {
			case <-applied:
				return
			default:
			}
			if err := w.tryCreateRoutes(last, 1); err != nil {
				created <- err
				return
			}
		}
	}()
	w.start(stack.Config{})
	w.st.Pusher.WaitLog(t, "config applied")
	close(applied)
	// Right after the first apply, every Ingress that existed before the watcher started
	// is served: the first config held them all.
	for i := 0; i < 60; i++ {
		if got := w.answer(w.host(i), "/"); got != w.svcOf(i) {
			t.Fatalf("route %d, created before the watcher started, not served right after the first apply: %s", i, got)
		}
	}
	m := regexp.MustCompile(`config applied: pusher=stack-pusher epoch=\S+ version=\d+ hash=([0-9a-f]+)`).FindStringSubmatch(w.st.Pusher.Logs())
	if m == nil {
		t.Fatal("no apply logged")
	}
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	during := last - 60
	// The Ingresses created while the watcher started, one after another, are in the first
	// applied config exactly as far as they existed when the watcher listed them: it is the
	// translation of the first 60 and of some first k of the others, never one without an
	// older one (a gap) nor one short of what it listed.
	index := func(ing *networkingv1.Ingress) int {
		n, _ := strconv.Atoi(strings.TrimPrefix(ing.Name, "r"))
		return n
	}
	match := -1
	for k := 0; k <= during && match < 0; k++ {
		h, err := w.expectedHashOf(func(ing *networkingv1.Ingress) bool { return index(ing) < 60+k })
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(h, m[1]) {
			match = k
		}
	}
	if match < 0 {
		t.Fatalf("the first applied config (hash %s) is not the translation of the first 60 Ingresses and any first k of the %d created during the start", m[1], during)
	}
	t.Logf("the first applied config holds the 60 Ingresses created before the start and the first %d of the %d created during it", match, during)
	w.waitServed(0, 60+during, time.Minute)
	w.waitConverged(time.Minute)
}

// Scenario 5: SIGTERM to each process during the initial sync, and after a sync timeout:
// nothing is pushed. The processes are stopped upstream first (watcher, translator, then
// pusher), so that anything the watcher's or the translator's shutdown sent would still find
// a pusher to apply it and a Caddy to run it. Caddy's config and the pusher's count of
// applies are checked after each stop, once the process downstream of the stopped one has
// seen its stream end: everything sent on a stream arrives before its end.
func TestScenario5SIGTERMDuringInitialSyncPushesNothing(t *testing.T) {
	w := newWorld(t, true, stack.Config{})
	w.createRoutes(0, 4)
	w.waitServed(0, 4, time.Minute)
	w.waitConverged(time.Minute)
	k := w.keep(0, 4)
	hash, applied := w.caddyHash(), w.pusherApplied()
	unchanged := func(after string) {
		t.Helper()
		if h := w.caddyHash(); h != hash {
			t.Fatalf("Caddy's config changed from %.12s to %.12s after %s", hash, h, after)
		}
		if !w.st.Pusher.Exited() {
			if a := w.pusherApplied(); a != applied {
				t.Fatalf("the pusher applied %v configs after %s", a-applied, after)
			}
		}
	}
	stop := func(p *testenv.Process) {
		t.Helper()
		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := p.WaitExit(t, 30*time.Second); code != 0 {
			t.Fatalf("%s exited %d after SIGTERM", p.Name(), code)
		}
	}
	forbidden := w.restrictedKubeconfig("services")

	// The watcher cannot sync; the translator follows its stream and the pusher the
	// translator's, both waiting for a marker that never comes.
	w.restartWatcherWith(forbidden, "--sync-timeout", "2m")
	w.st.Watcher.WaitLog(t, "forbidden (403)")
	w.st.Watcher.WaitLog(t, "stream opened") // the translator's
	mark := w.st.Translator.LogMark()
	stop(w.st.Watcher)
	w.st.Translator.WaitLogSince(t, mark, "watcher is shutting down")
	unchanged("the watcher's SIGTERM")
	mark = w.st.Pusher.LogMark()
	stop(w.st.Translator)
	w.st.Pusher.WaitLogSince(t, mark, "translator is shutting down")
	unchanged("the translator's SIGTERM") // and all the translator sent before
	stop(w.st.Pusher)
	unchanged("the pusher's SIGTERM")

	// After a sync timeout: the watcher exits non-zero; the others never push.
	if err := w.st.StartTranslator(); err != nil {
		t.Fatal(err)
	}
	if err := w.st.StartPusher(); err != nil {
		t.Fatal(err)
	}
	hash, applied = w.caddyHash(), 0 // the restarted pusher counts from zero
	w.restartWatcherWith(forbidden, "--sync-timeout", "3s")
	if code := w.st.Watcher.WaitExit(t, time.Minute); code == 0 {
		t.Fatal("the watcher exited 0 after a sync timeout")
	}
	w.st.Translator.WaitLog(t, "pusher connected") // the new pusher follows the translator
	unchanged("the watcher's sync timeout")
	stop(w.st.Translator)
	w.st.Pusher.WaitLog(t, "translator is shutting down")
	unchanged("the translator's SIGTERM, after the watcher's sync timeout")
	stop(w.st.Pusher)
	unchanged("the pusher's SIGTERM, after the watcher's sync timeout")
	if strings.Contains(w.st.Pusher.Logs(), "config applied") {
		t.Fatal("the restarted pusher applied a config")
	}
	k.finish()
}

// Scenario 6: each of watcher, translator, pusher, Caddy and the apiserver killed and
// restarted, and the apiserver connection cut and restored, under steady churn: no route
// is lost, and the system converges to the cluster's state after.
func TestScenario6RestartsAndCutsUnderChurnLoseNoRoute(t *testing.T) {
	proxy, kc := testenv.SharedCluster(t).ProxiedKubeconfig(t, "e2e-proxy")
	w := newWorld(t, true, stack.Config{WatcherKubeconfig: kc})
	w.createRoutes(0, 10)
	w.waitServed(0, 10, time.Minute)
	k := w.keep(0, 10)

	// Steady churn: routes 100+ come and go, never kept.
	ctx, stopChurn := context.WithCancel(context.Background())
	churnDone := make(chan int)
	go func() {
		i := 100
		for ctx.Err() == nil {
			ing := w.c.Client.NetworkingV1().Ingresses(w.ns)
			_, _ = ing.Create(ctx, ingress(fmt.Sprintf("r%d", i), w.host(i), w.svcOf(i)), metav1.CreateOptions{})
			if i%3 == 0 {
				_ = ing.Delete(ctx, fmt.Sprintf("r%d", i-2), metav1.DeleteOptions{})
			}
			i++
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
		churnDone <- i
	}()

	faults := []struct {
		name string
		do   func()
	}{
		{"watcher", func() { w.st.Watcher.Kill(); must(t, w.st.StartWatcher()) }},
		{"translator", func() { w.st.Translator.Kill(); must(t, w.st.StartTranslator()) }},
		{"pusher", func() { w.st.Pusher.Kill(); must(t, w.st.StartPusher()) }},
		{"caddy", func() {
			// A restarted Caddy has lost its config until the pusher pushes it again: the
			// proxy is down in that window, not serving a wrong config. The keeper pauses.
			k.paused.Store(true)
			w.st.Caddy.Kill()
			must(t, w.st.Caddy.Restart(context.Background()))
			w.waitServed(0, 10, time.Minute)
			k.paused.Store(false)
		}},
		{"apiserver", func() { must(t, w.c.RestartAPIServer(context.Background())) }},
		{"apiserver connection", func() {
			before := proxy.Refused()
			proxy.Cut()
			if !proxy.WaitRefused(before, time.Minute) {
				t.Fatal("the watcher never tried to reach the apiserver through the cut")
			}
			proxy.Restore()
		}},
	}
	for _, f := range faults {
		t.Logf("fault: %s", f.name)
		f.do()
		w.waitServed(0, 10, time.Minute)
	}
	stopChurn()
	last := <-churnDone
	w.waitConverged(2 * time.Minute)
	k.finish()
	t.Logf("churn: %d Ingresses created during the faults", last-100)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Scenario 8: bad objects mixed into good ones (invalid and regex-breaking paths, missing
// Services, a bad certificate, an oversized object): each is reported, every good route is
// served.
func TestScenario8BadObjectsReportedGoodRoutesServed(t *testing.T) {
	w := newWorld(t, true, stack.Config{})
	ctx := context.Background()
	w.createRoutes(0, 6)
	w.waitServed(0, 6, time.Minute)
	k := w.keep(0, 6)
	ings := w.c.Client.NetworkingV1().Ingresses(w.ns)
	pt := networkingv1.PathTypePrefix
	ispec := networkingv1.PathTypeImplementationSpecific
	bad := []*networkingv1.Ingress{
		ingress("missing-svc", "missing."+w.ns+".example.com", "no-such-service"),
		func() *networkingv1.Ingress {
			i := ingress("glob-path", "glob."+w.ns+".example.com", "alpha")
			i.Spec.Rules[0].HTTP.Paths[0].Path, i.Spec.Rules[0].HTTP.Paths[0].PathType = "/glob*", &pt
			return i
		}(),
		func() *networkingv1.Ingress {
			i := ingress("bad-regex", "regex."+w.ns+".example.com", "alpha")
			i.Annotations = map[string]string{"sluice.io/path-regex": "true"}
			i.Spec.Rules[0].HTTP.Paths[0].Path, i.Spec.Rules[0].HTTP.Paths[0].PathType = "/a(", &ispec
			return i
		}(),
		func() *networkingv1.Ingress {
			i := ingress("bad-cert", "tls."+w.ns+".example.com", "alpha")
			i.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"tls." + w.ns + ".example.com"}, SecretName: "bad-cert"}}
			return i
		}(),
		func() *networkingv1.Ingress {
			// An oversized object: close to the apiserver's limit for annotations.
			i := ingress("oversized", "big."+w.ns+".example.com", "beta")
			i.Annotations = map[string]string{"example.com/blob": strings.Repeat("x", 200<<10)}
			return i
		}(),
	}
	if _, err := w.c.Client.CoreV1().Secrets(w.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bad-cert"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": []byte("garbage"), "tls.key": []byte("garbage")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, i := range bad {
		if _, err := ings.Create(ctx, i, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", i.Name, err)
		}
	}
	w.waitConverged(time.Minute)
	if got := w.answer("big."+w.ns+".example.com", "/"); got != "beta" {
		t.Fatalf("the oversized Ingress's route: %s", got)
	}
	if got := w.answer("missing."+w.ns+".example.com", "/"); got != "503" {
		t.Fatalf("a route to a missing Service answered %s, want 503", got)
	}
	out, err := runCtl(t, "config", "--addr", w.st.TranslatorAddr)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Ingress " + w.ns + "/missing-svc spec.rules[0].http.paths[0].backend.service.name: Service " + w.ns + "/no-such-service not found",
		"Ingress " + w.ns + "/glob-path spec.rules[0].http.paths[0]: Prefix path \"/glob*\"",
		"Ingress " + w.ns + "/bad-regex spec.rules[0].http.paths[0]: invalid regular expression",
		"Ingress " + w.ns + "/bad-cert spec.tls[0].secretName: TLS Secret " + w.ns + "/bad-cert holds no valid certificate",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("sluicectl config lacks the finding %q:\n%s", want, out)
		}
	}

	// The config stream carries one new Ingress as a small delta, which sluicectl follows.
	watch := testenv.StartBinary(t, "sluicectl", "config", "--watch", "--count", "2", "--addr", w.st.TranslatorAddr)
	watch.WaitLog(t, " complete, hash ")
	host := "watched." + w.ns + ".example.com"
	if _, err := ings.Create(ctx, ingress("watched", host, "alpha"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if code := watch.WaitExit(t, 30*time.Second); code != 0 {
		t.Fatalf("sluicectl config --watch exited %d:\n%s", code, watch.Logs())
	}
	var deltaLine string
	for _, l := range strings.Split(watch.Logs(), "\n") {
		if strings.Contains(l, " onto ") {
			deltaLine = l
		}
	}
	if !strings.Contains(deltaLine, "+"+strconv.Quote(host)) {
		t.Fatalf("sluicectl config --watch did not show the new host as a delta:\n%s", watch.Logs())
	}
	var size int
	if _, err := fmt.Sscanf(deltaLine[strings.Index(deltaLine, "hash ")+18:], "%d bytes", &size); err != nil || size <= 0 || size > 2048 {
		t.Fatalf("the delta for one Ingress is %d bytes (%v), want at most 2 KB: %s", size, err, deltaLine)
	}
	k.finish()
}

func runCtl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	p := testenv.StartBinary(t, "sluicectl", args...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, err := p.Wait(ctx)
	if err != nil {
		return "", err
	}
	if code != 0 {
		return p.Logs(), fmt.Errorf("sluicectl %v exited %d:\n%s", args, code, p.Logs())
	}
	return p.Logs(), nil
}

// Scenario 9: 2,000 changes in a burst: the final Caddy config equals a translation of the
// cluster's objects, and every host answers as the Ingresses the apiserver lists say, an
// oracle that shares no code with the translator (a translator that drops every tenth
// Ingress passes the first check and fails the second).
func TestScenario9BurstOfTwoThousandChangesConverges(t *testing.T) {
	w := newWorld(t, true, stack.Config{})
	w.createRoutes(0, 4)
	w.waitServed(0, 4, time.Minute)
	k := w.keep(0, 4)
	ctx := context.Background()
	var wg sync.WaitGroup
	const workers, per = 4, 500
	for wk := 0; wk < workers; wk++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ings := w.c.Client.NetworkingV1().Ingresses(w.ns)
			eps := w.c.Client.DiscoveryV1().EndpointSlices(w.ns)
			for i := 0; i < per; i++ {
				n := 1000 + wk*per + i
				var err error
				switch i % 5 {
				case 0, 1, 2:
					_, err = ings.Create(ctx, ingress(fmt.Sprintf("r%d", n), w.host(n), w.svcOf(n)), metav1.CreateOptions{})
				case 3:
					err = ings.Delete(ctx, fmt.Sprintf("r%d", n-3), metav1.DeleteOptions{})
				case 4:
					// An EndpointSlice of beta's, as the EndpointSlice controller wrote it, touched
					// under the controller's feet.
					var list *discoveryv1.EndpointSliceList
					list, err = eps.List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=beta"})
					if err == nil && len(list.Items) > 0 {
						s := &list.Items[0]
						s.Labels["touched"] = strconv.Itoa(n)
						_, err = eps.Update(ctx, s, metav1.UpdateOptions{})
					}
				}
				if err != nil && !strings.Contains(err.Error(), "the object has been modified") {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	w.waitConverged(2 * time.Minute)
	k.finish()
	w.checkServedAsListed(1000, 1000+workers*per)
}

// checkServedAsListed checks what Caddy serves against an oracle that shares no code with
// the translator: this world's Ingresses as the apiserver lists them each send one host's "/"
// to one Service, so each host r<from>..r<to-1> answers from the Service its Ingress names
// while the Ingress exists, and 404 once it is gone. (waitConverged compares hashes with a
// translation of the same objects, which a translation bug would fool.)
func (w *world) checkServedAsListed(from, to int) {
	w.t.Helper()
	list, err := w.c.Client.NetworkingV1().Ingresses(w.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	want := map[string]string{}
	for _, ing := range list.Items {
		if len(ing.Spec.Rules) == 1 && ing.Spec.Rules[0].HTTP != nil && len(ing.Spec.Rules[0].HTTP.Paths) == 1 {
			want[ing.Spec.Rules[0].Host] = ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name
		}
	}
	wrong := 0
	for n := from; n < to; n++ {
		host := w.host(n)
		expect, ok := want[host]
		if !ok {
			expect = "404"
		}
		if got := w.answer(host, "/"); got != expect {
			if wrong++; wrong <= 5 {
				w.t.Errorf("%s answers %s; the apiserver's Ingresses say %s", host, got, expect)
			}
		}
	}
	if wrong > 5 {
		w.t.Errorf("and %d more hosts answer otherwise than the Ingresses say", wrong-5)
	}
}
