package deploy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/sluice-io/sluice/internal/harness/testenv"
)

// The chart, and the value sets the tests render besides its defaults.
const (
	chart            = "helm/sluice"
	singleNodeValues = "helm/values-single-node.yaml" // as overlays/single-node
	namespacedValues = "helm/values-namespaced.yaml"  // as overlays/namespaced
	customValues     = "helm/testdata/custom.yaml"    // every value away from its default
	gatewayValues    = "helm/values-gateway-addresses.yaml"
)

// helmCmd runs the pinned helm binary (tools/build.sh helm) and returns its output.
func helmCmd(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := helmRun(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// helmRun runs the pinned helm binary and returns its output, or an error with its output
// and stderr when it fails.
func helmRun(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	bin, err := testenv.ToolPath("helm")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	// No cluster and no user state: helm template renders offline, and nothing outside the
	// test (a kubeconfig, repositories, plugins) changes what it renders.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+home, "KUBECONFIG="+home+"/none", "HELM_CACHE_HOME="+home+"/cache",
		"HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w\n%s%s", err, out, stderr.Bytes())
	}
	return out, nil
}

// helmTemplate renders the chart as release sluice in namespace ns.
func helmTemplate(t *testing.T, ns string, args ...string) []byte {
	t.Helper()
	return helmCmd(t, append([]string{"template", "sluice", chart, "--namespace", ns}, args...)...)
}

// manifest is a rendered set of objects by "Kind/name", or "Kind/namespace/name" for an
// object in another namespace than the release's (the watcher's Roles in the namespaces it
// watches).
type manifest map[string]map[string]any

// parseManifest reads a multi-document YAML stream rendered for namespace ns; the labels Helm
// adds to every object (managed-by, instance, chart) are dropped, so a render compares with
// kustomize's.
func parseManifest(t *testing.T, b []byte, ns string) manifest {
	t.Helper()
	m := manifest{}
	r := utilyaml.NewYAMLReader(bufioReader(b))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return m
		}
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		if obj == nil { // a document of comments only
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		if labels, ok := meta["labels"].(map[string]any); ok {
			for _, l := range []string{"app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "helm.sh/chart"} {
				delete(labels, l)
			}
		}
		key := fmt.Sprintf("%s/%s", obj["kind"], meta["name"])
		if in, _ := meta["namespace"].(string); in != "" && in != ns {
			key = fmt.Sprintf("%s/%s/%s", obj["kind"], in, meta["name"])
		}
		if _, dup := m[key]; dup {
			t.Fatalf("%s rendered twice", key)
		}
		m[key] = obj
	}
}

// args are the arguments of every container of the workload named kind ("Deployment/x").
func (m manifest) args(kind string) []string {
	var out []string
	cs, _ := field(m[kind], "spec", "template", "spec", "containers").([]any)
	for _, c := range cs {
		as, _ := field(c.(map[string]any), "args").([]any)
		for _, a := range as {
			out = append(out, a.(string))
		}
	}
	return out
}

// diff says how got differs from want, object by object; empty when they are equal.
func (want manifest) diff(got manifest) string {
	var b strings.Builder
	keys := slices.Sorted(func(yield func(string) bool) {
		seen := map[string]bool{}
		for _, m := range []manifest{want, got} {
			for k := range m {
				if !seen[k] && !yield(k) {
					return
				}
				seen[k] = true
			}
		}
	})
	for _, k := range keys {
		w, inWant := want[k]
		g, inGot := got[k]
		switch {
		case !inGot:
			fmt.Fprintf(&b, "missing %s\n", k)
		case !inWant:
			fmt.Fprintf(&b, "extra %s\n", k)
		case !reflect.DeepEqual(w, g):
			wy, _ := yaml.Marshal(w)
			gy, _ := yaml.Marshal(g)
			fmt.Fprintf(&b, "%s differs; want:\n%s\ngot:\n%s\n", k, wy, gy)
		}
	}
	return b.String()
}

