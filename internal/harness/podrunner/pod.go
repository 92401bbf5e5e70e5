package podrunner

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podState is one Pod the runner took up: its sandbox and containers.
type podState struct {
	r       *Runner
	key     string
	uid     types.UID
	dir     string
	started time.Time
	policy  corev1.RestartPolicy
	hostIP  string
	// retry: a Secret or ConfigMap the Pod needs was missing; sync starts it over.
	retry bool

	mu          sync.Mutex
	sb          *sandbox
	podIP       string
	containers  []*container
	terminating bool
	killed      bool
	stop        chan struct{} // closed when the Pod is being stopped
	stopOnce    sync.Once
	closeOnce   sync.Once
}

// container is one container and its process.
type container struct {
	st   *podState
	spec corev1.Container
	plan *plan

	// guarded by st.mu
	view     containerView
	proc     *os.Process
	exits    chan struct{} // closed when the current process exits
	lastCode int32
}

func (st *podState) stopping() chan struct{} {
	st.stopOnce.Do(func() { st.stop = make(chan struct{}) })
	return st.stop
}

// halt closes the stopping channel, once, whoever stops the Pod first.
func (st *podState) halt() { st.closeOnce.Do(func() { close(st.stopping()) }) }

func (st *podState) changed() { st.r.queue.Add(st.key) }

func (st *podState) logPath(container string) string {
	return filepath.Join(st.r.cfg.Dir, "logs", fmt.Sprintf("%s_%s.log", filepath.Base(st.dir), container))
}

func (st *podState) viewLocked() view {
	v := view{podIP: st.podIP, hostIP: st.hostIP, started: st.started, sandbox: st.sb != nil}
	for _, c := range st.containers {
		v.containers = append(v.containers, c.view)
	}
	return v
}

// supervise runs the container's process, restarts it by the Pod's restartPolicy, and runs
// its probes while it lives.
func (c *container) supervise(log hclog.Logger) {
	st := c.st
	stop := st.stopping()
	var n int32 // restarts since the last long run, for the backoff
	for {
		st.mu.Lock()
		if st.terminating || st.killed {
			st.mu.Unlock()
			return
		}
		proc, exits, err := c.start()
		began := time.Now()
		if err != nil {
			c.view.waitingReason, c.view.waitingMessage = ReasonRunContainerError, err.Error()
			st.mu.Unlock()
			log.Warn("start container", "error", err)
			st.changed()
		} else {
			c.proc, c.exits = proc, exits
			c.view.running, c.view.startedAt, c.view.ready = true, st.r.cfg.Now(), false
			c.view.waitingReason, c.view.waitingMessage = "", ""
			st.mu.Unlock()
			st.changed()
			probeCtx, cancel := context.WithCancel(context.Background())
			go c.probe(probeCtx, log)
			<-exits
			cancel()
			code := c.exitCode()
			st.mu.Lock()
			ended := st.r.cfg.Now()
			reason := reasonCompleted
			if code != 0 {
				reason = reasonError
			}
			c.view.running, c.view.ready, c.proc = false, false, nil
			c.view.terminated = &exit{code: code, reason: reason, startedAt: c.view.startedAt, endedAt: ended}
			stopping := st.terminating || st.killed
			if stopping || !restarts(st.policy, code) {
				c.view.done = true
				st.mu.Unlock()
				st.changed()
				return
			}
			st.mu.Unlock()
			log.Info("container exited, restarting", "code", code)
		}
		// A run that lasted a while resets the backoff, as a kubelet's does.
		if time.Since(began) > time.Minute {
			n = 0
		}
		n++
		st.mu.Lock()
		c.view.restarts++
		c.view.waitingReason, c.view.waitingMessage = ReasonCrashLoopBackOff, fmt.Sprintf("back-off %s restarting failed container %s", backoff(n), c.spec.Name)
		st.mu.Unlock()
		st.changed()
		select {
		case <-stop:
			return
		case <-time.After(backoff(n)):
		}
	}
}

// start starts the container's process inside the Pod's network namespace. st.mu is held.
func (c *container) start() (*os.Process, chan struct{}, error) {
	st := c.st
	if err := os.MkdirAll(filepath.Dir(st.logPath(c.spec.Name)), 0o755); err != nil {
		return nil, nil, err
	}
	logf, err := os.OpenFile(st.logPath(c.spec.Name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", st.sb.ns, c.plan.binary}, c.plan.args...)...)
	cmd.Dir = st.dir
	// Only the container's own environment, and a PATH, as an image would have.
	cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOSTNAME=" + c.podName()}, c.plan.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so that a signal reaches everything it started; killed if the
	// runner's process dies, so that nothing outlives the tests.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, nil, fmt.Errorf("start %s: %w", c.plan.binary, err)
	}
	exits := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		st.mu.Lock()
		c.lastCode = int32(cmd.ProcessState.ExitCode())
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			c.lastCode = 128 + int32(ws.Signal())
		}
		st.mu.Unlock()
		close(exits)
	}()
	return cmd.Process, exits, nil
}

func (c *container) podName() string {
	_, name, _ := splitKey(c.st.key)
	return name
}

func splitKey(key string) (string, string, error) {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			return key[:i], key[i+1:], nil
		}
	}
	return "", key, nil
}

