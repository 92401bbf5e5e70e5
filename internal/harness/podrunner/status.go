package podrunner

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// view is what the runner knows of a Pod at one moment: the input of the status it writes.
type view struct {
	podIP, hostIP string
	started       time.Time // when the runner took the Pod up (status.startTime)
	sandbox       bool      // the network namespace exists
	containers    []containerView
}

// containerView is one container's state.
type containerView struct {
	name, image string
	// waiting: not running, and why (ContainerCreating, ErrImagePull, CrashLoopBackOff...).
	waitingReason, waitingMessage string
	running                       bool
	startedAt                     time.Time
	ready                         bool
	restarts                      int32
	// terminated is the last exit: current when the container is done for good, last state
	// when it was restarted.
	terminated *exit
	done       bool // exited and will not be restarted (restartPolicy)
}

type exit struct {
	code               int32
	reason, message    string
	startedAt, endedAt time.Time
}

// status computes the Pod status a kubelet would write for v. It is pure: the previous status
// gives the conditions' transition times, now stamps the new ones.
func status(prev corev1.PodStatus, v view, now time.Time) corev1.PodStatus {
	st := corev1.PodStatus{QOSClass: prev.QOSClass}
	if st.QOSClass == "" {
		st.QOSClass = corev1.PodQOSBestEffort
	}
	if v.podIP != "" {
		st.PodIP, st.PodIPs = v.podIP, []corev1.PodIP{{IP: v.podIP}}
	}
	if v.hostIP != "" {
		st.HostIP, st.HostIPs = v.hostIP, []corev1.HostIP{{IP: v.hostIP}}
	}
	if !v.started.IsZero() {
		st.StartTime = &metav1.Time{Time: v.started}
	}
	allReady, allDone, anyFailed, anyRunning, anyStarted := len(v.containers) > 0, len(v.containers) > 0, false, false, false
	for _, c := range v.containers {
		cs := corev1.ContainerStatus{Name: c.name, Image: c.image, ImageID: c.image, Ready: c.ready && c.running, RestartCount: c.restarts}
		started := c.running
		cs.Started = &started
		switch {
		case c.running:
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.Time{Time: c.startedAt}}
			cs.ContainerID = "sluice-podrunner://" + c.name
		case c.done && c.terminated != nil:
			cs.State.Terminated = terminatedState(c.terminated)
		default:
			reason := c.waitingReason
			if reason == "" {
				reason = ReasonContainerCreating
			}
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: c.waitingMessage}
		}
		if c.terminated != nil && !c.done {
			cs.LastTerminationState.Terminated = terminatedState(c.terminated)
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
		allReady = allReady && cs.Ready
		allDone = allDone && c.done
		anyFailed = anyFailed || (c.done && c.terminated != nil && c.terminated.code != 0)
		anyRunning = anyRunning || c.running
		anyStarted = anyStarted || c.running || c.terminated != nil
	}
	switch {
	case allDone && anyFailed:
		st.Phase = corev1.PodFailed
	case allDone:
		st.Phase = corev1.PodSucceeded
	case anyRunning || anyStarted:
		st.Phase = corev1.PodRunning
	default:
		st.Phase = corev1.PodPending
	}

	cond := func(t corev1.PodConditionType, ok bool, reason string) {
		s := corev1.ConditionFalse
		if ok {
			s, reason = corev1.ConditionTrue, ""
		}
		c := corev1.PodCondition{Type: t, Status: s, Reason: reason, LastTransitionTime: metav1.Time{Time: now}}
		for _, p := range prev.Conditions {
			if p.Type == t && p.Status == s {
				c.LastTransitionTime = p.LastTransitionTime
			}
		}
		st.Conditions = append(st.Conditions, c)
	}
	notReady := reasonContainersNotReady
	switch st.Phase {
	case corev1.PodSucceeded:
		notReady = reasonPodCompleted
	case corev1.PodFailed:
		notReady = reasonPodFailed
	}
	cond(corev1.PodReadyToStartContainers, v.sandbox, "")
	cond(corev1.PodInitialized, true, "")
	cond(corev1.ContainersReady, allReady, notReady)
	cond(corev1.PodReady, allReady, notReady)
	cond(corev1.PodScheduled, true, "")
	return st
}

func terminatedState(e *exit) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{ExitCode: e.code, Reason: e.reason, Message: e.message,
		StartedAt: metav1.Time{Time: e.startedAt}, FinishedAt: metav1.Time{Time: e.endedAt}}
}

// restarts reports whether a container that exited with code is started again.
func restarts(policy corev1.RestartPolicy, code int32) bool {
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return code != 0
	default:
		return true
	}
}

// backoff is the wait before the n-th restart (n from 1): 1 s doubling to 30 s. A kubelet
// starts at 10 s and caps at 5 min; the runner is for tests, where a crash loop should show
// quickly.
func backoff(n int32) time.Duration {
	d := time.Second
	for i := int32(1); i < n && d < 30*time.Second; i++ {
		d *= 2
	}
	if d > 30*time.Second {
		d = 30 * time.Second
	}
	return d
}
