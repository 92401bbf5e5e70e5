package podrunner

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An image maps by repository, whatever its tag or digest; an unknown one is ErrImagePull
// naming what the runner knows, never a hang.
func TestImagesMapByRepository(t *testing.T) {
	images := []Image{{Repository: "registry.k8s.io/gateway-api/echo-basic", Binary: "/bin/echo-basic"}, {Repository: "localhost:5000/app", Binary: "/bin/app"}}
	for _, tc := range []struct{ image, want, reason string }{
		{"registry.k8s.io/gateway-api/echo-basic:v1.5.1", "/bin/echo-basic", ""},
		{"registry.k8s.io/gateway-api/echo-basic@sha256:abc", "/bin/echo-basic", ""},
		{"registry.k8s.io/gateway-api/echo-basic", "/bin/echo-basic", ""},
		{"localhost:5000/app:1", "/bin/app", ""},
		{"localhost:5000/app", "/bin/app", ""},
		{"nginx:1.27", "", ReasonErrImagePull},
	} {
		got, err := binaryFor(images, tc.image)
		var ce *containerError
		switch {
		case tc.reason == "" && (err != nil || got != tc.want):
			t.Errorf("%s: got %q, %v; want %q", tc.image, got, err, tc.want)
		case tc.reason != "" && (!errors.As(err, &ce) || ce.reason != tc.reason):
			t.Errorf("%s: got %q, %v; want reason %s", tc.image, got, err, tc.reason)
		}
	}
}

