// Package deploy_test proves the manifests under deploy/ against the real test apiserver:
// every overlay is accepted, the watcher's ClusterRole is exactly enough, and the components
// talk mTLS with the certificates `make certs` writes.
package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/sluice-io/sluice/internal/testenv"
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

// Every manifest of every overlay is accepted by a server-side dry-run apply.
func TestEveryOverlayAcceptedByServerSideDryRun(t *testing.T) {
	c := testenv.SharedCluster(t)
	ctx := context.Background()
	for _, f := range []string{"testdata/crd-issuers.yaml", "testdata/crd-certificates.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.InstallCRD(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
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

// watcherRole is the ClusterRole of deploy/base/rbac.yaml.
func watcherRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile("base/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufioReader(data))
	for {
		doc, err := r.Read()
		if err != nil {
			t.Fatalf("no ClusterRole sluice-watcher in base/rbac.yaml: %v", err)
		}
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal(doc, &role); err == nil && role.Kind == "ClusterRole" && role.Name == "sluice-watcher" {
			return &role
		}
	}
}

// runWatcher runs the watcher with a ServiceAccount bound to rules, and reports whether a
// client got the marker.
func runWatcher(t *testing.T, c *testenv.Cluster, ns, sa string, rules []rbacv1.PolicyRule) (bool, string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "deploy-test-" + sa}, Rules: rules}
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := c.ServiceAccountConfig(ctx, ns, sa)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := c.WriteKubeconfig(cfg, sa+"-"+ns)
	if err != nil {
		t.Fatal(err)
	}
	a := testenv.Addrs(t, 2)
	w := testenv.StartBinary(t, "watcher", "--kubeconfig", kc, "--listen", a[0], "--http-listen", a[1], "--sync-timeout", "8s")
	ctl := testenv.StartBinary(t, "sluicectl", "watch", "--addr", a[0], "--until-synced", "--quiet")
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	select {
	case <-ctl.Done():
	case <-w.Done():
	case <-wctx.Done():
	}
	ok := ctl.Exited() && ctl.ExitCode() == 0 && strings.Contains(ctl.Logs(), "initial-sync-complete")
	if !ok {
		// Without a marker the watcher must give up after its sync timeout; wait for it.
		if _, err := w.Wait(wctx); err != nil {
			t.Fatal(err)
		}
	}
	return ok, w.Logs()
}

// The watcher, with the token of a ServiceAccount bound only by deploy/'s ClusterRole,
// reaches the marker; with any one of its rules removed it does not, and says which kind.
// The rules come from the manifest, so the two cannot drift.
func TestWatcherClusterRoleIsExactlyEnough(t *testing.T) {
	c := testenv.SharedCluster(t)
	role := watcherRole(t)
	if len(role.Rules) < 5 {
		t.Fatalf("the ClusterRole has %d rules", len(role.Rules))
	}
	ns := c.Namespace(t)
	t.Run("all-rules", func(t *testing.T) {
		t.Parallel()
		if ok, logs := runWatcher(t, c, ns, "sluice-watcher", role.Rules); !ok {
			t.Fatalf("no marker with deploy/'s ClusterRole:\n%s", logs)
		}
	})
	for i, rule := range role.Rules {
		rules := append(append([]rbacv1.PolicyRule{}, role.Rules[:i]...), role.Rules[i+1:]...)
		t.Run("without-"+strings.Join(rule.Resources, ","), func(t *testing.T) {
			t.Parallel()
			ok, logs := runWatcher(t, c, ns, fmt.Sprintf("without-%d", i), rules)
			if ok {
				t.Fatalf("marker although the rule for %v was removed", rule.Resources)
			}
			if !strings.Contains(logs, "/"+rule.Resources[0]) || !strings.Contains(logs, "forbidden (403)") {
				t.Fatalf("the watcher did not name %s and the 403:\n%s", rule.Resources[0], logs)
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
