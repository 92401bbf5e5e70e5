package podrunner_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/sluice-io/sluice/internal/backend"
	"github.com/sluice-io/sluice/internal/harness/podrunner"
	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/internal/pki"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

// box is a test's cluster in a box and namespace.
type box struct {
	t  *testing.T
	c  *testenv.Cluster
	w  *testenv.Workloads
	ns string
}

func newBox(t *testing.T) *box {
	t.Helper()
	c := testenv.SharedCluster(t)
	w := c.Workloads(t)
	b := &box{t: t, c: c, w: w, ns: c.Namespace(t)}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-controller-manager log:\n%s", w.ControllerManagerLogs(30))
		}
	})
	return b
}

func (b *box) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	b.t.Cleanup(cancel)
	return ctx
}

// pods returns the namespace's Pods of app, sorted by name.
func (b *box) pods(app string) []corev1.Pod {
	b.t.Helper()
	list, err := b.c.Client.CoreV1().Pods(b.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		b.t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// answer asks a Pod's IP directly, from this host as a proxy would.
func answer(ip string) (backend.Answer, error) {
	var a backend.Answer
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + ip + ":8080/")
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	return a, json.NewDecoder(resp.Body).Decode(&a)
}

func ready(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// servingPods waits until the Deployment has exactly n Pods, all Ready and none terminating,
// whose IPs are exactly the ready endpoints the EndpointSlice controller wrote, each IP
// answered by its own Pod.
func (b *box) servingPods(app string, n int) []corev1.Pod {
	b.t.Helper()
	if err := b.c.WaitDeploymentReady(b.ctx(), b.ns, app, app); err != nil {
		b.t.Fatal(err)
	}
	var pods []corev1.Pod
	testenv.Eventually(b.t, time.Minute, fmt.Sprintf("%d ready pods of %s as the endpoints", n, app), func() (bool, error) {
		pods = b.pods(app)
		var ips []string
		for _, p := range pods {
			if p.DeletionTimestamp != nil || !ready(p) || p.Status.PodIP == "" {
				return false, fmt.Errorf("pod %s: deleting %v, ready %v, ip %q", p.Name, p.DeletionTimestamp != nil, ready(p), p.Status.PodIP)
			}
			if p.Spec.NodeName != testenv.NodeName || p.Status.HostIP != b.w.Network.HostIP || len(p.Status.PodIPs) != 1 {
				return false, fmt.Errorf("pod %s: node %q hostIP %q podIPs %v", p.Name, p.Spec.NodeName, p.Status.HostIP, p.Status.PodIPs)
			}
			ips = append(ips, p.Status.PodIP)
		}
		if len(pods) != n {
			return false, fmt.Errorf("%d pods, want %d", len(pods), n)
		}
		eps, err := b.endpoints(app)
		if err != nil {
			return false, err
		}
		var readyIPs []string
		for ip, e := range eps {
			if ptr.Deref(e.Conditions.Ready, false) {
				readyIPs = append(readyIPs, ip)
			}
		}
		slices.Sort(ips)
		slices.Sort(readyIPs)
		if !slices.Equal(ips, readyIPs) {
			return false, fmt.Errorf("pod IPs %v, ready endpoints %v", ips, readyIPs)
		}
		for _, p := range pods {
			a, err := answer(p.Status.PodIP)
			if err != nil || a.Pod != p.Name || a.Backend != app {
				return false, fmt.Errorf("pod %s at %s answered %+v, %v", p.Name, p.Status.PodIP, a, err)
			}
		}
		return true, nil
	})
	return pods
}

// endpoints are the Service's endpoints by address, over every slice the EndpointSlice
// controller manages for it (and only those: nothing here writes slices by hand).
func (b *box) endpoints(svc string) (map[string]discoveryv1.Endpoint, error) {
	list, err := b.c.Client.DiscoveryV1().EndpointSlices(b.ns).List(context.Background(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		return nil, err
	}
	out := map[string]discoveryv1.Endpoint{}
	for _, s := range list.Items {
		if s.Labels[discoveryv1.LabelManagedBy] != "endpointslice-controller.k8s.io" {
			return nil, fmt.Errorf("slice %s is managed by %q", s.Name, s.Labels[discoveryv1.LabelManagedBy])
		}
		for _, e := range s.Endpoints {
			for _, a := range e.Addresses {
				out[a] = e
			}
		}
	}
	return out, nil
}

func (b *box) deploy(d *appsv1.Deployment) {
	b.t.Helper()
	ctx := context.Background()
	if _, err := b.c.Client.AppsV1().Deployments(b.ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		b.t.Fatal(err)
	}
	if _, err := b.c.Client.CoreV1().Services(b.ns).Create(ctx, testenv.BackendService(d.Name), metav1.CreateOptions{}); err != nil {
		b.t.Fatal(err)
	}
}

func (b *box) scale(app string, n int32) {
	b.t.Helper()
	ctx := context.Background()
	s, err := b.c.Client.AppsV1().Deployments(b.ns).GetScale(ctx, app, metav1.GetOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	s.Spec.Replicas = n
	if _, err := b.c.Client.AppsV1().Deployments(b.ns).UpdateScale(ctx, app, s, metav1.UpdateOptions{}); err != nil {
		b.t.Fatal(err)
	}
}

// gone waits until nothing answers on the IPs any more: the runner stopped the processes
// of the Pods that went.
func gone(t *testing.T, ips []string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, "the removed pods' processes to stop", func() (bool, error) {
		for _, ip := range ips {
			// A removed Pod's address has no neighbour left: a short dial says so without
			// waiting out the kernel's ARP attempts.
			if conn, err := net.DialTimeout("tcp", ip+":8080", 300*time.Millisecond); err == nil {
				conn.Close()
				return false, fmt.Errorf("%s still accepts connections", ip)
			}
		}
		return true, nil
	})
}

// A Deployment of 3 replicas becomes 3 Ready Pods, each with its own IP, and the real
// EndpointSlice controller lists exactly those IPs as ready; scaling to 5 and to 1 follows,
// and the Pods scaled away stop answering.
func TestDeploymentBecomesReadyEndpointsAndScales(t *testing.T) {
	b := newBox(t)
	b.deploy(testenv.BackendDeployment("web", 3, 0))
	three := b.servingPods("web", 3)
	b.scale("web", 5)
	five := b.servingPods("web", 5)
	for _, p := range three {
		if !slices.ContainsFunc(five, func(q corev1.Pod) bool { return q.Name == p.Name }) {
			t.Errorf("scaling up replaced pod %s", p.Name)
		}
	}
	b.scale("web", 1)
	one := b.servingPods("web", 1)
	var removed []string
	for _, p := range five {
		if p.Name != one[0].Name {
			removed = append(removed, p.Status.PodIP)
		}
	}
	gone(t, removed)
}

// A rolling update replaces every Pod with one of the new template, and the old ones stop.
func TestRollingUpdateReplacesPods(t *testing.T) {
	b := newBox(t)
	b.deploy(testenv.BackendDeployment("roll", 2, 0))
	before := b.servingPods("roll", 2)
	ctx := context.Background()
	d, err := b.c.Client.AppsV1().Deployments(b.ns).Get(ctx, "roll", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Annotations = map[string]string{"sluice.test/revision": "2"}
	if _, err := b.c.Client.AppsV1().Deployments(b.ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	after := b.servingPods("roll", 2)
	var old []string
	for _, p := range after {
		if p.Annotations["sluice.test/revision"] != "2" {
			t.Errorf("pod %s is of the old template", p.Name)
		}
		for _, q := range before {
			if q.Name == p.Name {
				t.Errorf("pod %s survived the rolling update", p.Name)
			}
		}
	}
	for _, q := range before {
		old = append(old, q.Status.PodIP)
	}
	gone(t, old)
}

// A Pod whose readiness probe fails runs but is not Ready, and its endpoint is listed not
// ready (nor serving); the Deployment's good Pod stays the only ready endpoint.
func TestFailingReadinessProbeIsNotReady(t *testing.T) {
	b := newBox(t)
	d := testenv.BackendDeployment("probe", 1, 0)
	d.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Path = "/status/503"
	b.deploy(d)
	testenv.Eventually(t, time.Minute, "the pod to run, not ready, with a not-ready endpoint", func() (bool, error) {
		pods := b.pods("probe")
		if len(pods) != 1 {
			return false, fmt.Errorf("%d pods", len(pods))
		}
		p := pods[0]
		if p.Status.Phase != corev1.PodRunning || ready(p) || p.Status.PodIP == "" {
			return false, fmt.Errorf("pod %s: phase %s ready %v ip %q", p.Name, p.Status.Phase, ready(p), p.Status.PodIP)
		}
		if _, err := answer(p.Status.PodIP); err != nil {
			return false, fmt.Errorf("the pod's process does not answer: %v", err)
		}
		eps, err := b.endpoints("probe")
		if err != nil {
			return false, err
		}
		e, ok := eps[p.Status.PodIP]
		if !ok {
			return false, fmt.Errorf("no endpoint for %s yet: %v", p.Status.PodIP, eps)
		}
		if ptr.Deref(e.Conditions.Ready, true) || ptr.Deref(e.Conditions.Serving, true) {
			return false, fmt.Errorf("endpoint %s: ready %v serving %v", p.Status.PodIP, ptr.Deref(e.Conditions.Ready, true), ptr.Deref(e.Conditions.Serving, true))
		}
		return true, nil
	})
	// Passing the probe again makes it ready: the probe, not a timer, decides.
	ctx := context.Background()
	dep, err := b.c.Client.AppsV1().Deployments(b.ns).Get(ctx, "probe", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dep.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Path = "/ready"
	if _, err := b.c.Client.AppsV1().Deployments(b.ns).Update(ctx, dep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.servingPods("probe", 1)
}

// pod creates a bare Pod and returns it as the runner leaves it once cond holds.
func (b *box) pod(p *corev1.Pod, what string, cond func(*corev1.Pod) error) *corev1.Pod {
	b.t.Helper()
	ctx := context.Background()
	if _, err := b.c.Client.CoreV1().Pods(b.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		b.t.Fatal(err)
	}
	var got *corev1.Pod
	testenv.Eventually(b.t, time.Minute, what, func() (bool, error) {
		var err error
		if got, err = b.c.Client.CoreV1().Pods(b.ns).Get(ctx, p.Name, metav1.GetOptions{}); err != nil {
			return false, err
		}
		if err := cond(got); err != nil {
			return false, err
		}
		return true, nil
	})
	return got
}

// An image the runner cannot map is a clear waiting reason on the Pod, never a hang.
func TestUnknownImageIsErrImagePull(t *testing.T) {
	b := newBox(t)
	b.pod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nginx"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.27"}}}},
		"ErrImagePull on the pod", func(p *corev1.Pod) error {
			if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Waiting == nil {
				return fmt.Errorf("status %+v", p.Status)
			}
			w := p.Status.ContainerStatuses[0].State.Waiting
			if w.Reason != podrunner.ReasonErrImagePull || w.Message == "" || p.Status.Phase != corev1.PodPending {
				return fmt.Errorf("phase %s waiting %+v", p.Status.Phase, w)
			}
			t.Logf("waiting: %s: %s", w.Reason, w.Message)
			return nil
		})
}

// The conformance suite's echo server runs with its downward-API environment and its
// certificate from a Secret volume, as its manifests have it: the Pod's name and namespace in
// its answers, and the Secret's certificate on its TLS port.
func TestEchoBasicGetsEnvAndSecretVolume(t *testing.T) {
	b := newBox(t)
	ctx := context.Background()
	ca, err := pki.NewCA("echo-test")
	if err != nil {
		t.Fatal(err)
	}
	crt, key, err := ca.Issue(pki.CertOptions{CommonName: "echo.example.com", DNSNames: []string{"echo.example.com"}, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.c.Client.CoreV1().Secrets(b.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "echo-cert"},
		Data: map[string][]byte{"crt": crt, "key": key}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.c.Client.CoreV1().ConfigMaps(b.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "echo-conf"},
		Data: map[string]string{"service": "echo-svc"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fieldEnv := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	p := b.pod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "echo"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "echo", Image: testenv.EchoBasicImage + ":v1.5.1",
			Env: []corev1.EnvVar{
				fieldEnv("POD_NAME", "metadata.name"), fieldEnv("NAMESPACE", "metadata.namespace"),
				{Name: "SERVICE_NAME", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "echo-conf"}, Key: "service"}}},
				{Name: "TLS_SERVER_CERT", Value: "/etc/secret-volume/crt"}, {Name: "TLS_SERVER_PRIVKEY", Value: "/etc/secret-volume/key"},
			},
			VolumeMounts:   []corev1.VolumeMount{{Name: "secret-volume", MountPath: "/etc/secret-volume"}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(3000)}}, PeriodSeconds: 1},
		}},
		Volumes: []corev1.Volume{{Name: "secret-volume", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "echo-cert"}}}},
	}}, "echo-basic ready", func(p *corev1.Pod) error {
		if !ready(*p) {
			return fmt.Errorf("not ready: %+v", p.Status.ContainerStatuses)
		}
		return nil
	})
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + p.Status.PodIP + ":3000/hello")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var echo struct{ Path, Namespace, Pod, Service string }
	if err := json.Unmarshal(body, &echo); err != nil {
		t.Fatalf("echo answered %s: %v", body, err)
	}
	if echo.Pod != "echo" || echo.Namespace != b.ns || echo.Service != "echo-svc" || echo.Path != "/hello" {
		t.Errorf("echo answered %+v, want pod echo, namespace %s, service echo-svc, path /hello", echo, b.ns)
	}
	conn, err := tls.Dial("tcp", p.Status.PodIP+":8443", &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the certificate is checked below
	if err != nil {
		t.Fatalf("echo-basic's TLS port: %v", err)
	}
	defer conn.Close()
	if cn := conn.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "echo.example.com" {
		t.Errorf("TLS port serves %q, want the Secret's echo.example.com", cn)
	}
	logs, err := b.w.Runner.Logs(b.ns, "echo", "echo")
	if err != nil || logs == "" {
		t.Errorf("container output: %q, %v", logs, err)
	}
}