// field is the value at path in obj: map keys, and list indexes as ints.
func field(obj map[string]any, path ...any) any {
	var cur any = obj
	for _, p := range path {
		switch c := cur.(type) {
		case map[string]any:
			k, _ := p.(string)
			cur = c[k]
		case []any:
			i, ok := p.(int)
			if !ok || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

// kustomize renders a kustomization of deploy/ with the pinned kubectl.
func kustomize(t *testing.T, dir string) []byte {
	t.Helper()
	bin, err := testenv.ToolPath("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "kustomize", dir).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v", dir, err)
	}
	return out
}

// The Helm chart (docs/operations.md): helm lint passes on the chart with its defaults and with each value set.
func TestHelmLint(t *testing.T) {
	for _, values := range []string{"", singleNodeValues, namespacedValues, customValues, gatewayValues} {
		args := []string{"lint", "--strict", chart}
		if values != "" {
			args = append(args, "-f", values)
		}
		out := helmCmd(t, args...)
		if !strings.Contains(string(out), "1 chart(s) linted, 0 chart(s) failed") {
			t.Fatalf("helm %s:\n%s", strings.Join(args, " "), out)
		}
	}
}

// The chart is the Kustomize manifests: with its defaults it renders every object of
// deploy/base (names, args, probes, ports, annotations, NetworkPolicies, PDBs, the RBAC)
// field for field, with values-single-node.yaml every object of overlays/single-node, and
// with values-namespaced.yaml every object of overlays/namespaced (the watcher's Roles in the
// namespaces it watches).
// Only the Namespace is left out (Helm's is made by --create-namespace; namespace.create
// renders it), and Helm's own labels are added (and part-of sluice to the cert-manager
// objects). So a change to one that the other lacks fails here.
func TestHelmChartIsTheKustomizeBase(t *testing.T) {
	for _, tc := range []struct {
		kustomize string
		args      []string
	}{
		{"base", nil},
		{"overlays/single-node", []string{"-f", singleNodeValues}},
		{"overlays/namespaced", []string{"-f", namespacedValues}},
		{"base", []string{"--set", "namespace.create=true"}},
	} {
		t.Run(tc.kustomize+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			want := parseManifest(t, kustomize(t, tc.kustomize), "sluice-system")
			// The chart labels every object part-of sluice; the overlay's cert-manager objects,
			// added outside deploy/base's labels, are not.
			for _, obj := range want {
				meta := obj["metadata"].(map[string]any)
				labels, _ := meta["labels"].(map[string]any)
				if labels == nil {
					labels = map[string]any{}
					meta["labels"] = labels
				}
				labels["app.kubernetes.io/part-of"] = "sluice"
			}
			if !slices.Contains(tc.args, "namespace.create=true") {
				delete(want, "Namespace/sluice-system")
			}
			got := parseManifest(t, helmTemplate(t, "sluice-system", tc.args...), "sluice-system")
			if d := want.diff(got); d != "" {
				t.Fatalf("helm template %v differs from kubectl kustomize %s:\n%s", tc.args, tc.kustomize, d)
			}
		})
	}
}

// The Helm chart (docs/operations.md): each value of helm/testdata/custom.yaml reaches the objects it is for; and
// gatewayClass.create=auto renders the GatewayClass only where the Gateway API is served.
func TestHelmValuesTakeEffect(t *testing.T) {
	m := parseManifest(t, helmTemplate(t, "sluice-custom", "-f", customValues), "sluice-custom")
	args := func(kind string) []string { return m.args(kind) }
	spec := func(container int, path ...any) []any {
		return append([]any{"spec", "template", "spec", "containers", container}, path...)
	}
	for _, tc := range []struct {
		object string
		path   []any
		want   any
	}{
		{"Namespace/sluice-custom", []any{"metadata", "labels", "pod-security.kubernetes.io/enforce"}, "restricted"},
		{"Deployment/sluice-watcher", []any{"spec", "replicas"}, 3.0},
		{"Deployment/sluice-translator", []any{"spec", "replicas"}, 2.0},
		{"Deployment/sluice-proxy", []any{"spec", "replicas"}, 4.0},
		{"Deployment/sluice-watcher", spec(0, "image"), "registry.example.com/mirror/sluice/watcher:v1.2.3"},
		{"Deployment/sluice-translator", spec(0, "image"), "registry.example.com/mirror/sluice/translator:v1.2.3"},
		{"Deployment/sluice-proxy", spec(0, "image"), "registry.example.com/mirror/sluice/caddy:v1.2.3"},
		{"Deployment/sluice-proxy", spec(1, "image"), "registry.example.com/mirror/sluice/pusher:v1.2.3"},
		{"Deployment/sluice-proxy", spec(1, "imagePullPolicy"), "IfNotPresent"},
		{"Deployment/sluice-watcher", spec(0, "resources", "limits", "cpu"), "1"},
		{"Deployment/sluice-translator", spec(0, "resources", "requests", "cpu"), "300m"},
		{"Deployment/sluice-proxy", spec(0, "resources", "requests", "memory"), "512Mi"},
		{"Deployment/sluice-proxy", spec(1, "resources", "requests", "memory"), "128Mi"},
		{"Deployment/sluice-watcher", []any{"spec", "template", "spec", "volumes", 0, "secret", "secretName"}, "w-tls"},
		{"Deployment/sluice-translator", []any{"spec", "template", "spec", "volumes", 0, "secret", "secretName"}, "t-tls"},
		{"Deployment/sluice-proxy", []any{"spec", "template", "spec", "volumes", 2, "secret", "secretName"}, "p-tls"},
		{"Certificate/sluice-watcher", []any{"spec", "secretName"}, "w-tls"},
		{"Certificate/sluice-watcher", []any{"spec", "dnsNames", 1}, "sluice-watcher.sluice-custom.svc"},
		{"Certificate/sluice-translator", []any{"spec", "issuerRef", "name"}, "corp-ca"},
		{"Certificate/sluice-pusher", []any{"spec", "issuerRef", "kind"}, "ClusterIssuer"},
		{"Certificate/sluice-operator", []any{"spec", "issuerRef", "group"}, "cert-manager.io"},
		{"Service/sluice-proxy", []any{"spec", "type"}, "ClusterIP"},
		{"Service/sluice-proxy", []any{"metadata", "annotations", "example.com/lb"}, "internal"},
		{"PodDisruptionBudget/sluice-watcher", []any{"spec", "maxUnavailable"}, 2.0},
		{"PodDisruptionBudget/sluice-translator", []any{"spec", "maxUnavailable"}, "50%"},
		{"PodDisruptionBudget/sluice-proxy", []any{"spec", "minAvailable"}, 2.0},
		{"GatewayClass/sluice-custom", []any{"spec", "controllerName"}, "sluice.io/gateway-controller"},
		{"ClusterRoleBinding/sluice-watcher", []any{"subjects", 0, "namespace"}, "sluice-custom"},
		{"RoleBinding/sluice-watcher-leader-election", []any{"subjects", 0, "namespace"}, "sluice-custom"},
		{"RoleBinding/shop/sluice-watcher", []any{"subjects", 0, "namespace"}, "sluice-custom"},
		{"RoleBinding/blog/sluice-watcher", []any{"roleRef", "name"}, "sluice-watcher"},
		{"Role/shop/sluice-watcher", []any{"rules", 0, "resources", 0}, "ingresses"},
		{"Role/blog/sluice-watcher", []any{"rules", 3, "resources", 0}, "secrets"},
		{"Service/sluice-proxy-2001-db8--21", []any{"spec", "externalIPs", 0}, "2001:db8::21"},
		{"Service/sluice-proxy-2001-db8--21", []any{"metadata", "annotations", "example.com/pool"}, "blue"},
		{"Service/sluice-proxy-2001-db8--21", []any{"metadata", "annotations", "example.com/lb"}, "gateway-blue"},
	} {
		if got := field(m[tc.object], tc.path...); got != tc.want {
			t.Errorf("%s %v = %v (%T), want %v", tc.object, tc.path, got, got, tc.want)
		}
	}
	for kind, want := range map[string][]string{
		"Deployment/sluice-watcher":    {"--log-format=text", "--namespaces=shop,blog"},
		"Deployment/sluice-translator": {"--log-format=text", "--publish-address=203.0.113.10,lb.example.com"},
		"Deployment/sluice-proxy":      {"--log-format=text"},
	} {
		got := args(kind)
		for _, a := range want {
			if !slices.Contains(got, a) {
				t.Errorf("%s args %v lack %s", kind, got, a)
			}
		}
		for _, a := range got {
			if strings.HasPrefix(a, "--publish-service") || a == "--log-format=json" {
				t.Errorf("%s args %v have %s", kind, got, a)
			}
		}
	}
	for k := range m {
		if strings.HasPrefix(k, "NetworkPolicy/") || strings.HasPrefix(k, "Issuer/") || k == "Certificate/sluice-ca" {
			t.Errorf("%s rendered although custom.yaml turns it off", k)
		}
		if ns, ok := strings.CutPrefix(k, "Role/"); ok && strings.Count(ns, "/") == 1 && ns != "shop/sluice-watcher" && ns != "blog/sluice-watcher" {
			t.Errorf("%s rendered although custom.yaml watches only shop and blog", k)
		}
	}
	// With watcher.namespaces the ClusterRole grants only cluster-scoped kinds, and of the
	// Namespaces only the watched ones.
	rules, _ := field(m["ClusterRole/sluice-watcher"], "rules").([]any)
	for _, r := range rules {
		for _, res := range field(r.(map[string]any), "resources").([]any) {
			if res == "namespaces" {
				if names := fmt.Sprint(field(r.(map[string]any), "resourceNames")); names != "[shop blog]" {
					t.Errorf("ClusterRole/sluice-watcher grants the Namespaces %s, want custom.yaml's watcher.namespaces [shop blog]", names)
				}
				continue
			}
			if !slices.Contains([]any{"ingressclasses", "gatewayclasses", "gatewayclasses/status"}, res) {
				t.Errorf("ClusterRole/sluice-watcher grants %s although custom.yaml sets watcher.namespaces", res)
			}
		}
	}
	if len(rules) == 0 {
		t.Error("no ClusterRole/sluice-watcher rules with watcher.namespaces")
	}

	// gatewayClass.create=auto (the default): only when the cluster serves the Gateway API.
	if _, ok := parseManifest(t, helmTemplate(t, "sluice-system"), "sluice-system")["GatewayClass/sluice"]; ok {
		t.Error("a GatewayClass rendered for a cluster without the Gateway API")
	}
	gc, ok := parseManifest(t, helmTemplate(t, "sluice-system", "--api-versions", "gateway.networking.k8s.io/v1"), "sluice-system")["GatewayClass/sluice"]
	if !ok || field(gc, "spec", "controllerName") != "sluice.io/gateway-controller" {
		t.Errorf("GatewayClass with the Gateway API served: %v", gc)
	}
}

// docs/migrating-from-ingress-nginx.md, "Moving Ingresses over": defaultCertificate reaches
// both the translator and the watcher that must carry its Secret; ingressClass {name: nginx,
// create: false} makes the translator serve ingress-nginx's class beside it (its flag, its
// identity, the watcher's Gateway status writer trusting it) without rendering an
// IngressClass nginx, which ingress-nginx still owns; create: true renders it as Sluice's.
func TestHelmServesIngressNginxClassForCutOver(t *testing.T) {
	for _, create := range []bool{false, true} {
		m := parseManifest(t, helmTemplate(t, "sluice-system", "--set", "tls.certManager.enabled=true", "--set", "ingressClass.name=nginx", "--set", fmt.Sprintf("ingressClass.create=%t", create),
			"--set", "defaultCertificate=edge/wildcard-tls"), "sluice-system")
		argsOf := func(kind string) string { return strings.Join(m.args(kind), " ") }
		if a := argsOf("Deployment/sluice-translator"); !strings.Contains(a, "--ingress-class=nginx") {
			t.Errorf("translator args %s, want --ingress-class=nginx", a)
		}
		if a := argsOf("Deployment/sluice-watcher"); !strings.Contains(a, "--gateway-translator-class=nginx") || !strings.Contains(a, "--default-certificate=edge/wildcard-tls") {
			t.Errorf("watcher args %s, want --gateway-translator-class=nginx and the default certificate", a)
		}
		if a := argsOf("Deployment/sluice-translator"); !strings.Contains(a, "--default-certificate=edge/wildcard-tls") {
			t.Errorf("translator args %s, want the default certificate (ingress-nginx's --default-ssl-certificate)", a)
		}
		if uri := field(m["Certificate/sluice-translator"], "spec", "uris", 0); uri != "spiffe://cluster.local/sluice/translator/nginx" {
			t.Errorf("translator identity %v, want the class nginx", uri)
		}
		_, sluice := m["IngressClass/sluice"]
		c, nginx := m["IngressClass/nginx"]
		if sluice || nginx != create || create && field(c, "spec", "controller") != "sluice.io/ingress-controller" {
			t.Errorf("create %t: IngressClass sluice %t, nginx %v", create, sluice, c)
		}
	}
}

// The Helm chart (docs/operations.md): helm template's output for the defaults (with the Gateway API served, so the
// GatewayClass too) and for each other value set is accepted object for object by the real
// apiserver's server-side dry-run apply (cert-manager's and the Gateway API's CRDs installed).
func TestHelmTemplateAcceptedByServerSideDryRun(t *testing.T) {
	c := testenv.SharedCluster(t)
	installCertManagerCRDs(t, c)
	installGatewayCRDs(t, c)
	for _, tc := range []struct {
		name, ns string
		args     []string
	}{
		{"default", "sluice-system", []string{"--api-versions", "gateway.networking.k8s.io/v1"}},
		{"single-node", "sluice-system", []string{"-f", singleNodeValues}},
		{"namespaced", "sluice-system", []string{"-f", namespacedValues}},
		{"custom", "sluice-custom", []string{"-f", customValues}},
		{"gateway-addresses", "sluice-system", []string{"-f", gatewayValues}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rendered := helmTemplate(t, tc.ns, tc.args...)
			// The release's namespace, and those the watcher's Roles go into.
			createNamespaces(t, c, rendered, tc.ns)
			n := len(parseManifest(t, rendered, tc.ns))
			out := kubectl(t, c, rendered, "apply", "--server-side", "--dry-run=server", "--field-manager=sluice-test", "-f", "-")
			if got := strings.Count(string(out), "serverside-applied (server dry run)"); got != n || n < 20 {
				t.Fatalf("%d of %d objects accepted:\n%s", got, n, out)
			}
		})
	}
}

