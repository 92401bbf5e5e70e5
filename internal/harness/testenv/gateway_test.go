package testenv_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sluice-io/sluice/internal/harness/testenv"
)

// The Gateway API's standard channel installs on the test apiserver: once the helper
// returns, the four kinds Sluice watches are served (a Gateway can be created at v1, a
// ReferenceGrant listed at v1 and v1beta1); once deleted, discovery serves none of them.
func TestGatewayAPIInstallsAndDeletes(t *testing.T) {
	c := testenv.SharedCluster(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	testenv.InstallGatewayAPICRDs(t, c)
	testenv.InstallGatewayAPICRDs(t, c) // again: what exists is kept
	gw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": "gw", "namespace": ns},
		"spec": map[string]any{"gatewayClassName": "sluice", "listeners": []any{
			map[string]any{"name": "http", "protocol": "HTTP", "port": int64(80)}}},
	}}
	gvr := func(v, r string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: v, Resource: r}
	}
	if _, err := c.Dynamic().Resource(gvr("v1", "gateways")).Namespace(ns).Create(ctx, gw, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create a Gateway: %v", err)
	}
	for _, v := range []string{"v1", "v1beta1"} {
		if _, err := c.Dynamic().Resource(gvr(v, "referencegrants")).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("list ReferenceGrants at %s: %v", v, err)
		}
	}
	testenv.DeleteGatewayAPICRDs(t, c)
	for _, gv := range []string{"gateway.networking.k8s.io/v1", "gateway.networking.k8s.io/v1beta1"} {
		if _, err := c.Client.Discovery().ServerResourcesForGroupVersion(gv); !apierrors.IsNotFound(err) {
			t.Fatalf("discovery of %s after the delete: %v, want 404", gv, err)
		}
	}
}