// A container that exits is started again (restartPolicy Always), its restart counted and its
// last exit kept; Ready follows.
func TestExitedContainerRestarts(t *testing.T) {
	b := newBox(t)
	p := b.pod(backendPod("crash", []corev1.EnvVar{{Name: "ALLOW_EXIT", Value: "1"}}), "the pod ready", func(p *corev1.Pod) error {
		if !ready(*p) {
			return fmt.Errorf("not ready")
		}
		return nil
	})
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + p.Status.PodIP + ":8080/exit/3")
	if err == nil {
		resp.Body.Close()
	}
	b.pod2("crash", "a restart with the exit recorded, ready again", func(p *corev1.Pod) error {
		cs := p.Status.ContainerStatuses[0]
		last := cs.LastTerminationState.Terminated
		if cs.RestartCount != 1 || last == nil || last.ExitCode != 3 || !ready(*p) {
			return fmt.Errorf("restarts %d last %+v ready %v", cs.RestartCount, last, ready(*p))
		}
		return nil
	})
}

// A deleted Pod is stopped with SIGTERM, with SIGKILL once its grace period is over when it
// ignores SIGTERM, and then removed; its address stops answering.
func TestDeletionKillsAfterTheGracePeriod(t *testing.T) {
	b := newBox(t)
	p := b.pod(backendPod("stubborn", []corev1.EnvVar{{Name: "IGNORE_SIGTERM", Value: "1"}}), "the pod ready", func(p *corev1.Pod) error {
		if !ready(*p) {
			return fmt.Errorf("not ready")
		}
		return nil
	})
	ctx := context.Background()
	start := time.Now()
	if err := b.c.Client.CoreV1().Pods(b.ns).Delete(ctx, "stubborn", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(2))}); err != nil {
		t.Fatal(err)
	}
	// It ignores SIGTERM: it still answers within the grace period.
	if a, err := answer(p.Status.PodIP); err != nil {
		t.Fatalf("the pod stopped answering before its grace period: %v", err)
	} else if a.Pod != "stubborn" {
		t.Fatalf("answered as %q", a.Pod)
	}
	testenv.Eventually(t, time.Minute, "the pod removed", func() (bool, error) {
		_, err := b.c.Client.CoreV1().Pods(b.ns).Get(ctx, "stubborn", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("still there: %v", err)
	})
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("removed after %s, before the 2s grace period", took)
	}
	gone(t, []string{p.Status.PodIP})
}

