// Package deploy_test proves the manifests under deploy/ against the real test apiserver:
// every overlay is accepted, the watcher's ClusterRole is exactly enough, and the components
// talk mTLS with the certificates `make certs` writes.
package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
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

// Every manifest of every overlay is accepted by a server-side dry-run apply.
func TestEveryOverlayAcceptedByServerSideDryRun(t *testing.T) {
	c := testenv.SharedCluster(t)
	ctx := context.Background()
	installCertManagerCRDs(t, c)
	// A dry-run does not create the namespace the other objects go into.
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sluice-system"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	dirs := []string{"base"}
	overlays, _ := filepath.Glob("overlays/*")
	dirs = append(dirs, overlays...)
	for _, d := range dirs {
		t.Run(d, func(t *testing.T) {
			rendered := kubectl(t, c, nil, "kustomize", d)
			out := kubectl(t, c, rendered, "apply", "--server-side", "--dry-run=server", "--field-manager=sluice-test", "-f", "-")
			n := strings.Count(string(rendered), "\nkind: ") // every document's top-level kind follows a newline
			if got := strings.Count(string(out), "serverside-applied (server dry run)"); got != n {
				t.Fatalf("%d of %d objects accepted:\n%s", got, n, out)
			}
		})
	}
}

// rbacObject is the object of deploy/base/rbac.yaml with that kind and name.
func rbacObject[T any](t *testing.T, kind, name string) *T {
	t.Helper()
	data, err := os.ReadFile("base/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufioReader(data))
	for {
		doc, err := r.Read()
		if err != nil {
			t.Fatalf("no %s %s in base/rbac.yaml: %v", kind, name, err)
		}
		var meta metav1.PartialObjectMetadata
		if err := yaml.Unmarshal(doc, &meta); err != nil || meta.Kind != kind || meta.Name != name {
			continue
		}
		var obj T
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("%s %s in base/rbac.yaml: %v", kind, name, err)
		}
		return &obj
	}
}

// rbacRun is one watcher, with --leader-elect, run with a ServiceAccount bound to exactly
// clusterRules (cluster-wide) and leaseRules (in its namespace, where its Lease is).
type rbacRun struct {
	c      *testenv.Cluster
	ns, sa string
	addr   string
	w      *testenv.Process
	synced bool
}

func runWatcher(t *testing.T, c *testenv.Cluster, sa string, clusterRules, leaseRules []rbacv1.PolicyRule) *rbacRun {
	t.Helper()
	ctx := context.Background()
	ns := c.Namespace(t)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "deploy-test-" + ns}, Rules: clusterRules}
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}, Subjects: subjects}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "lease"}, Rules: leaseRules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "lease"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "lease"}, Subjects: subjects}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return startRBACWatcher(t, c, ns, sa)
}

