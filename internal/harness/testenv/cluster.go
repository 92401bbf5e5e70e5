package testenv

import (
	"github.com/sluice-io/sluice/internal/kubeconfig"
	"github.com/sluice-io/sluice/internal/pki"

	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// Cluster is an etcd and a kube-apiserver on loopback, with RBAC authorization on. Tests that
// run workloads start the rest of the cluster in a box with StartWorkloads (kube-controller-
// manager and the pod runner); without it nothing reclaims namespaces or writes EndpointSlices,
// and tests that need exact control of endpoints create EndpointSlices themselves.
type Cluster struct {
	Dir string
	// Host is the apiserver's URL (https://127.0.0.1:PORT).
	Host string
	CA   *pki.CA
	// Client is an admin clientset.
	Client kubernetes.Interface
	// AdminKubeconfig is a kubeconfig file with admin rights, for processes.
	AdminKubeconfig string

	etcd      *Process
	apiserver *Process
	admin     *rest.Config

	workloadsMu sync.Mutex
	workloads   *Workloads // the cluster in a box's controller-manager and pod runner, once started
}

// ControlPlaneCPU is the CPU time etcd and kube-apiserver have used so far.
func (c *Cluster) ControlPlaneCPU() time.Duration { return c.etcd.CPU() + c.apiserver.CPU() }

// StartCluster starts etcd and kube-apiserver in a fresh temp dir and waits until the
// apiserver is ready.
func StartCluster(ctx context.Context) (*Cluster, error) {
	etcdBin, err := ToolPath("etcd")
	if err != nil {
		return nil, err
	}
	apiBin, err := ToolPath("kube-apiserver")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sluice-cluster-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir}
	ok := false
	defer func() {
		if !ok {
			c.Stop()
		}
	}()

	clientPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	peerPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	c.etcd, err = StartProcess(ProcessConfig{Name: "etcd", Path: etcdBin, Dir: dir, Args: []string{
		"--name=sluice-test", "--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=sluice-test=" + peerURL,
		// Tests need no durability across machine crashes; fsync dominates etcd's latency.
		"--unsafe-no-fsync", "--log-level=warn",
	}})
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, c.etcd, etcdURL+"/health", nil); err != nil {
		return nil, fmt.Errorf("testenv: etcd did not become healthy: %w\n%s", err, c.etcd.LogTail(20))
	}

	if c.CA, err = pki.NewCA("sluice-test-ca"); err != nil {
		return nil, err
	}
	files := map[string][]byte{"ca.crt": c.CA.CertPEM}
	if files["apiserver.crt"], files["apiserver.key"], err = c.CA.Issue(pki.CertOptions{
		CommonName: "kube-apiserver", Server: true,
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kind-control-plane"},
		IPs:      []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
	}); err != nil {
		return nil, err
	}
	if files["sa.key"], err = pki.ServiceAccountKeyPEM(); err != nil {
		return nil, err
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return nil, err
		}
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	c.Host = fmt.Sprintf("https://127.0.0.1:%d", port)
	c.apiserver, err = StartProcess(ProcessConfig{Name: "kube-apiserver", Path: apiBin, Dir: dir, Args: []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port), "--advertise-address=127.0.0.1",
		"--cert-dir=" + filepath.Join(dir, "apiserver-certs"),
		"--tls-cert-file=" + filepath.Join(dir, "apiserver.crt"), "--tls-private-key-file=" + filepath.Join(dir, "apiserver.key"),
		"--client-ca-file=" + filepath.Join(dir, "ca.crt"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + filepath.Join(dir, "sa.key"),
		"--service-account-signing-key-file=" + filepath.Join(dir, "sa.key"),
		// Room for the many Services of the conformance suite and the e2e tests' worlds.
		"--service-cluster-ip-range=10.0.0.0/16",
		"--authorization-mode=RBAC",
		// Nothing reconciles the kubernetes Service's endpoints to a loopback address.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
		"--v=1",
	}})
	if err != nil {
		return nil, err
	}
	adminCert, adminKey, err := c.CA.Issue(pki.CertOptions{CommonName: "sluice-test-admin", Organization: []string{"system:masters"}, Client: true})
	if err != nil {
		return nil, err
	}
	c.admin = &rest.Config{
		Host:            c.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.CA.CertPEM, CertData: adminCert, KeyData: adminKey},
		QPS:             500, Burst: 1000,
	}
	if c.Client, err = kubernetes.NewForConfig(c.admin); err != nil {
		return nil, err
	}
	if err := c.waitReady(ctx); err != nil {
		return nil, err
	}
	if c.AdminKubeconfig, err = c.WriteKubeconfig(c.admin, "admin"); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if c.apiserver.Exited() {
			return false, errors.New("kube-apiserver exited")
		}
		_, last = c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("testenv: kube-apiserver did not become ready: %v (last: %v)\n%s", err, last, c.apiserver.LogTail(30))
	}
	return nil
}

// AdminConfig returns a copy of the admin rest.Config.
func (c *Cluster) AdminConfig() *rest.Config { return rest.CopyConfig(c.admin) }