func backendPod(name string, env []corev1.EnvVar) *corev1.Pod {
	d := testenv.BackendDeployment(name, 1, 0)
	spec := d.Spec.Template.Spec
	spec.Containers[0].Env = append(spec.Containers[0].Env, env...)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}}, Spec: spec}
}

// pod2 waits for cond on an existing Pod.
func (b *box) pod2(name, what string, cond func(*corev1.Pod) error) {
	b.t.Helper()
	testenv.Eventually(b.t, time.Minute, what, func() (bool, error) {
		p, err := b.c.Client.CoreV1().Pods(b.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if len(p.Status.ContainerStatuses) == 0 {
			return false, fmt.Errorf("no container status")
		}
		if err := cond(p); err != nil {
			return false, err
		}
		return true, nil
	})
}

// A Pod whose Secret does not exist yet waits with CreateContainerConfigError and starts once
// the Secret is created, as a kubelet retries mounting it (the conformance suite creates its
// Deployments before their certificates' Secrets).
func TestMissingSecretIsRetriedUntilItExists(t *testing.T) {
	b := newBox(t)
	p := backendPod("late-secret", nil)
	p.Spec.Volumes = []corev1.Volume{{Name: "cert", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "late"}}}}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cert", MountPath: "/etc/cert"}}
	b.pod(p, "CreateContainerConfigError naming the Secret", func(p *corev1.Pod) error {
		if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Waiting == nil {
			return fmt.Errorf("status %+v", p.Status)
		}
		if w := p.Status.ContainerStatuses[0].State.Waiting; w.Reason != podrunner.ReasonConfigError || !strings.Contains(w.Message, `"late"`) {
			return fmt.Errorf("waiting %+v", w)
		}
		return nil
	})
	if _, err := b.c.Client.CoreV1().Secrets(b.ns).Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "late"},
		Data: map[string][]byte{"k": []byte("v")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.pod2("late-secret", "the pod ready once its Secret exists", func(p *corev1.Pod) error {
		if !ready(*p) {
			return fmt.Errorf("not ready: %+v", p.Status.ContainerStatuses)
		}
		return nil
	})
}

