package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/sluice-io/sluice/internal/harness/stack"
	"github.com/sluice-io/sluice/internal/harness/testenv"
)

// traffic sends requests through Caddy for one host from several clients without pause, and
// counts every answer that is not a 200 from the expected backend: the request keeper of the
// endpoint scenarios.
type traffic struct {
	w       *world
	host    string
	backend string

	sent, lost atomic.Int64
	mu         sync.Mutex
	pods       map[string]int // answering Pod -> requests
	last       []string       // the answering Pods of the latest requests
	failures   []string
	stop       chan struct{}
	wg         sync.WaitGroup
}

func (w *world) traffic(host, backend string, clients int) *traffic {
	tr := &traffic{w: w, host: host, backend: backend, pods: map[string]int{}, stop: make(chan struct{})}
	for range clients {
		tr.wg.Add(1)
		go tr.run()
	}
	w.t.Cleanup(tr.finish)
	return tr
}

func (tr *traffic) run() {
	defer tr.wg.Done()
	client := &http.Client{Timeout: 5 * time.Second}
	for {
		select {
		case <-tr.stop:
			return
		default:
		}
		req, _ := http.NewRequest(http.MethodGet, "http://"+tr.w.st.HTTPAddr()+"/", nil)
		req.Host = tr.host
		tr.sent.Add(1)
		resp, err := client.Do(req)
		var a struct{ Backend, Pod string }
		failure := ""
		if err != nil {
			failure = err.Error()
		} else {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case resp.StatusCode != http.StatusOK:
				failure = fmt.Sprintf("status %d: %.80s", resp.StatusCode, body)
			case json.Unmarshal(body, &a) != nil || a.Backend != tr.backend:
				failure = fmt.Sprintf("answered %.80s", body)
			}
		}
		tr.mu.Lock()
		if failure != "" {
			tr.lost.Add(1)
			if len(tr.failures) < 20 {
				tr.failures = append(tr.failures, time.Now().Format("15:04:05.000")+" "+failure)
			}
		} else {
			tr.pods[a.Pod]++
			tr.last = append(tr.last, a.Pod)
			if len(tr.last) > 50 {
				tr.last = tr.last[1:]
			}
		}
		tr.mu.Unlock()
	}
}

// finish stops the clients; it fails the test if any request was lost.
func (tr *traffic) finish() {
	select {
	case <-tr.stop:
		return
	default:
	}
	close(tr.stop)
	tr.wg.Wait()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if n := tr.lost.Load(); n > 0 {
		tr.w.t.Errorf("request keeper: %d of %d requests lost, first ones:\n%s", n, tr.sent.Load(), strings.Join(tr.failures, "\n"))
	}
	tr.w.t.Logf("request keeper: %d requests, %d lost, answered by %v", tr.sent.Load(), tr.lost.Load(), tr.pods)
}