// Dynamic returns an admin dynamic client.
func (c *Cluster) Dynamic() dynamic.Interface { return dynamic.NewForConfigOrDie(c.admin) }

// StopAPIServer stops the apiserver (etcd and its data stay).
func (c *Cluster) StopAPIServer() { c.apiserver.Stop(10 * time.Second) }

// StartAPIServer starts the stopped apiserver again on the same address and waits until ready.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	p, err := c.apiserver.Restart()
	if err != nil {
		return err
	}
	c.apiserver = p
	return c.waitReady(ctx)
}

// RestartAPIServer stops and starts the apiserver; the data in etcd is kept.
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	c.StopAPIServer()
	return c.StartAPIServer(ctx)
}

// APIServerLogs returns the apiserver's recent output, for failure messages.
func (c *Cluster) APIServerLogs(n int) string { return c.apiserver.LogTail(n) }

// Stop stops the apiserver and etcd and removes the data.
func (c *Cluster) Stop() {
	c.workloadsMu.Lock()
	if c.workloads != nil {
		c.workloads.stop()
		c.workloads = nil
	}
	c.workloadsMu.Unlock()
	if c.apiserver != nil {
		c.apiserver.Stop(5 * time.Second)
	}
	if c.etcd != nil {
		c.etcd.Stop(5 * time.Second)
	}
	if c.Dir != "" && os.Getenv("SLUICE_KEEP_TEST_DIRS") == "" {
		os.RemoveAll(c.Dir)
	}
}

// UserConfig returns a rest.Config that authenticates as user name in groups with a client
// certificate. The user has no rights until Grant gives some.
func (c *Cluster) UserConfig(name string, groups ...string) (*rest.Config, error) {
	cert, key, err := c.CA.Issue(pki.CertOptions{CommonName: name, Organization: groups, Client: true})
	if err != nil {
		return nil, err
	}
	return &rest.Config{Host: c.Host, TLSClientConfig: rest.TLSClientConfig{CAData: c.CA.CertPEM, CertData: cert, KeyData: key}}, nil
}

// ServiceAccountConfig creates the ServiceAccount if needed and returns a rest.Config that
// authenticates with a token minted for it (TokenRequest, valid for an hour).
func (c *Cluster) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	_, err := c.Client.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create service account %s/%s: %w", namespace, name, err)
	}
	exp := int64(3600)
	tr, err := c.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for service account %s/%s: %w", namespace, name, err)
	}
	return &rest.Config{Host: c.Host, BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: c.CA.CertPEM}}, nil
}

// Grant binds subject to a ClusterRole with exactly rules (replacing what an earlier Grant of
// the same subject gave).
func (c *Cluster) Grant(ctx context.Context, subject rbacv1.Subject, rules []rbacv1.PolicyRule) error {
	name := "sluice-test:" + strings.ToLower(subject.Kind) + ":" + subject.Namespace + ":" + subject.Name
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	rbac := c.Client.RbacV1()
	if _, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		old, err := rbac.ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		old.Rules = rules
		if _, err := rbac.ClusterRoles().Update(ctx, old, metav1.UpdateOptions{}); err != nil {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("create cluster role %s: %w", name, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{subject},
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create cluster role binding %s: %w", name, err)
	}
	return nil
}

// WriteKubeconfig writes a kubeconfig file for cfg into the cluster's dir and returns its path.
func (c *Cluster) WriteKubeconfig(cfg *rest.Config, name string) (string, error) {
	path := filepath.Join(c.Dir, "kubeconfig-"+name)
	return path, kubeconfig.Write(cfg, path)
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRD creates a CustomResourceDefinition from its YAML and waits until the apiserver
// serves every version of it.
func (c *Cluster) InstallCRD(ctx context.Context, crdYAML []byte) error {
	var obj map[string]any
	if err := yaml.Unmarshal(crdYAML, &obj); err != nil {
		return fmt.Errorf("parse CRD: %w", err)
	}
	u := &unstructured.Unstructured{Object: obj}
	if _, err := c.Dynamic().Resource(crdGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CRD %s: %w", u.GetName(), err)
	}
	group, _, _ := unstructured.NestedString(obj, "spec", "group")
	plural, _, _ := unstructured.NestedString(obj, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(obj, "spec", "versions")
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, v := range versions {
		name, _, _ := unstructured.NestedString(v.(map[string]any), "name")
		if served, _, _ := unstructured.NestedBool(v.(map[string]any), "served"); !served {
			continue // kept for storage only (BackendTLSPolicy's v1alpha3): discovery never lists it
		}
		gv := group + "/" + name
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
			list, err := c.Client.Discovery().ServerResourcesForGroupVersion(gv)
			if err != nil {
				return false, nil
			}
			for _, r := range list.APIResources {
				if r.Name == plural {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not served as %s: %w", u.GetName(), gv, err)
		}
	}
	return nil
}

// waitHTTP polls url until it answers 200, p exits, or ctx ends (bounded at a minute).
func waitHTTP(ctx context.Context, p *Process, url string, client *http.Client) error {
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Second}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if p != nil && p.Exited() {
			return false, fmt.Errorf("%s exited with code %d", p.Name(), p.ExitCode())
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}
