package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/sluice-io/sluice/internal/harness/podrunner"
)

// Images the cluster in a box runs: the project's test backend, and the Gateway API
// conformance suite's echo server (every tag of it).
const (
	BackendImage    = "sluice.test/backend:latest"
	EchoBasicImage  = "registry.k8s.io/gateway-api/echo-basic"
	echoBasicImage2 = "gcr.io/k8s-staging-gateway-api/echo-basic"
)

// NodeName is the Node the pod runner creates and runs every Pod on.
const NodeName = "sluice-box"

// Workloads is what turns the test cluster into a cluster in a box: kube-controller-manager
// with the controllers workloads need, a Ready Node, and the pod runner, the kubelet's
// stand-in that runs Pods as processes in network namespaces.
type Workloads struct {
	Runner  *podrunner.Runner
	Network *podrunner.Network

	kcm    *Process
	cancel context.CancelFunc
	done   chan struct{}
}

// controllers are what a Deployment needs to become Pods and EndpointSlices, and a namespace
// to be usable (its default ServiceAccount, its root CA ConfigMap) and removable. What needs
// a kubelet's heartbeats (node lifecycle, pod GC, taint eviction) is left out.
var controllers = []string{
	"deployment-controller", "replicaset-controller", "endpointslice-controller", "endpoints-controller",
	"serviceaccount-controller", "namespace-controller", "garbage-collector-controller",
	"root-ca-certificate-publisher-controller",
}

// StartWorkloads starts kube-controller-manager and the pod runner against the cluster, once;
// later calls return the same Workloads.
func (c *Cluster) StartWorkloads(ctx context.Context) (*Workloads, error) {
	c.workloadsMu.Lock()
	defer c.workloadsMu.Unlock()
	if c.workloads != nil {
		return c.workloads, nil
	}
	kcmBin, err := ToolPath("kube-controller-manager")
	if err != nil {
		return nil, err
	}
	backendBin, err := Binary("backend")
	if err != nil {
		return nil, err
	}
	echoBin, err := ToolPath("echo-basic")
	if err != nil {
		return nil, err
	}
	w := &Workloads{done: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			w.stop()
		}
	}()
	w.kcm, err = StartProcess(ProcessConfig{Name: "kube-controller-manager", Path: kcmBin, Dir: c.Dir, Args: []string{
		"--kubeconfig=" + c.AdminKubeconfig,
		"--controllers=" + strings.Join(controllers, ","),
		"--root-ca-file=" + filepath.Join(c.Dir, "ca.crt"),
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		// No metrics or health endpoint: readiness is the default ServiceAccount appearing.
		"--secure-port=0",
		// Endpoints follow Pods at once rather than in batches.
		"--endpointslice-updates-batch-period=0s",
		"--v=1",
	}})
	if err != nil {
		return nil, err
	}
	if err := c.waitServiceAccount(ctx, w.kcm, metav1.NamespaceDefault); err != nil {
		return nil, err
	}
	if w.Network, err = podrunner.NewNetwork(); err != nil {
		return nil, err
	}
	dir := filepath.Join(c.Dir, "pods")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(filepath.Join(c.Dir, "podrunner.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	w.Runner, err = podrunner.New(podrunner.Config{
		Client: c.Client, Node: NodeName, Network: w.Network, Dir: dir,
		Log: hclog.New(&hclog.LoggerOptions{Output: logf, Level: hclog.Info}),
		Images: []podrunner.Image{
			{Repository: strings.Split(BackendImage, ":")[0], Binary: backendBin},
			{Repository: EchoBasicImage, Binary: echoBin},
			{Repository: echoBasicImage2, Binary: echoBin},
		},
	})
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	errc := make(chan error, 1)
	go func() {
		defer close(w.done)
		defer logf.Close()
		errc <- w.Runner.Run(rctx)
	}()
	// The Node exists once the runner has started; a failure to create it ends Run.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-errc:
			return false, fmt.Errorf("testenv: the pod runner stopped: %v", err)
		default:
		}
		_, err := c.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("testenv: node %s: %w", NodeName, err)
	}
	c.workloads, ok = w, true
	return w, nil
}

