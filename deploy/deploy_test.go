// Package deploy_test proves the manifests under deploy/ against the real test apiserver:
// every overlay is accepted, the watcher's RBAC (a ClusterRole, or Roles per watched
// namespace) is exactly enough, and the components talk mTLS with the certificates
// `make certs` writes.
package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/harness/testenv"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

func kubectl(t *testing.T, c *testenv.Cluster, stdin []byte, args ...string) []byte {
	t.Helper()
	bin, err := testenv.ToolPath("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.AdminKubeconfig)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// installCertManagerCRDs installs the cert-manager CRDs the overlays' and the chart's
// Certificates and Issuers need (testdata/: their schemas, for the dry-run).
func installCertManagerCRDs(t *testing.T, c *testenv.Cluster) {
	t.Helper()
	for _, f := range []string{"testdata/crd-issuers.yaml", "testdata/crd-certificates.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.InstallCRD(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
}

// createNamespaces creates every namespace an object of rendered is in (and extra): a
// dry-run does not create the namespace the other objects go into.
func createNamespaces(t *testing.T, c *testenv.Cluster, rendered []byte, extra ...string) {
	t.Helper()
	names := slices.Clone(extra)
	r := utilyaml.NewYAMLReader(bufioReader(rendered))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var meta metav1.PartialObjectMetadata
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		if meta.Namespace != "" {
			names = append(names, meta.Namespace)
		}
	}
	slices.Sort(names)
	for _, ns := range slices.Compact(names) {
		if _, err := c.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// Every manifest of every overlay is accepted by a server-side dry-run apply.
func TestEveryOverlayAcceptedByServerSideDryRun(t *testing.T) {
	c := testenv.SharedCluster(t)
	installCertManagerCRDs(t, c)
	dirs := []string{"base"}
	overlays, _ := filepath.Glob("overlays/*")
	dirs = append(dirs, overlays...)
	if !slices.Contains(dirs, "overlays/namespaced") {
		t.Fatalf("overlays/namespaced missing from %v", dirs)
	}
	for _, d := range dirs {
		t.Run(d, func(t *testing.T) {
			rendered := kubectl(t, c, nil, "kustomize", d)
			createNamespaces(t, c, rendered)
			out := kubectl(t, c, rendered, "apply", "--server-side", "--dry-run=server", "--field-manager=sluice-test", "-f", "-")
			n := strings.Count(string(rendered), "\nkind: ") // every document's top-level kind follows a newline
			if got := strings.Count(string(out), "serverside-applied (server dry run)"); got != n {
				t.Fatalf("%d of %d objects accepted:\n%s", got, n, out)
			}
		})
	}
}

// rbacShape is the watcher's RBAC as one of deploy/'s shapes grants it: cluster rules through
// a ClusterRole, lease rules through a Role in its own namespace (where its Lease is), and,
// for a watcher that watches only some namespaces (--namespaces), watched rules through a
// Role in each of them.
type rbacShape struct {
	cluster, lease []rbacv1.PolicyRule
	// watched is nil for a watcher of every namespace.
	watched []rbacv1.PolicyRule
	// unboundLast leaves the last watched namespace without its Role.
	unboundLast bool
}

// watcherRBAC is the watcher's RBAC in a rendered manifest (kubectl kustomize): the rules of
// the ClusterRole sluice-watcher, of the Lease Role sluice-watcher-leader-election and of the
// Roles sluice-watcher, which must be the same in every namespace that has one.
func watcherRBAC(t *testing.T, rendered []byte) rbacShape {
	t.Helper()
	var s rbacShape
	r := utilyaml.NewYAMLReader(bufioReader(rendered))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var meta metav1.PartialObjectMetadata
		if err := yaml.Unmarshal(doc, &meta); err != nil || (meta.Kind != "ClusterRole" && meta.Kind != "Role") {
			continue
		}
		var role rbacv1.Role // a ClusterRole's rules read the same
		if err := yaml.Unmarshal(doc, &role); err != nil {
			t.Fatalf("%s %s: %v", meta.Kind, meta.Name, err)
		}
		switch {
		case meta.Kind == "ClusterRole" && meta.Name == "sluice-watcher":
			s.cluster = role.Rules
		case meta.Kind == "Role" && meta.Name == "sluice-watcher-leader-election":
			s.lease = role.Rules
		case meta.Kind == "Role" && meta.Name == "sluice-watcher":
			if s.watched != nil && !reflect.DeepEqual(s.watched, role.Rules) {
				t.Fatalf("the Role sluice-watcher in %s differs from the one before it: %v", meta.Namespace, role.Rules)
			}
			s.watched = role.Rules
		}
	}
	if s.cluster == nil || s.lease == nil {
		t.Fatalf("no ClusterRole sluice-watcher or no Role sluice-watcher-leader-election")
	}
	return s
}

// rbacRun is one watcher, with --leader-elect, run with a ServiceAccount bound as an
// rbacShape says.
type rbacRun struct {
	c      *testenv.Cluster
	ns, sa string // the watcher's ServiceAccount, in the namespace of its Lease
	// watched is its --namespaces (empty: all); probe is the namespace of the status probe's
	// objects: the first watched one, or ns.
	watched []string
	probe   string
	addr    string
	w       *testenv.Process
	synced  bool
}

func runWatcher(t *testing.T, c *testenv.Cluster, sa string, s rbacShape) *rbacRun {
	t.Helper()
	ctx := context.Background()
	ns := c.Namespace(t)
	var watched []string
	if s.watched != nil {
		// Two watched namespaces, neither the Lease's: the Roles there are all it reads by.
		watched = []string{c.Namespace(t), c.Namespace(t)}
	}
	cluster := withNamespaceNames(s.cluster, watched)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "deploy-test-" + ns}, Rules: cluster}
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}, Subjects: subjects}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind := func(in, name string, rules []rbacv1.PolicyRule) {
		if _, err := c.Client.RbacV1().Roles(in).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Client.RbacV1().RoleBindings(in).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, Subjects: subjects}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bind(ns, "lease", s.lease)
	for i, w := range watched {
		if !(s.unboundLast && i == 1) {
			bind(w, "watched", s.watched)
		}
	}
	return startRBACWatcher(t, c, ns, sa, watched)
}