func (c *container) exitCode() int32 {
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	return c.lastCode
}

// probe runs the container's readiness and liveness probes until ctx ends. Without a
// readiness probe the container is ready once it runs, as with a kubelet.
func (c *container) probe(ctx context.Context, log hclog.Logger) {
	st := c.st
	st.mu.Lock()
	ip, named := st.podIP, c.plan.ports
	st.mu.Unlock()
	setReady := func(ok bool) {
		st.mu.Lock()
		changed := c.view.ready != ok && c.view.running
		if c.view.running {
			c.view.ready = ok
		}
		st.mu.Unlock()
		if changed {
			st.changed()
		}
	}
	if c.spec.ReadinessProbe == nil {
		setReady(true)
	} else {
		go c.loop(ctx, c.spec.ReadinessProbe, false, func(ok bool, err error) {
			if !ok {
				log.Debug("readiness probe failed", "error", err)
			}
			setReady(ok)
		}, ip, named)
	}
	if c.spec.LivenessProbe != nil {
		go c.loop(ctx, c.spec.LivenessProbe, true, func(ok bool, err error) {
			if ok {
				return
			}
			log.Info("liveness probe failed, killing the container", "error", err)
			st.mu.Lock()
			p := c.proc
			st.mu.Unlock()
			if p != nil {
				_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
			}
		}, ip, named)
	}
}

// loop probes every period after the initial delay and reports each outcome the thresholds
// decide.
func (c *container) loop(ctx context.Context, p *corev1.Probe, initial bool, report func(bool, error), ip string, named map[string]int32) {
	pr := newProber(p, initial)
	wait := time.Duration(p.InitialDelaySeconds) * time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = period(p)
		err := probeOnce(ctx, p, ip, named)
		if ctx.Err() != nil {
			return
		}
		report(pr.observe(err == nil), err)
	}
}

// terminate stops a Pod being deleted, once: preStop hooks, SIGTERM, SIGKILL when the grace
// period is over, then the sandbox's removal and done.
func (st *podState) terminate(pod *corev1.Pod, done func()) {
	st.mu.Lock()
	if st.terminating || st.killed {
		st.mu.Unlock()
		return
	}
	st.terminating = true
	st.mu.Unlock()
	grace := 30 * time.Second
	if pod.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	} else if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	log := st.r.log.With("pod", st.key)
	go func() {
		deadline := time.Now().Add(grace)
		st.halt()
		var wg sync.WaitGroup
		for _, c := range st.containers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.stop(log.With("container", c.spec.Name), deadline)
			}()
		}
		wg.Wait()
		st.teardown()
		log.Debug("pod terminated", "grace", grace)
		done()
	}()
}

// stop runs the container's preStop hook, then SIGTERM, and SIGKILL at the deadline.
func (c *container) stop(log hclog.Logger, deadline time.Time) {
	st := c.st
	if h := c.spec.Lifecycle; h != nil && h.PreStop != nil {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		c.preStop(ctx, log, h.PreStop)
		cancel()
	}
	st.mu.Lock()
	p, exits := c.proc, c.exits
	st.mu.Unlock()
	if p == nil {
		return
	}
	_ = syscall.Kill(-p.Pid, syscall.SIGTERM)
	select {
	case <-exits:
	case <-time.After(time.Until(deadline)):
		log.Info("grace period over, killing the container")
		_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
		<-exits
	}
}

// preStop runs a hook: sleep, or an HTTP GET to the Pod. An exec hook has no image to run
// in, so it is logged and skipped.
func (c *container) preStop(ctx context.Context, log hclog.Logger, h *corev1.LifecycleHandler) {
	switch {
	case h.Sleep != nil:
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(h.Sleep.Seconds) * time.Second):
		}
	case h.HTTPGet != nil:
		c.st.mu.Lock()
		ip := c.st.podIP
		c.st.mu.Unlock()
		n, err := port(h.HTTPGet.Port, c.plan.ports)
		if err == nil {
			host := h.HTTPGet.Host
			if host == "" {
				host = ip
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, strconv.Itoa(n))+h.HTTPGet.Path, nil)
			var resp *http.Response
			if resp, err = probeClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
		if err != nil {
			log.Info("preStop hook failed", "error", err)
		}
	default:
		log.Info("preStop exec hooks are not supported by the pod runner; skipped")
	}
}

// kill stops the Pod's processes at once (the runner is stopping, or the Pod was removed by
// force).
func (st *podState) kill() {
	st.mu.Lock()
	if st.killed {
		st.mu.Unlock()
		return
	}
	st.killed = true
	var waits []chan struct{}
	for _, c := range st.containers {
		if c.proc != nil {
			_ = syscall.Kill(-c.proc.Pid, syscall.SIGKILL)
			waits = append(waits, c.exits)
		}
	}
	st.mu.Unlock()
	st.halt()
	for _, w := range waits {
		<-w
	}
	st.teardown()
}

// teardown removes the Pod's sandbox and files (its logs stay until the runner's Dir goes).
func (st *podState) teardown() {
	st.mu.Lock()
	sb := st.sb
	st.sb = nil
	st.mu.Unlock()
	if sb != nil {
		st.r.cfg.Network.remove(sb)
	}
	_ = os.RemoveAll(st.dir)
}