// Workloads starts the cluster in a box's workload parts once, failing the test on an error.
func (c *Cluster) Workloads(t testing.TB) *Workloads {
	t.Helper()
	c.workloadsMu.Lock()
	started := c.workloads != nil
	c.workloadsMu.Unlock()
	start := time.Now()
	w, err := c.StartWorkloads(context.Background())
	if err == nil && !started {
		t.Logf("testenv: controller-manager and pod runner ready in %s", time.Since(start).Round(time.Millisecond))
	}
	if err != nil {
		t.Fatalf("testenv: cannot start the cluster's workloads: %v", err)
	}
	return w
}

func (w *Workloads) stop() {
	if w.cancel != nil {
		w.cancel()
		<-w.done
	}
	if w.kcm != nil {
		w.kcm.Stop(5 * time.Second)
	}
	if w.Network != nil {
		w.Network.Close()
	}
}

// ControllerManagerLogs returns kube-controller-manager's recent output, for failures.
func (w *Workloads) ControllerManagerLogs(n int) string { return w.kcm.LogTail(n) }

// waitServiceAccount waits for the namespace's default ServiceAccount, which the
// ServiceAccount admission plugin needs before it admits a Pod there.
func (c *Cluster) waitServiceAccount(ctx context.Context, kcm *Process, ns string) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if kcm != nil && kcm.Exited() {
			return false, errors.New("kube-controller-manager exited")
		}
		_, last = c.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return last == nil, nil
	})
	if err != nil {
		tail := ""
		if kcm != nil {
			tail = "\n" + kcm.LogTail(30)
		}
		return fmt.Errorf("testenv: no default ServiceAccount in %s: %v (last: %v)%s", ns, err, last, tail)
	}
	return nil
}

// BackendDeployment is a Deployment of the test backend: replicas Pods, labelled app=name,
// answering as name on port 8080 (named http), with a readiness probe every second and a
// preStop pause of drain seconds so that a proxy stops sending before the process stops
// accepting (0: none).
func BackendDeployment(name string, replicas int32, drain int64) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	c := corev1.Container{
		Name: "backend", Image: BackendImage,
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		Env: []corev1.EnvVar{
			{Name: "BACKEND_NAME", Value: name},
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}},
			PeriodSeconds: 1, FailureThreshold: 1},
	}
	if drain > 0 {
		c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: drain}}}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{c}, TerminationGracePeriodSeconds: ptr.To(drain + 10)},
			},
		},
	}
}

// BackendService is a Service selecting the Pods of BackendDeployment(name), port 80 (named
// http) to their port http.
func BackendService(name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": name},
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
	}}
}

// WaitDeploymentReady waits until every replica of the Deployment's current revision is
// updated and available, and the Service's EndpointSlices list that many ready endpoints.
func (c *Cluster) WaitDeploymentReady(ctx context.Context, ns, name, service string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := c.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		s := d.Status
		if d.Generation != s.ObservedGeneration || s.UpdatedReplicas != want || s.AvailableReplicas != want || s.Replicas != want {
			last = fmt.Sprintf("deployment %s: generation %d observed %d, %d replicas, %d updated, %d available, want %d",
				name, d.Generation, s.ObservedGeneration, s.Replicas, s.UpdatedReplicas, s.AvailableReplicas, want)
			return false, nil
		}
		if service == "" {
			return true, nil
		}
		ready, err := c.ReadyEndpoints(ctx, ns, service)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if int32(len(ready)) != want {
			last = fmt.Sprintf("service %s: %d ready endpoints %v, want %d", service, len(ready), ready, want)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("testenv: deployment %s/%s not ready: %v (last: %s)", ns, name, err, last)
	}
	return nil
}

// ReadyEndpoints returns the addresses of the Service's ready endpoints, over all of its
// EndpointSlices.
func (c *Cluster) ReadyEndpoints(ctx context.Context, ns, service string) ([]string, error) {
	slices, err := c.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if ptr.Deref(e.Conditions.Ready, false) {
				out = append(out, e.Addresses...)
			}
		}
	}
	return out, nil
}
