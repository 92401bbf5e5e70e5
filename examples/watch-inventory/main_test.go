package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

// The public client's example against a real kube-apiserver and a real watcher process: it
// prints the inventory it verified, and that inventory is the namespace's objects as the
// apiserver lists them (docs/design.md, "The watch stream": the marker's inventory).
func TestExampleFollowsARealWatcherToItsVerifiedInventory(t *testing.T) {
	c := testenv.SharedCluster(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	for i := range 7 {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i)}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
		if _, err := c.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	a := testenv.Addrs(t, 2)
	testenv.StartBinary(t, "watcher", "--kubeconfig", c.AdminKubeconfig, "--listen", a[0], "--http-listen", a[1],
		"--namespaces", ns, "--kinds", "networking.k8s.io/v1/ingresses,v1/services")
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"--addr", a[0]}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	t.Logf("the example printed:\n%s", stdout.String())

	// The oracle: the inventory of the Services the apiserver lists, computed here.
	list, err := c.Client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kind := &watchv1.GroupVersionKind{Version: "v1", Kind: "Service"}
	var objs []*watchv1.Object
	for _, s := range list.Items {
		objs = append(objs, &watchv1.Object{Kind: kind, Namespace: s.Namespace, Name: s.Name, ResourceVersion: s.ResourceVersion})
	}
	want := watchstream.InventoryOf(kind, objs)
	for _, line := range []string{
		fmt.Sprintf("%-45s %6d  sha256:%x", "/v1/Service", 7, want.GetDigest()),
		fmt.Sprintf("%-45s %6d  sha256:%x", "networking.k8s.io/v1/Ingress", 0, watchstream.InventoryOf(nil, nil).GetDigest()),
	} {
		if !strings.Contains(stdout.String(), line) {
			t.Errorf("the output lacks %q", line)
		}
	}
	if !strings.Contains(stdout.String(), "7 objects, verified complete") {
		t.Errorf("the output does not say 7 objects were verified")
	}
}