// startRBACWatcher runs the watcher with the token of ServiceAccount ns/sa and waits for its
// marker, or, when there is none, for it to give up after its sync timeout.
func startRBACWatcher(t *testing.T, c *testenv.Cluster, ns, sa string) *rbacRun {
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
	r := &rbacRun{c: c, ns: ns, sa: sa}
	// A free port can be taken by another test process before the watcher binds it; then
	// sluicectl would ask whoever holds it. Only a watcher that said it serves is asked.
	for attempt := 1; ; attempt++ {
		a := testenv.Addrs(t, 2)
		r.addr = a[0]
		// --gateway-api=on: the Gateway API kinds are required, so a missing read rule on
		// them stops the marker as it does for Ingresses (the test installs their CRDs).
		r.w = testenv.StartBinary(t, "watcher", "--kubeconfig", kc, "--listen", a[0], "--http-listen", a[1], "--sync-timeout", "8s", "--gateway-api", "on",
			"--leader-elect", "--id", sa, "--leader-elect-namespace", ns, "--leader-elect-lease-duration", "3s",
			"--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "500ms")
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
	ing, err := r.c.Client.NetworkingV1().Ingresses(r.ns).Create(ctx, &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
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
	req := &watchv1.ReportStatusRequest{Source: "deploy-test", Full: true, Statuses: []*watchv1.IngressStatus{{
		Key: &watchv1.IngressKey{Namespace: r.ns, Name: "probe"}, Uid: string(ing.UID), ManageLoadBalancer: true,
		LoadBalancer: []*watchv1.LoadBalancerIngress{{Ip: probeAddress}},
		Findings:     []*watchv1.StatusFinding{{Reason: "ServiceNotFound", Field: "spec.defaultBackend", Message: "Service " + r.ns + "/missing not found", Warning: true}},
	}}, GatewayStatuses: r.gatewayStatuses(t)}
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
	"GatewayClass": {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"},
	"Gateway":      {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"},
	"HTTPRoute":    {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"},
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
	for _, r := range []string{"gatewayclasses", "gateways", "httproutes", "referencegrants"} {
		b, err := os.ReadFile(filepath.Join(dir, "gateway.networking.k8s.io_"+r+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.InstallCRD(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
}

// gatewayStatuses creates a GatewayClass of the watcher's Gateway controller, a Gateway of it
// and an HTTPRoute on it, and returns what a translator reports about them.
func (r *rbacRun) gatewayStatuses(t *testing.T) []*watchv1.GatewayAPIStatus {
	t.Helper()
	ctx, dyn := context.Background(), r.c.Dynamic()
	class := "probe-" + r.ns
	objs := []struct {
		kind, ns string
		obj      map[string]any
	}{
		{"GatewayClass", "", map[string]any{"metadata": map[string]any{"name": class}, "spec": map[string]any{"controllerName": gatewayController}}},
		{"Gateway", r.ns, map[string]any{"metadata": map[string]any{"name": "probe"}, "spec": map[string]any{"gatewayClassName": class,
			"listeners": []any{map[string]any{"name": "http", "protocol": "HTTP", "port": int64(80)}}}}},
		{"HTTPRoute", r.ns, map[string]any{"metadata": map[string]any{"name": "probe"}, "spec": map[string]any{"parentRefs": []any{map[string]any{"name": "probe"}}}}},
	}
	accepted := []*watchv1.Condition{{Type: "Accepted", Status: "True", Reason: "Accepted", Message: "probe", ObservedGeneration: 1}}
	var out []*watchv1.GatewayAPIStatus
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
		st := &watchv1.GatewayAPIStatus{Key: &watchv1.ObjectKey{Kind: o.kind, Namespace: o.ns, Name: created.GetName()}, Uid: string(created.GetUID()),
			ControllerName: gatewayController}
		switch o.kind {
		case "HTTPRoute":
			st.Parents = []*watchv1.RouteParentStatus{{ParentRef: &watchv1.ParentReference{Name: "probe"}, Conditions: accepted}}
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
			name, res := "probe", dynamic.ResourceInterface(dyn.Resource(gvr).Namespace(r.ns))
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
	return len(written) == 3 && !slices.Contains(slices.Collect(maps.Values(written)), false)
}

// waitStatus waits until the probe Ingress's address (addressed) and Warning Event
// (announced) are as enough needs, or d passed.
func (r *rbacRun) waitStatus(t *testing.T, d time.Duration, enough func(addressed, announced bool) bool) (addressed, announced bool) {
	t.Helper()
	ctx := context.Background()
	var failed error
	_ = testenv.Poll(100*time.Millisecond, d, func() (bool, error) {
		ing, err := r.c.Client.NetworkingV1().Ingresses(r.ns).Get(ctx, "probe", metav1.GetOptions{})
		if err != nil {
			failed = err
			return false, testenv.Permanent(err)
		}
		lb := ing.Status.LoadBalancer.Ingress
		addressed = len(lb) == 1 && lb[0].IP == probeAddress
		evs, err := r.c.Client.CoreV1().Events(r.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=probe,reason=ServiceNotFound"})
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

// The watcher, with the token of a ServiceAccount bound only by deploy/'s ClusterRole and
// lease Role, reaches the marker, takes the Lease and writes what a translator reports: the
// Ingress's status.loadBalancer and a Warning Event. With any one rule removed, what needs
// it fails and the watcher's log says which resource was refused: a read rule stops the
// marker (the Gateway API kinds' too: the watcher runs with --gateway-api=on); ingresses/status
// stops the address, events the Event, a lease rule the election.
// The Gateway API's status rule is taken apart: without any one of gatewayclasses/status,
// gateways/status and httproutes/status, that object's status alone is not written.
// The rules come from the manifest, so the two cannot drift.
func TestWatcherClusterRoleIsExactlyEnough(t *testing.T) {
	c := testenv.SharedCluster(t)
	installGatewayCRDs(t, c)
	role, lease := rbacObject[rbacv1.ClusterRole](t, "ClusterRole", "sluice-watcher"), rbacObject[rbacv1.Role](t, "Role", "sluice-watcher-leader-election")
	if len(role.Rules) < 7 || len(lease.Rules) < 2 {
		t.Fatalf("the ClusterRole has %d rules and the Role %d", len(role.Rules), len(lease.Rules))
	}
	t.Run("all-rules", func(t *testing.T) {
		t.Parallel()
		r := runWatcher(t, c, "sluice-watcher", role.Rules, lease.Rules)
		if !r.synced {
			t.Fatalf("no marker with deploy/'s ClusterRole:\n%s", r.w.Logs())
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
		name           string
		cluster, lease []rbacv1.PolicyRule
		rule           rbacv1.PolicyRule
	}
	var cases []without
	for i, rule := range role.Rules {
		if rule.APIGroups[0] == "gateway.networking.k8s.io" && strings.HasSuffix(rule.Resources[0], "/status") {
			// One case per status resource of the rule: each must be needed on its own.
			for j, res := range rule.Resources {
				less := *rule.DeepCopy()
				less.Resources = append(append([]string{}, rule.Resources[:j]...), rule.Resources[j+1:]...)
				cluster := append([]rbacv1.PolicyRule{}, role.Rules...)
				cluster[i] = less
				cases = append(cases, without{name: res, rule: rbacv1.PolicyRule{APIGroups: rule.APIGroups, Resources: []string{res}, Verbs: rule.Verbs},
					cluster: cluster, lease: lease.Rules})
			}
			continue
		}
		cases = append(cases, without{name: strings.Join(rule.Resources, ","), rule: rule,
			cluster: append(append([]rbacv1.PolicyRule{}, role.Rules[:i]...), role.Rules[i+1:]...), lease: lease.Rules})
	}
	for i, rule := range lease.Rules {
		cases = append(cases, without{name: "leases-" + strings.Join(rule.Verbs, ","), rule: rule, cluster: role.Rules,
			lease: append(append([]rbacv1.PolicyRule{}, lease.Rules[:i]...), lease.Rules[i+1:]...)})
	}
	for i, cs := range cases {
		t.Run("without-"+cs.name, func(t *testing.T) {
			t.Parallel()
			r := runWatcher(t, c, fmt.Sprintf("without-%d", i), cs.cluster, cs.lease)
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
			case "gatewayclasses/status", "gateways/status", "httproutes/status":
				// The other two are written (so the refused one had its turn), this one not.
				var written map[string]bool
				if accepted {
					written = r.waitGatewayStatus(t, 15*time.Second, func(written map[string]bool) bool {
						others := 0
						for res, ok := range written {
							if res != resource && ok {
								others++
							}
						}
						return written[resource] || others == 2 && refused()
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
				if !addressed || others != 2 || written[resource] || !named {
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