// $(NAME) expands earlier variables as the kubelet does; $$ escapes; unknown names stay.
func TestExpandFollowsTheKubelet(t *testing.T) {
	vars := map[string]string{"A": "1", "POD": "p-0"}
	for in, want := range map[string]string{
		"plain": "plain", "$(A)": "1", "x-$(POD)-y": "x-p-0-y", "$(B)": "$(B)", "$$(A)": "$(A)", "$(A": "$(A", "cost $5": "cost $5",
	} {
		if got := expand(in, vars); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

// A path under a volume's mountPath names the volume's files where they really are; the
// longest mount wins.
func TestRewriteMountPaths(t *testing.T) {
	mounts := []mount{{"/etc/secret-volume/inner", "/pods/x/volumes/b"}, {"/etc/secret-volume", "/pods/x/volumes/a"}}
	for in, want := range map[string]string{
		"/etc/secret-volume/crt": "/pods/x/volumes/a/crt", "/etc/secret-volume": "/pods/x/volumes/a",
		"/etc/secret-volume/inner/k": "/pods/x/volumes/b/k", "/etc/secret-volumes/x": "/etc/secret-volumes/x", "8080": "8080",
	} {
		if got := rewrite(in, mounts); got != want {
			t.Errorf("rewrite(%q) = %q, want %q", in, got, want)
		}
	}
}

// A probe changes its outcome only after its threshold of consecutive differing results.
func TestProbeThresholds(t *testing.T) {
	pr := newProber(&corev1.Probe{SuccessThreshold: 2, FailureThreshold: 3}, false)
	steps := []struct {
		pass, want bool
	}{{true, false}, {true, true}, {false, true}, {false, true}, {true, true}, {false, true}, {false, true}, {false, false}, {true, false}}
	for i, s := range steps {
		if got := pr.observe(s.pass); got != s.want {
			t.Fatalf("step %d: observe(%v) = %v, want %v", i, s.pass, got, s.want)
		}
	}
}

// The Pod status a kubelet writes: phases by restartPolicy and exits, Ready only when every
// container is, and transition times kept while a condition holds.
func TestStatusIsAKubelets(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	running := func(ready bool) containerView {
		return containerView{name: "c", image: "i", running: true, startedAt: t0, ready: ready}
	}
	for _, tc := range []struct {
		name       string
		v          view
		phase      corev1.PodPhase
		ready      corev1.ConditionStatus
		waitReason string
	}{
		{"image cannot be mapped", view{sandbox: true, containers: []containerView{{name: "c", waitingReason: ReasonErrImagePull, waitingMessage: "no binary"}}}, corev1.PodPending, corev1.ConditionFalse, ReasonErrImagePull},
		{"creating", view{containers: []containerView{{name: "c"}}}, corev1.PodPending, corev1.ConditionFalse, ReasonContainerCreating},
		{"running, probe not passed", view{podIP: "10.252.1.2", sandbox: true, containers: []containerView{running(false)}}, corev1.PodRunning, corev1.ConditionFalse, ""},
		{"running and ready", view{podIP: "10.252.1.2", sandbox: true, containers: []containerView{running(true)}}, corev1.PodRunning, corev1.ConditionTrue, ""},
		{"one of two ready", view{sandbox: true, containers: []containerView{running(true), running(false)}}, corev1.PodRunning, corev1.ConditionFalse, ""},
		{"crash loop", view{sandbox: true, containers: []containerView{{name: "c", waitingReason: ReasonCrashLoopBackOff, restarts: 2, terminated: &exit{code: 3, reason: reasonError}}}}, corev1.PodRunning, corev1.ConditionFalse, ReasonCrashLoopBackOff},
		{"completed", view{sandbox: true, containers: []containerView{{name: "c", done: true, terminated: &exit{code: 0, reason: reasonCompleted}}}}, corev1.PodSucceeded, corev1.ConditionFalse, ""},
		{"failed", view{sandbox: true, containers: []containerView{{name: "c", done: true, terminated: &exit{code: 1, reason: reasonError}}}}, corev1.PodFailed, corev1.ConditionFalse, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev := corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: tc.ready, LastTransitionTime: metav1.Time{Time: t0}}}}
			st := status(prev, tc.v, t1)
			if st.Phase != tc.phase {
				t.Errorf("phase %s, want %s", st.Phase, tc.phase)
			}
			var ready *corev1.PodCondition
			for i := range st.Conditions {
				if st.Conditions[i].Type == corev1.PodReady {
					ready = &st.Conditions[i]
				}
			}
			if ready == nil || ready.Status != tc.ready {
				t.Fatalf("Ready %+v, want %s", ready, tc.ready)
			}
			if !ready.LastTransitionTime.Time.Equal(t0) {
				t.Errorf("Ready's transition time %s, want the previous %s (the condition held)", ready.LastTransitionTime, t0)
			}
			cs := st.ContainerStatuses[0]
			if tc.waitReason != "" && (cs.State.Waiting == nil || cs.State.Waiting.Reason != tc.waitReason) {
				t.Errorf("container state %+v, want waiting %s", cs.State, tc.waitReason)
			}
			if tc.v.podIP != "" && (st.PodIP != tc.v.podIP || len(st.PodIPs) != 1 || st.PodIPs[0].IP != tc.v.podIP) {
				t.Errorf("podIP %q podIPs %v, want %s", st.PodIP, st.PodIPs, tc.v.podIP)
			}
		})
	}
	// A condition that changes gets the new time.
	st := status(corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Time{Time: t0}}}},
		view{sandbox: true, containers: []containerView{running(true)}}, t1)
	for _, c := range st.Conditions {
		if c.Type == corev1.PodReady && !c.LastTransitionTime.Time.Equal(t1) {
			t.Errorf("Ready became True at %s, want %s", c.LastTransitionTime, t1)
		}
	}
}

// Restarts follow restartPolicy, with a backoff that doubles to a cap.
func TestRestartPolicyAndBackoff(t *testing.T) {
	for _, tc := range []struct {
		policy corev1.RestartPolicy
		code   int32
		want   bool
	}{{corev1.RestartPolicyAlways, 0, true}, {corev1.RestartPolicyAlways, 1, true}, {corev1.RestartPolicyOnFailure, 0, false}, {corev1.RestartPolicyOnFailure, 2, true}, {corev1.RestartPolicyNever, 2, false}, {"", 0, true}} {
		if got := restarts(tc.policy, tc.code); got != tc.want {
			t.Errorf("restarts(%s, %d) = %v, want %v", tc.policy, tc.code, got, tc.want)
		}
	}
	for n, want := range map[int32]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 6: 30 * time.Second, 40: 30 * time.Second} {
		if got := backoff(n); got != want {
			t.Errorf("backoff(%d) = %s, want %s", n, got, want)
		}
	}
}
