package podrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// configRetry is how long a Pod whose Secret or ConfigMap is missing waits before the runner
// tries again.
const configRetry = 2 * time.Second

// Config configures a Runner.
type Config struct {
	// Client has the rights of a kubelet that may read and bind every Pod (the tests give it
	// admin rights).
	Client kubernetes.Interface
	// Node is the Node the runner creates, binds Pods to, and runs the Pods of.
	Node string
	// Network holds the Pods' network namespaces; the runner does not close it.
	Network *Network
	// Images maps container images to binaries.
	Images []Image
	// Dir holds each Pod's files (volumes) and its containers' output.
	Dir string
	// Log defaults to a null logger.
	Log hclog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
	// Workers is how many Pods are taken up at once (default 4).
	Workers int
}

// Runner is the kubelet stand-in. Informer callbacks only enqueue Pod keys; sync, run by the
// workers, owns the per-Pod state and is the only writer of Pod status.
type Runner struct {
	cfg    Config
	log    hclog.Logger
	queue  workqueue.TypedRateLimitingInterface[string]
	pods   corelisters.PodLister
	synced cache.InformerSynced

	mu    sync.Mutex
	state map[string]*podState // namespace/name -> the Pod the runner took up
}

// New checks cfg and returns a Runner; Run starts it.
func New(cfg Config) (*Runner, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("podrunner: Client is required")
	case cfg.Node == "":
		return nil, errors.New("podrunner: Node is required")
	case cfg.Network == nil:
		return nil, errors.New("podrunner: Network is required")
	case cfg.Dir == "":
		return nil, errors.New("podrunner: Dir is required")
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	return &Runner{cfg: cfg, log: cfg.Log.Named("podrunner"), state: map[string]*podState{},
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}, nil
}

// Run creates the Node, watches Pods and runs them until ctx ends; then it stops every
// process it started (the Pods stay in the apiserver, as after a kubelet's crash).
func (r *Runner) Run(ctx context.Context) error {
	logsPort, err := r.serveLogs(ctx)
	if err != nil {
		return err
	}
	if err := r.ensureNode(ctx, logsPort); err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(r.cfg.Client, 0)
	inf := factory.Core().V1().Pods()
	r.pods = inf.Lister()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			r.queue.Add(key)
		}
	}
	reg, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
	})
	if err != nil {
		return fmt.Errorf("podrunner: watch pods: %w", err)
	}
	r.synced = reg.HasSynced
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), r.synced) {
		return ctx.Err()
	}
	var wg sync.WaitGroup
	for range r.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
	r.queue.ShutDown()
	wg.Wait()
	factory.Shutdown()
	r.mu.Lock()
	all := make([]*podState, 0, len(r.state))
	for _, st := range r.state {
		all = append(all, st)
	}
	r.mu.Unlock()
	for _, st := range all {
		st.kill()
	}
	return nil
}

func (r *Runner) next(ctx context.Context) bool {
	key, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(key)
	if err := r.sync(ctx, key); err != nil {
		if ctx.Err() == nil {
			r.log.Warn("sync pod failed, will retry", "pod", key, "error", err)
		}
		r.queue.AddRateLimited(key)
		return true
	}
	r.queue.Forget(key)
	return true
}

// ensureNode creates the runner's Node, Ready, with the Pod network's address. Nothing
// heartbeats it: the controller-manager runs no node lifecycle controller.
func (r *Runner) ensureNode(ctx context.Context, logsPort int32) error {
	nodes := r.cfg.Client.CoreV1().Nodes()
	node, err := nodes.Get(ctx, r.cfg.Node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, err = nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: r.cfg.Node, Labels: map[string]string{
			corev1.LabelHostname: r.cfg.Node, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
		}}}, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("podrunner: node %s: %w", r.cfg.Node, err)
	}
	now := metav1.Time{Time: r.cfg.Now()}
	capacity := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("250"), corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")}
	node.Status = corev1.NodeStatus{
		Capacity: capacity, Allocatable: capacity,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "sluice pod runner is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now}},
		// Only the InternalIP: the apiserver tries a Hostname address first, and the Node's
		// name resolves nowhere.
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: r.cfg.Network.HostIP}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: logsPort}},
		NodeInfo:        corev1.NodeSystemInfo{KubeletVersion: "sluice-podrunner", OperatingSystem: "linux", Architecture: "amd64", ContainerRuntimeVersion: "sluice-podrunner://processes"},
	}
	if _, err := nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("podrunner: node %s status: %w", r.cfg.Node, err)
	}
	return nil
}