// withNamespaceNames is rules with a rule that reads Namespaces by name naming watched
// instead: the manifests name their example namespaces, a run its own.
func withNamespaceNames(rules []rbacv1.PolicyRule, watched []string) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, len(rules))
	for i, r := range rules {
		out[i] = *r.DeepCopy()
		if len(r.ResourceNames) > 0 && slices.Contains(r.Resources, "namespaces") {
			out[i].ResourceNames = slices.Clone(watched)
		}
	}
	return out
}

// startRBACWatcher runs the watcher with the token of ServiceAccount ns/sa, its Lease in ns,
// watching the namespaces watched (empty: all), and waits for its marker, or, when there is
// none, for it to give up after its sync timeout.
func startRBACWatcher(t *testing.T, c *testenv.Cluster, ns, sa string, watched []string) *rbacRun {
	t.Helper()
	ctx := context.Background()
	cfg, err := c.ServiceAccountConfig(ctx, ns, sa)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := c.WriteKubeconfig(cfg, sa+"-"+ns)
	if err != nil {
		t.Fatal(err)
	}
	r := &rbacRun{c: c, ns: ns, sa: sa, watched: watched, probe: ns}
	var namespaces []string
	if len(watched) > 0 {
		r.probe = watched[0]
		namespaces = []string{"--namespaces", strings.Join(watched, ",")}
	}
	// A free port can be taken by another test process before the watcher binds it; then
	// sluicectl would ask whoever holds it. Only a watcher that said it serves is asked.
	for attempt := 1; ; attempt++ {
		a := testenv.Addrs(t, 2)
		r.addr = a[0]
		// --gateway-api=on: the Gateway API kinds are required, so a missing read rule on
		// them stops the marker as it does for Ingresses (the test installs their CRDs).
		r.w = testenv.StartBinary(t, "watcher", append([]string{"--kubeconfig", kc, "--listen", a[0], "--http-listen", a[1], "--sync-timeout", "8s", "--gateway-api", "on",
			"--leader-elect", "--id", sa, "--leader-elect-namespace", ns, "--leader-elect-lease-duration", "3s",
			"--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "500ms"}, namespaces...)...)
		err := testenv.Poll(50*time.Millisecond, time.Minute, func() (bool, error) {
			exited := r.w.Exited()
			if strings.Contains(r.w.Logs(), "serving: grpc="+a[0]) {
				return true, nil
			}
			if exited {
				return false, testenv.Permanent(fmt.Errorf("the watcher exited before serving:\n%s", r.w.LogTail(10)))
			}
			return false, nil
		})
		if err == nil {
			break
		}
		if attempt == 3 || !strings.Contains(r.w.Logs(), "address already in use") {
			t.Fatal(err)
		}
	}
	ctl := testenv.StartBinary(t, "sluicectl", "watch", "--addr", r.addr, "--until-synced", "--quiet")
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	select {
	case <-ctl.Done():
	case <-r.w.Done():
	case <-wctx.Done():
	}
	r.synced = ctl.Exited() && ctl.ExitCode() == 0 && strings.Contains(ctl.Logs(), "initial-sync-complete")
	if !r.synced {
		// Without a marker the watcher must give up after its sync timeout; wait for it.
		if _, err := r.w.Wait(wctx); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

const probeAddress = "192.0.2.44"

// report creates an Ingress and reports, as a translator would, an address and a finding
// for it; it returns once a replica that leads has accepted the report, or when d passed or
// hopeless (when not nil) says no replica can lead.
func (r *rbacRun) report(t *testing.T, d time.Duration, hopeless func() bool) (accepted bool) {
	t.Helper()
	ctx := context.Background()
	ing, err := r.c.Client.NetworkingV1().Ingresses(r.probe).Create(ctx, &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
			Name: "missing", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpcx.Dial(r.addr, grpcx.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// Open until the test ends: the leader answers before it reads the report, so closing
	// the connection at once could drop the report unread.
	t.Cleanup(func() { _ = conn.Close() })
	req := &watchv1.ReportStatusRequest{Source: "deploy-test", Full: true, Objects: append([]*watchv1.ObjectStatus{{
		Key: &watchv1.ObjectKey{Kind: "Ingress", Namespace: r.probe, Name: "probe"}, Uid: string(ing.UID), ManageAddresses: true,
		Addresses: []*watchv1.GatewayAddress{{Type: "IPAddress", Value: probeAddress}},
		Findings:  []*watchv1.StatusFinding{{Reason: "ServiceNotFound", Field: "spec.defaultBackend", Message: "Service " + r.probe + "/missing not found", Warning: true}},
	}}, r.gatewayStatuses(t)...)}
	deadline := time.Now().Add(d)
	// A replica that does not lead refuses: it campaigns; ask again.
	err = testenv.Poll(200*time.Millisecond, d, func() (bool, error) {
		if hopeless != nil && hopeless() {
			return false, testenv.Permanent(errors.New("no replica can lead"))
		}
		sctx, cancel := context.WithDeadline(ctx, deadline)
		s, err := watchv1.NewStatusServiceClient(conn).ReportStatus(sctx)
		if err == nil {
			if err = s.Send(req); err == nil {
				_, err = s.Recv() // the leader answers first; a replica that cannot write refuses
			}
		}
		if err != nil {
			cancel()
			return false, err
		}
		// Keep the stream open until the outcome is seen (see above).
		t.Cleanup(cancel)
		return true, nil
	})
	return err == nil
}

// The Gateway API objects the status probe reports on, and what it reports.
const (
	gatewayController = "sluice.io/gateway-controller" // the watcher's default --gateway-controller-name
	gatewayProbeAddr  = "192.0.2.45"
)

var gatewayGVR = map[string]schema.GroupVersionResource{
	"GatewayClass":     {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"},
	"Gateway":          {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"},
	"HTTPRoute":        {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"},
	"ListenerSet":      {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "listenersets"},
	"BackendTLSPolicy": {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "backendtlspolicies"},
}

// installGatewayCRDs creates the CRDs of the Gateway API kinds the watcher watches, from the
// pinned module's standard channel, so that the watcher (--gateway-api=auto) serves them.
func installGatewayCRDs(t *testing.T, c *testenv.Cluster) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		t.Fatalf("go list -m sigs.k8s.io/gateway-api: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "standard")
	for _, r := range []string{"gatewayclasses", "gateways", "httproutes", "referencegrants", "listenersets", "backendtlspolicies"} {
		b, err := os.ReadFile(filepath.Join(dir, "gateway.networking.k8s.io_"+r+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.InstallCRD(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
}

// gatewayStatuses creates a GatewayClass of the watcher's Gateway controller, a Gateway of it,
// an HTTPRoute on it and a ListenerSet of it, and returns what a translator reports about
// them.
func (r *rbacRun) gatewayStatuses(t *testing.T) []*watchv1.ObjectStatus {
	t.Helper()
	ctx, dyn := context.Background(), r.c.Dynamic()
	class := "probe-" + r.ns
	objs := []struct {
		kind, ns string
		obj      map[string]any
	}{
		{"GatewayClass", "", map[string]any{"metadata": map[string]any{"name": class}, "spec": map[string]any{"controllerName": gatewayController}}},
		{"Gateway", r.probe, map[string]any{"metadata": map[string]any{"name": "probe"}, "spec": map[string]any{"gatewayClassName": class,
			"listeners": []any{map[string]any{"name": "http", "protocol": "HTTP", "port": int64(80)}}}}},
		{"HTTPRoute", r.probe, map[string]any{"metadata": map[string]any{"name": "probe"}, "spec": map[string]any{"parentRefs": []any{map[string]any{"name": "probe"}}}}},
		{"ListenerSet", r.probe, map[string]any{"metadata": map[string]any{"name": "probe"}, "spec": map[string]any{"parentRef": map[string]any{"name": "probe"},
			"listeners": []any{map[string]any{"name": "a", "protocol": "HTTP", "port": int64(80), "hostname": "a.example.com"}}}}},
		{"BackendTLSPolicy", r.probe, map[string]any{"metadata": map[string]any{"name": "probe"}, "spec": map[string]any{
			"targetRefs": []any{map[string]any{"group": "", "kind": "Service", "name": "probe"}},
			"validation": map[string]any{"wellKnownCACertificates": "System", "hostname": "probe.example.com"}}}},
	}
	accepted := []*watchv1.Condition{{Type: "Accepted", Status: "True", Reason: "Accepted", Message: "probe", ObservedGeneration: 1}}
	var out []*watchv1.ObjectStatus
	for _, o := range objs {
		u := &unstructured.Unstructured{Object: o.obj}
		u.SetAPIVersion("gateway.networking.k8s.io/v1")
		u.SetKind(o.kind)
		var res dynamic.ResourceInterface = dyn.Resource(gatewayGVR[o.kind])
		if o.ns != "" {
			res = dyn.Resource(gatewayGVR[o.kind]).Namespace(o.ns)
		}
		created, err := res.Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st := &watchv1.ObjectStatus{Key: &watchv1.ObjectKey{Kind: o.kind, Namespace: o.ns, Name: created.GetName()}, Uid: string(created.GetUID()),
			ControllerName: gatewayController}
		switch o.kind {
		case "HTTPRoute":
			st.Parents = []*watchv1.RouteParentStatus{{ParentRef: &watchv1.ParentReference{Name: "probe"}, Conditions: accepted}}
		case "BackendTLSPolicy": // its ancestors
			st.Parents = []*watchv1.RouteParentStatus{{ParentRef: &watchv1.ParentReference{Namespace: r.probe, Name: "probe"}, Conditions: accepted}}
		case "Gateway":
			st.Conditions, st.ManageAddresses = accepted, true
			st.Addresses = []*watchv1.GatewayAddress{{Type: "IPAddress", Value: gatewayProbeAddr}}
		default:
			st.Conditions = accepted
		}
		out = append(out, st)
	}
	return out
}

// waitGatewayStatus waits until the probe's Gateway API objects show what was reported as
// enough needs, or d passed; it returns, by status resource ("gateways/status"), which do.
func (r *rbacRun) waitGatewayStatus(t *testing.T, d time.Duration, enough func(written map[string]bool) bool) map[string]bool {
	t.Helper()
	ctx, dyn := context.Background(), r.c.Dynamic()
	var written map[string]bool
	var failed error
	_ = testenv.Poll(100*time.Millisecond, d, func() (bool, error) {
		written = map[string]bool{}
		for kind, gvr := range gatewayGVR {
			name, res := "probe", dynamic.ResourceInterface(dyn.Resource(gvr).Namespace(r.probe))
			if kind == "GatewayClass" {
				name, res = "probe-"+r.ns, dyn.Resource(gvr)
			}
			u, err := res.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				failed = err
				return false, testenv.Permanent(err)
			}
			var ok bool
			switch kind {
			case "HTTPRoute":
				ps, _, _ := unstructured.NestedSlice(u.Object, "status", "parents")
				ok = len(ps) == 1 && ps[0].(map[string]any)["controllerName"] == gatewayController
			case "BackendTLSPolicy":
				as, _, _ := unstructured.NestedSlice(u.Object, "status", "ancestors")
				ok = len(as) == 1 && as[0].(map[string]any)["controllerName"] == gatewayController
			case "Gateway":
				as, _, _ := unstructured.NestedSlice(u.Object, "status", "addresses")
				ok = len(as) == 1 && as[0].(map[string]any)["value"] == gatewayProbeAddr
			default:
				cs, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
				ok = len(cs) == 1 && cs[0].(map[string]any)["message"] == "probe"
			}
			written[gvr.Resource+"/status"] = ok
		}
		return enough(written), nil
	})
	if failed != nil {
		t.Fatal(failed)
	}
	return written
}

// allWritten says whether every Gateway API status is written.
func allWritten(written map[string]bool) bool {
	return len(written) == len(gatewayGVR) && !slices.Contains(slices.Collect(maps.Values(written)), false)
}

// waitStatus waits until the probe Ingress's address (addressed) and Warning Event
// (announced) are as enough needs, or d passed.
func (r *rbacRun) waitStatus(t *testing.T, d time.Duration, enough func(addressed, announced bool) bool) (addressed, announced bool) {
	t.Helper()
	ctx := context.Background()
	var failed error
	_ = testenv.Poll(100*time.Millisecond, d, func() (bool, error) {
		ing, err := r.c.Client.NetworkingV1().Ingresses(r.probe).Get(ctx, "probe", metav1.GetOptions{})
		if err != nil {
			failed = err
			return false, testenv.Permanent(err)
		}
		lb := ing.Status.LoadBalancer.Ingress
		addressed = len(lb) == 1 && lb[0].IP == probeAddress
		evs, err := r.c.Client.CoreV1().Events(r.probe).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=probe,reason=ServiceNotFound"})
		if err != nil {
			failed = err
			return false, testenv.Permanent(err)
		}
		announced = len(evs.Items) == 1 && evs.Items[0].Type == corev1.EventTypeWarning
		return enough(addressed, announced), nil
	})
	if failed != nil {
		t.Fatal(failed)
	}
	return addressed, announced
}

func both(addressed, announced bool) bool { return addressed && announced }

// The watcher, with the token of a ServiceAccount bound only as deploy/ binds it, reaches
// the marker, takes the Lease and writes what a translator reports: the Ingress's
// status.loadBalancer, a Warning Event and the Gateway API statuses. That holds for both
// shapes: deploy/base's one ClusterRole (the watcher watches every namespace), and
// overlays/namespaced's ClusterRole of cluster-scoped kinds with a Role in each watched
// namespace (the watcher runs with --namespaces, two of them, neither its Lease's). With any
// one resource of any one rule removed, what needs it fails and the watcher's log says which
// resource was refused: a read rule stops the marker (the Gateway API kinds' too: the
// watcher runs with --gateway-api=on); ingresses/status stops the address, events the
// Event, a lease rule the election, each Gateway API status resource that object's status
// alone. A watched namespace without its Role stops the marker.
// The namespaced shape grants what the base grants, split by scope, and the rules come from
// the manifests (kubectl kustomize), so none of them can drift.
func TestWatcherClusterRoleIsExactlyEnough(t *testing.T) {
	c := testenv.SharedCluster(t)
	installGatewayCRDs(t, c)
	base, namespaced := watcherRBAC(t, kustomize(t, "base")), watcherRBAC(t, kustomize(t, "overlays/namespaced"))
	if len(base.cluster) < 9 || base.watched != nil || len(base.lease) < 2 {
		t.Fatalf("base: the ClusterRole has %d rules, the Lease Role %d, and Roles per namespace %v", len(base.cluster), len(base.lease), base.watched)
	}
	// The namespaced shape names the Namespaces it reads (the watched ones); the base reads
	// them all.
	if r := namespacesRule(namespaced.cluster); r == nil || len(r.ResourceNames) == 0 || namespacesRule(base.cluster) == nil {
		t.Fatalf("overlays/namespaced's ClusterRole must read Namespaces by name, the base's all of them: %v, %v", namespaced.cluster, base.cluster)
	}
	if !reflect.DeepEqual(withoutResourceNames(append(slices.Clone(namespaced.cluster), namespaced.watched...)), base.cluster) || !reflect.DeepEqual(namespaced.lease, base.lease) {
		t.Fatalf("overlays/namespaced's ClusterRole %v and Role %v are not base's ClusterRole %v split in two", namespaced.cluster, namespaced.watched, base.cluster)
	}
	// Only cluster-scoped resources stay in the namespaced shape's ClusterRole.
	scope := servedScopes(t, c)
	for _, part := range []struct {
		rules      []rbacv1.PolicyRule
		namespaced bool
	}{{namespaced.cluster, false}, {namespaced.watched, true}} {
		for _, rule := range part.rules {
			for _, res := range rule.Resources {
				if ns, ok := scope[rule.APIGroups[0]+"/"+res]; !ok || ns != part.namespaced {
					t.Errorf("overlays/namespaced: %s/%s is served %v, namespaced %v, granted namespaced %v", rule.APIGroups[0], res, ok, ns, part.namespaced)
				}
			}
		}
	}
	if t.Failed() {
		return
	}
	for _, shape := range []struct {
		name string
		s    rbacShape
	}{{"base", base}, {"namespaced", namespaced}} {
		t.Run(shape.name, func(t *testing.T) {
			t.Parallel()
			testWatcherRBAC(t, c, shape.s)
		})
	}
}

// namespacesRule is the rule of rules that grants Namespaces, or nil.
func namespacesRule(rules []rbacv1.PolicyRule) *rbacv1.PolicyRule {
	for i, r := range rules {
		if slices.Contains(r.Resources, "namespaces") {
			return &rules[i]
		}
	}
	return nil
}

// withoutResourceNames is rules with no rule limited to names.
func withoutResourceNames(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, len(rules))
	for i, r := range rules {
		out[i] = *r.DeepCopy()
		out[i].ResourceNames = nil
	}
	return out
}

// servedScopes says, for every resource the apiserver serves ("group/resource", subresources
// too), whether it is namespaced.
func servedScopes(t *testing.T, c *testenv.Cluster) map[string]bool {
	t.Helper()
	_, lists, err := c.Client.Discovery().ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			out[gv.Group+"/"+r.Name] = r.Namespaced
		}
	}
	return out
}

// withoutResource is rules without resource j of rule i (without rule i when that was its
// only resource).
func withoutResource(rules []rbacv1.PolicyRule, i, j int) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, 0, len(rules))
	for k, r := range rules {
		if k == i {
			if len(r.Resources) == 1 {
				continue
			}
			r = *r.DeepCopy()
			r.Resources = slices.Delete(r.Resources, j, j+1)
		}
		out = append(out, r)
	}
	return out
}

// testWatcherRBAC runs TestWatcherClusterRoleIsExactlyEnough's cases for one shape.
func testWatcherRBAC(t *testing.T, c *testenv.Cluster, s rbacShape) {
	t.Run("all-rules", func(t *testing.T) {
		t.Parallel()
		r := runWatcher(t, c, "sluice-watcher", s)
		if !r.synced {
			t.Fatalf("no marker with deploy/'s RBAC:\n%s", r.w.Logs())
		}
		if !r.report(t, time.Minute, nil) {
			t.Fatalf("the watcher never led and accepted the report:\n%s", r.w.LogTail(40))
		}
		if addressed, announced := r.waitStatus(t, time.Minute, both); !addressed || !announced {
			t.Fatalf("address written %v, Event recorded %v:\n%s", addressed, announced, r.w.LogTail(40))
		}
		if written := r.waitGatewayStatus(t, time.Minute, allWritten); !allWritten(written) {
			t.Fatalf("Gateway API statuses written: %v:\n%s", written, r.w.LogTail(40))
		}
		l, err := c.Client.CoordinationV1().Leases(r.ns).Get(context.Background(), "sluice-watcher", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || !strings.HasPrefix(*l.Spec.HolderIdentity, "sluice-watcher@") {
			t.Fatalf("the Lease is not held by the watcher: %v %v", l, err)
		}
	})
	type without struct {
		name  string
		shape rbacShape
		rule  rbacv1.PolicyRule // what is missing: one resource of one rule; none for a missing Role
	}
	// One case per resource of every rule: each must be needed on its own.
	var cases []without
	for _, part := range []struct {
		rules []rbacv1.PolicyRule
		set   func(s rbacShape, rules []rbacv1.PolicyRule) rbacShape
	}{
		{s.cluster, func(s rbacShape, rules []rbacv1.PolicyRule) rbacShape { s.cluster = rules; return s }},
		{s.watched, func(s rbacShape, rules []rbacv1.PolicyRule) rbacShape { s.watched = rules; return s }},
		{s.lease, func(s rbacShape, rules []rbacv1.PolicyRule) rbacShape { s.lease = rules; return s }},
	} {
		for i, rule := range part.rules {
			for j, res := range rule.Resources {
				name := res
				if res == "leases" { // two rules on leases: named by their verbs
					name += "-" + strings.Join(rule.Verbs, ",")
				}
				one := *rule.DeepCopy()
				one.Resources = []string{res}
				cases = append(cases, without{name: name, shape: part.set(s, withoutResource(part.rules, i, j)), rule: one})
			}
		}
	}
	if s.watched != nil {
		less := s
		less.unboundLast = true
		cases = append(cases, without{name: "role-in-one-namespace", shape: less})
	}
	for i, cs := range cases {
		t.Run("without-"+cs.name, func(t *testing.T) {
			t.Parallel()
			r := runWatcher(t, c, fmt.Sprintf("without-%d", i), cs.shape)
			if cs.rule.Resources == nil {
				// The apiserver refuses the lists in the namespace without a Role, and says where
				// ("cannot list resource \"secrets\" ... in the namespace \"NS\"").
				unbound := r.watched[len(r.watched)-1]
				logs := r.w.Logs()
				named := strings.Contains(logs, `in the namespace "`+unbound+`"`) || strings.Contains(logs, `in the namespace \"`+unbound+`\"`)
				if r.synced || !named || !strings.Contains(logs, "forbidden (403)") {
					t.Fatalf("marker %v (want false) without the Role in %s, 403 there logged %v:\n%s", r.synced, unbound, named, logs)
				}
				return
			}
			resource := cs.rule.Resources[0]
			if slices.Contains(cs.rule.Verbs, "watch") {
				if r.synced {
					t.Fatalf("marker although the rule for %v was removed", cs.rule.Resources)
				}
				if logs := r.w.Logs(); !strings.Contains(logs, "/"+resource) || !strings.Contains(logs, "forbidden (403)") {
					t.Fatalf("the watcher did not name %s and the 403:\n%s", resource, logs)
				}
				return
			}
			if !r.synced {
				t.Fatalf("no marker although only a write rule (%v %v) was removed:\n%s", cs.rule.Verbs, cs.rule.Resources, r.w.Logs())
			}
			// The apiserver's refusal names the verb and the resource ("cannot patch resource
			// \"ingresses/status\"", "cannot create resource \"leases\"").
			refused := func() bool {
				logs := r.w.Logs()
				for _, v := range cs.rule.Verbs {
					plain := fmt.Sprintf(`cannot %s resource "%s"`, v, resource)
					if strings.Contains(logs, plain) || strings.Contains(logs, strings.ReplaceAll(plain, `"`, `\"`)) {
						return true
					}
				}
				return false
			}
			// Each wait below ends as soon as the outcome is settled: what the missing rule
			// stops came anyway (the test fails), or the rest came and the refusal was logged
			// (what it stops can no longer come).
			var hopeless func() bool
			if resource == "leases" {
				hopeless = refused // nobody can lead
			}
			accepted := r.report(t, 15*time.Second, hopeless)
			var addressed, announced bool
			if accepted {
				addressed, announced = r.waitStatus(t, 15*time.Second, func(addressed, announced bool) bool {
					switch resource {
					case "ingresses/status":
						return addressed || announced && refused()
					case "events":
						return announced || addressed && refused()
					}
					return addressed && announced
				})
			}
			named := refused()
			switch resource {
			case "ingresses/status":
				if !announced || addressed || !named {
					t.Fatalf("Event %v (want true), address %v (want false), refusal logged %v:\n%s", announced, addressed, named, r.w.LogTail(40))
				}
			case "events":
				if !addressed || announced || !named {
					t.Fatalf("address %v (want true), Event %v (want false), refusal logged %v:\n%s", addressed, announced, named, r.w.LogTail(40))
				}
			case "leases":
				if accepted || !named {
					t.Fatalf("report accepted %v (want false: nobody leads), refusal logged %v:\n%s", accepted, named, r.w.LogTail(40))
				}
			case "gatewayclasses/status", "gateways/status", "httproutes/status", "listenersets/status", "backendtlspolicies/status":
				// The other three are written (so the refused one had its turn), this one not.
				var written map[string]bool
				if accepted {
					written = r.waitGatewayStatus(t, 15*time.Second, func(written map[string]bool) bool {
						others := 0
						for res, ok := range written {
							if res != resource && ok {
								others++
							}
						}
						return written[resource] || others == len(gatewayGVR)-1 && refused()
					})
					logs := r.w.Logs() // the refusal may come after the Ingress's write
					named = strings.Contains(logs, fmt.Sprintf(`cannot patch resource "%s"`, resource)) ||
						strings.Contains(logs, fmt.Sprintf(`cannot patch resource \"%s\"`, resource))
				}
				others := 0
				for res, ok := range written {
					if res != resource && ok {
						others++
					}
				}
				if !addressed || others != len(gatewayGVR)-1 || written[resource] || !named {
					t.Fatalf("Gateway API statuses written %v (want all but %s), Ingress address %v, refusal logged %v:\n%s", written, resource, addressed, named, r.w.LogTail(40))
				}
			default:
				t.Fatalf("rule %v %v: the test does not know what needs it", cs.rule.Verbs, cs.rule.Resources)
			}
		})
	}
}

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil { // compose containers run as uid 65532
		t.Fatal(err)
	}
}