// terminatingSeen polls the Service's EndpointSlices until stop and reports whether any
// endpoint was ever listed terminating, so that the scenario proves that path was taken.
func (w *world) terminatingSeen(svc string, stop <-chan struct{}) <-chan bool {
	out := make(chan bool, 1)
	go func() {
		seen := false
		defer func() { out <- seen }()
		for {
			list, err := w.c.Client.DiscoveryV1().EndpointSlices(w.ns).List(context.Background(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
			if err == nil {
				for _, s := range list.Items {
					for _, e := range s.Endpoints {
						seen = seen || ptr.Deref(e.Conditions.Terminating, false)
					}
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return out
}

// Scenario 12: a rolling update of a backend Deployment under steady traffic loses no request.
// The Pods come from the real Deployment, ReplicaSet and EndpointSlice controllers; an old
// Pod's endpoint turns terminating when it is deleted, Sluice stops sending it new requests,
// and its preStop pause outlasts that, so that it stops accepting only once nothing is sent.
func TestScenario12RollingUpdateUnderTrafficLosesNoRequest(t *testing.T) {
	w := newWorld(t, true, stack.Config{})
	ctx := context.Background()
	d := testenv.BackendDeployment("roll", 3, 2)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
		MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1))}}
	if _, err := w.c.Client.AppsV1().Deployments(w.ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.service("roll", "roll")
	if err := w.c.WaitDeploymentReady(ctx, w.ns, "roll", "roll"); err != nil {
		t.Fatal(err)
	}
	host := "roll." + w.ns + ".example.com"
	if _, err := w.c.Client.NetworkingV1().Ingresses(w.ns).Create(ctx, ingress("roll", host, "roll"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the route to be served by roll", func() (bool, error) {
		got := w.answer(host, "/")
		return got == "roll", fmt.Errorf("it answers %s", got)
	})
	before := podNames(t, w, "roll")

	tr := w.traffic(host, "roll", 4)
	stopWatch := make(chan struct{})
	seen := w.terminatingSeen("roll", stopWatch)
	testenv.Eventually(t, time.Minute, "traffic to flow", func() (bool, error) {
		return tr.sent.Load() > 50, nil
	})
	d, err := w.c.Client.AppsV1().Deployments(w.ns).Get(ctx, "roll", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Annotations = map[string]string{"sluice.test/revision": "2"}
	if _, err := w.c.Client.AppsV1().Deployments(w.ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Rolled out: every Pod of the new template ready, every old one removed by the runner.
	testenv.Eventually(t, 2*time.Minute, "the rollout to finish and the old pods to be gone", func() (bool, error) {
		if err := w.c.WaitDeploymentReady(ctx, w.ns, "roll", "roll"); err != nil {
			return false, err
		}
		now := podNames(t, w, "roll")
		for p := range now {
			if before[p] {
				return false, fmt.Errorf("old pod %s still exists", p)
			}
		}
		return len(now) == 3, fmt.Errorf("%d pods", len(now))
	})
	sentAtEnd := tr.sent.Load()
	testenv.Eventually(t, time.Minute, "more traffic after the rollout", func() (bool, error) {
		return tr.sent.Load() > sentAtEnd+100, nil
	})
	close(stopWatch)
	tr.finish()
	if !<-seen {
		t.Error("no endpoint of roll was ever listed terminating: the rollout did not exercise terminating endpoints")
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var oldServed, newServed []string
	for p := range tr.pods {
		if before[p] {
			oldServed = append(oldServed, p)
		} else {
			newServed = append(newServed, p)
		}
	}
	sort.Strings(oldServed)
	sort.Strings(newServed)
	if len(oldServed) == 0 || len(newServed) == 0 {
		t.Errorf("answered by old pods %v and new pods %v: want both", oldServed, newServed)
	}
	for _, p := range tr.last {
		if before[p] {
			t.Errorf("old pod %s still answers after the rollout", p)
			break
		}
	}
}

func podNames(t *testing.T, w *world, app string) map[string]bool {
	t.Helper()
	list, err := w.c.Client.CoreV1().Pods(w.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range list.Items {
		out[p.Name] = true
	}
	return out
}

// Scaling a backend Deployment under steady traffic: scaled up, every new Pod gets requests
// once the EndpointSlice controller lists it ready; scaled down, the Pods that go stop getting
// requests before they stop accepting (their endpoints turn terminating first). No request is
// lost either way.
func TestScalingABackendUnderTrafficSpreadsAndLosesNoRequest(t *testing.T) {
	w := newWorld(t, true, stack.Config{})
	ctx := context.Background()
	if _, err := w.c.Client.AppsV1().Deployments(w.ns).Create(ctx, testenv.BackendDeployment("scale", 1, 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.service("scale", "scale")
	if err := w.c.WaitDeploymentReady(ctx, w.ns, "scale", "scale"); err != nil {
		t.Fatal(err)
	}
	host := "scale." + w.ns + ".example.com"
	if _, err := w.c.Client.NetworkingV1().Ingresses(w.ns).Create(ctx, ingress("scale", host, "scale"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the route to be served by scale", func() (bool, error) {
		got := w.answer(host, "/")
		return got == "scale", fmt.Errorf("it answers %s", got)
	})
	tr := w.traffic(host, "scale", 2)
	setReplicas := func(n int32) {
		t.Helper()
		s, err := w.c.Client.AppsV1().Deployments(w.ns).GetScale(ctx, "scale", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Spec.Replicas = n
		if _, err := w.c.Client.AppsV1().Deployments(w.ns).UpdateScale(ctx, "scale", s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := w.c.WaitDeploymentReady(ctx, w.ns, "scale", "scale"); err != nil {
			t.Fatal(err)
		}
	}
	setReplicas(3)
	three := podNames(t, w, "scale")
	testenv.Eventually(t, time.Minute, "every one of the 3 pods to answer through Caddy", func() (bool, error) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		for p := range three {
			if tr.pods[p] == 0 {
				return false, fmt.Errorf("pod %s has had no request yet (answered: %v)", p, tr.pods)
			}
		}
		return true, nil
	})
	setReplicas(1)
	testenv.Eventually(t, time.Minute, "the scaled-away pods to be gone", func() (bool, error) {
		n := len(podNames(t, w, "scale"))
		return n == 1, fmt.Errorf("%d pods", n)
	})
	left := podNames(t, w, "scale")
	sent := tr.sent.Load()
	testenv.Eventually(t, time.Minute, "more traffic after scaling down", func() (bool, error) {
		return tr.sent.Load() > sent+100, nil
	})
	tr.finish()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, p := range tr.last {
		if !left[p] {
			t.Errorf("pod %s, scaled away, still answers", p)
			break
		}
	}
}