// sync brings the runner's view of one Pod in line with the apiserver's.
func (r *Runner) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := r.pods.Pods(ns).Get(name)
	r.mu.Lock()
	st := r.state[key]
	r.mu.Unlock()
	if apierrors.IsNotFound(err) {
		if st != nil { // removed by force, or by us after termination
			st.kill()
			r.drop(key, st)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if st != nil && st.retry && pod.DeletionTimestamp == nil {
		// A Secret or ConfigMap it needs was missing: start over, as a kubelet retries
		// mounting volumes and resolving the environment until they exist.
		st.kill()
		r.drop(key, st)
		st = nil
	}
	if st != nil && st.uid != pod.UID { // the name was reused: the old Pod is gone
		st.kill()
		r.drop(key, st)
		st = nil
	}
	if pod.Spec.NodeName == "" {
		if pod.Spec.SchedulerName != "" && pod.Spec.SchedulerName != corev1.DefaultSchedulerName {
			return nil // another scheduler's Pod
		}
		err := r.cfg.Client.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: r.cfg.Node},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("bind pod %s: %w", key, err)
		}
		return nil
	}
	if pod.Spec.NodeName != r.cfg.Node {
		return nil
	}
	if st == nil {
		if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			// Never taken up here (or finished before a restart of the runner): a deleted
			// one is removed at once, as a kubelet does with a Pod it never ran.
			if pod.DeletionTimestamp != nil {
				return r.remove(ctx, pod)
			}
			return nil
		}
		st = r.takeUp(ctx, key, pod)
	}
	if pod.DeletionTimestamp != nil {
		st.terminate(pod, func() {
			if err := r.remove(context.Background(), pod); err != nil {
				r.log.Warn("remove terminated pod", "pod", key, "error", err)
			}
		})
	}
	return r.writeStatus(ctx, pod, st)
}

// takeUp starts a Pod: its network namespace, volumes and containers. Failures become the
// containers' waiting reasons, never an error that stalls the queue.
func (r *Runner) takeUp(ctx context.Context, key string, pod *corev1.Pod) *podState {
	dir := filepath.Join(r.cfg.Dir, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, string(pod.UID)[:8]))
	st := &podState{r: r, key: key, uid: pod.UID, dir: dir, started: r.cfg.Now(), policy: pod.Spec.RestartPolicy, hostIP: r.cfg.Network.HostIP}
	for _, c := range pod.Spec.Containers {
		st.containers = append(st.containers, &container{st: st, spec: c, view: containerView{name: c.Name, image: c.Image, waitingReason: ReasonContainerCreating}})
	}
	r.mu.Lock()
	r.state[key] = st
	r.mu.Unlock()
	log := r.log.With("pod", key)
	fail := func(err error) *podState {
		reason, msg := ReasonConfigError, err.Error()
		var ce *containerError
		if errors.As(err, &ce) {
			reason = ce.reason
		}
		log.Warn("pod cannot start", "reason", reason, "error", msg)
		if reason == ReasonConfigError {
			st.retry = true
			r.queue.AddAfter(key, configRetry)
		}
		st.mu.Lock()
		for _, c := range st.containers {
			c.view.waitingReason, c.view.waitingMessage = reason, msg
		}
		st.mu.Unlock()
		return st
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(err)
	}
	sb, err := r.cfg.Network.add()
	if err != nil {
		return fail(err)
	}
	st.mu.Lock()
	st.sb, st.podIP = sb, sb.ip
	st.mu.Unlock()
	o := &objects{client: r.cfg.Client, pod: pod, podIP: sb.ip, hostIP: r.cfg.Network.HostIP}
	volumes, err := o.writeVolumes(ctx, dir)
	if err != nil {
		return fail(err)
	}
	// Each container is planned on its own: one bad image leaves the others running, and its
	// own status says why.
	for _, c := range st.containers {
		p, err := o.planContainer(ctx, r.cfg.Images, &c.spec, volumes)
		if err != nil {
			reason, msg := ReasonConfigError, err.Error()
			var ce *containerError
			if errors.As(err, &ce) {
				reason = ce.reason
			}
			log.Warn("container cannot start", "container", c.spec.Name, "reason", reason, "error", msg)
			if reason == ReasonConfigError && !st.retry {
				st.retry = true
				r.queue.AddAfter(key, configRetry)
			}
			st.mu.Lock()
			c.view.waitingReason, c.view.waitingMessage = reason, msg
			st.mu.Unlock()
			continue
		}
		c.plan = p
		go c.supervise(log.With("container", c.spec.Name))
	}
	log.Debug("pod taken up", "ip", sb.ip)
	return st
}