// docs/design.md: only the watcher holds Kubernetes credentials, and they are enough.
// As TestWatcherClusterRoleIsExactlyEnough's all-rules cases, with the chart's own RBAC
// objects installed (helm template --show-only templates/rbac.yaml, applied for real in a
// fresh namespace): the watcher, with the token of the chart's ServiceAccount, reaches the
// marker, takes the Lease the chart's Role names, and writes what a translator reports (the
// Ingress's address, its Warning Event, the Gateway API statuses). Both shapes: the defaults
// (one ClusterRole), and watcher.namespaces set to two fresh namespaces (the watcher runs
// with --namespaces; the chart's Roles and RoleBindings there and its ClusterRole of
// cluster-scoped kinds are all it has). A rule the chart lacks fails what needs it; that
// each of its rules is needed follows from TestHelmChartIsTheKustomizeBase (the chart's RBAC
// is deploy/base's and overlays/namespaced's) and TestWatcherClusterRoleIsExactlyEnough.
func TestHelmWatcherRBACIsEnough(t *testing.T) {
	c := testenv.SharedCluster(t)
	installGatewayCRDs(t, c)
	// One after the other: both install the ClusterRole sluice-watcher.
	for _, namespaced := range []bool{false, true} {
		name := "defaults"
		if namespaced {
			name = "watcher.namespaces"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			ns := c.Namespace(t)
			args := []string{"--show-only", "templates/rbac.yaml"}
			var watched []string
			if namespaced {
				watched = []string{c.Namespace(t), c.Namespace(t)}
				args = append(args, "--set", "watcher.namespaces={"+strings.Join(watched, ",")+"}")
			}
			rbac := helmTemplate(t, ns, args...)
			if roles := len(parseManifest(t, rbac, ns)) - 7; roles != 2*len(watched) { // 3 ServiceAccounts, the Cluster and Lease Roles and bindings
				t.Fatalf("%d Roles and RoleBindings for the watched namespaces %v:\n%s", roles, watched, rbac)
			}
			// The ClusterRole and its binding are cluster-wide with fixed names: remove them after.
			t.Cleanup(func() {
				_ = c.Client.RbacV1().ClusterRoleBindings().Delete(ctx, "sluice-watcher", metav1.DeleteOptions{})
				_ = c.Client.RbacV1().ClusterRoles().Delete(ctx, "sluice-watcher", metav1.DeleteOptions{})
			})
			kubectl(t, c, rbac, "apply", "--server-side", "--field-manager=sluice-test", "-f", "-")

			r := startRBACWatcher(t, c, ns, "sluice-watcher", watched)
			if !r.synced {
				t.Fatalf("no marker with the chart's RBAC:\n%s", r.w.LogTail(40))
			}
			// A refusal is final (the watcher logs what the apiserver forbade): a wait ends on it
			// once what was allowed came, so that a missing rule fails in seconds and names what
			// it refused.
			forbidden := func() bool { return strings.Contains(r.w.Logs(), "forbidden") }
			if !r.report(t, time.Minute, forbidden) {
				t.Fatalf("the watcher never led and accepted the report:\n%s", r.w.LogTail(40))
			}
			if addressed, announced := r.waitStatus(t, time.Minute, func(addressed, announced bool) bool {
				return both(addressed, announced) || (addressed || announced) && forbidden()
			}); !addressed || !announced {
				t.Fatalf("address written %v, Event recorded %v:\n%s", addressed, announced, r.w.LogTail(40))
			}
			if written := r.waitGatewayStatus(t, time.Minute, func(written map[string]bool) bool {
				return allWritten(written) || slices.Contains(slices.Collect(maps.Values(written)), true) && forbidden()
			}); !allWritten(written) {
				t.Fatalf("Gateway API statuses written: %v:\n%s", written, r.w.LogTail(40))
			}
			l, err := c.Client.CoordinationV1().Leases(ns).Get(ctx, "sluice-watcher", metav1.GetOptions{})
			if err != nil || l.Spec.HolderIdentity == nil || !strings.HasPrefix(*l.Spec.HolderIdentity, "sluice-watcher@") {
				t.Fatalf("the Lease is not held by the watcher: %v %v", l, err)
			}
		})
	}
}