// A container whose liveness probe fails is killed and started again by its restartPolicy,
// as a kubelet does; its restarts are counted.
func TestFailingLivenessProbeRestartsTheContainer(t *testing.T) {
	b := newBox(t)
	p := backendPod("unhealthy", nil)
	p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/status/500", Port: intstr.FromString("http")}},
		InitialDelaySeconds: 1, PeriodSeconds: 1, FailureThreshold: 2}
	b.pod(p, "the container restarted by its liveness probe", func(p *corev1.Pod) error {
		if len(p.Status.ContainerStatuses) != 1 {
			return fmt.Errorf("status %+v", p.Status)
		}
		cs := p.Status.ContainerStatuses[0]
		if cs.RestartCount < 1 || cs.LastTerminationState.Terminated == nil {
			return fmt.Errorf("restarts %d, last %+v", cs.RestartCount, cs.LastTerminationState.Terminated)
		}
		return nil
	})
}

// pods/log reaches the runner as it reaches a kubelet: the apiserver dials the Node's address
// and kubelet port and gets the container's output, its last lines with tailLines.
func TestPodLogsThroughTheAPIServer(t *testing.T) {
	b := newBox(t)
	b.pod(backendPod("talker", nil), "the pod ready", func(p *corev1.Pod) error {
		if !ready(*p) {
			return fmt.Errorf("not ready")
		}
		return nil
	})
	ctx := context.Background()
	all, err := b.c.Client.CoreV1().Pods(b.ns).GetLogs("talker", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("pods/log: %v", err)
	}
	if !strings.Contains(string(all), `backend: talker (pod "talker") listening on :8080`) {
		t.Fatalf("pods/log answered %q, want the backend's start line", all)
	}
	one, err := b.c.Client.CoreV1().Pods(b.ns).GetLogs("talker", &corev1.PodLogOptions{Container: "backend", TailLines: ptr.To(int64(1))}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(one), "\n"); n != 1 {
		t.Fatalf("tailLines 1 answered %d lines: %q", n, one)
	}
	if _, err := b.c.Client.CoreV1().Pods(b.ns).GetLogs("talker", &corev1.PodLogOptions{Container: "nope"}).DoRaw(ctx); err == nil {
		t.Fatal("pods/log of a container the Pod does not have answered")
	}
}