// writeStatus patches the Pod's status when it differs from what the Pod shows.
func (r *Runner) writeStatus(ctx context.Context, pod *corev1.Pod, st *podState) error {
	st.mu.Lock()
	v := st.viewLocked()
	st.mu.Unlock()
	next := status(pod.Status, v, r.cfg.Now())
	if equality.Semantic.DeepEqual(statusForCompare(pod.Status), statusForCompare(next)) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": pod.UID}, "status": next})
	if err != nil {
		return err
	}
	_, err = r.cfg.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or another incarnation: the next event syncs again
	}
	if err != nil {
		return fmt.Errorf("patch status of pod %s: %w", st.key, err)
	}
	return nil
}

// statusForCompare drops what the apiserver may normalise (time precision) so that an
// unchanged status is not written again.
func statusForCompare(s corev1.PodStatus) corev1.PodStatus {
	s = *s.DeepCopy()
	trunc := func(t *metav1.Time) {
		if t != nil {
			t.Time = t.Time.Truncate(time.Second).UTC()
		}
	}
	trunc(s.StartTime)
	for i := range s.Conditions {
		trunc(&s.Conditions[i].LastTransitionTime)
		trunc(&s.Conditions[i].LastProbeTime)
	}
	for i := range s.ContainerStatuses {
		cs := &s.ContainerStatuses[i]
		for _, st := range []*corev1.ContainerState{&cs.State, &cs.LastTerminationState} {
			if st.Running != nil {
				trunc(&st.Running.StartedAt)
			}
			if st.Terminated != nil {
				trunc(&st.Terminated.StartedAt)
				trunc(&st.Terminated.FinishedAt)
			}
		}
	}
	s.ObservedGeneration = 0
	return s
}

// remove deletes a terminated Pod for good, as a kubelet does once its containers are gone.
func (r *Runner) remove(ctx context.Context, pod *corev1.Pod) error {
	zero := int64(0)
	err := r.cfg.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

func (r *Runner) drop(key string, st *podState) {
	r.mu.Lock()
	if r.state[key] == st {
		delete(r.state, key)
	}
	r.mu.Unlock()
}

// Logs returns what a container of a Pod has written so far (its stdout and stderr), as
// pods/log does through the apiserver.
func (r *Runner) Logs(namespace, pod, container string) (string, error) {
	r.mu.Lock()
	st := r.state[namespace+"/"+pod]
	r.mu.Unlock()
	if st == nil {
		return "", fmt.Errorf("podrunner: pod %s/%s does not run here", namespace, pod)
	}
	b, err := os.ReadFile(st.logPath(container))
	if err != nil {
		return "", fmt.Errorf("podrunner: logs of %s/%s container %s: %w", namespace, pod, container, err)
	}
	return string(b), nil
}
