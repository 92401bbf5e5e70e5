package testenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// GatewayAPIInstallFile is the Gateway API's standard channel as users apply it, relative to
// the repository root (written by `make gateway-crds` from the pinned module).
const GatewayAPIInstallFile = "deploy/gateway-api/standard-install.yaml"

// installGVR maps the kinds of the standard channel to their resources: its CRDs and the
// admission policy (and binding) that guards their upgrades.
var installGVR = map[string]schema.GroupVersionResource{
	"apiextensions.k8s.io/v1/CustomResourceDefinition":                 crdGVR,
	"admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy":        {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"},
	"admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding": {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"},
}

// gatewayAPIObjects reads the standard channel's objects, in file order.
func gatewayAPIObjects() ([]*unstructured.Unstructured, error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(root, GatewayAPIInstallFile))
	if err != nil {
		return nil, fmt.Errorf("testenv: %w (run 'make gateway-crds')", err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("testenv: %s: %w", GatewayAPIInstallFile, err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, fmt.Errorf("testenv: %s: %w", GatewayAPIInstallFile, err)
		}
		if len(obj) == 0 {
			continue // the header comment
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
}

func gvrOf(u *unstructured.Unstructured) (schema.GroupVersionResource, error) {
	gvr, ok := installGVR[u.GetAPIVersion()+"/"+u.GetKind()]
	if !ok {
		return gvr, fmt.Errorf("testenv: %s has a %s %s, which the helper does not know how to create", GatewayAPIInstallFile, u.GetAPIVersion(), u.GetKind())
	}
	return gvr, nil
}

// InstallGatewayAPI creates the Gateway API's standard channel (GatewayAPIInstallFile) on c,
// as `kubectl apply` of that file would, and waits until every CRD is Established and
// discovery serves each of its served versions. Objects that exist already are kept.
func (c *Cluster) InstallGatewayAPI(ctx context.Context) error {
	objs, err := gatewayAPIObjects()
	if err != nil {
		return err
	}
	dyn := c.Dynamic()
	for _, u := range objs {
		gvr, err := gvrOf(u)
		if err != nil {
			return err
		}
		if _, err := dyn.Resource(gvr).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("testenv: create %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, u := range objs {
		if u.GetKind() != "CustomResourceDefinition" {
			continue
		}
		if err := c.waitCRD(ctx, u, true); err != nil {
			return err
		}
	}
	return nil
}

// DeleteGatewayAPI deletes the standard channel's objects from c and waits until every CRD
// is gone and discovery no longer serves any of its versions (the apiserver deletes the
// custom resources with their CRD).
func (c *Cluster) DeleteGatewayAPI(ctx context.Context) error {
	objs, err := gatewayAPIObjects()
	if err != nil {
		return err
	}
	dyn := c.Dynamic()
	// The custom resources first: a CRD's deletion waits for the apiserver's finalizer to
	// delete them, and that finalizer retries with a backoff that grows to minutes when an
	// attempt fails under load (seen here); with no instance left it has nothing to retry.
	for _, u := range objs {
		if u.GetKind() != "CustomResourceDefinition" {
			continue
		}
		if err := deleteInstances(ctx, dyn, u); err != nil {
			return err
		}
	}
	// In reverse file order: the admission policy that guards the CRDs goes before them.
	for i := len(objs) - 1; i >= 0; i-- {
		u := objs[i]
		gvr, err := gvrOf(u)
		if err != nil {
			return err
		}
		if err := dyn.Resource(gvr).Delete(ctx, u.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("testenv: delete %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, u := range objs {
		if u.GetKind() != "CustomResourceDefinition" {
			continue
		}
		// The apiserver's CRD finalizer still hangs now and then under load (seen in CI after
		// the instances were gone); its instances are deleted above, so after a while the
		// finalizer is taken off by hand, as an operator would.
		wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
		err := c.waitCRD(wctx, u, false)
		wcancel()
		if err == nil {
			continue
		}
		if err := deleteInstances(ctx, dyn, u); err != nil {
			return err
		}
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		if _, err := dyn.Resource(crdGVR).Patch(ctx, u.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("testenv: remove the finalizer of CRD %s: %w", u.GetName(), err)
		}
		if err := c.waitCRD(ctx, u, false); err != nil {
			return err
		}
	}
	return nil
}

// deleteInstances deletes every custom resource of crd, in every namespace, at its storage
// version.
func deleteInstances(ctx context.Context, dyn dynamic.Interface, crd *unstructured.Unstructured) error {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		if storage, _, _ := unstructured.NestedBool(vm, "storage"); !storage {
			continue
		}
		name, _, _ := unstructured.NestedString(vm, "name")
		gvr := schema.GroupVersionResource{Group: group, Version: name, Resource: plural}
		err := dyn.Resource(gvr).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("testenv: delete every %s: %w", gvr.GroupResource(), err)
		}
	}
	return nil
}

// waitCRD waits until crd is Established and served by discovery at every served version
// (present), or until it is gone and served at none (!present).
func (c *Cluster) waitCRD(ctx context.Context, crd *unstructured.Unstructured, present bool) error {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	dyn := c.Dynamic()
	var last string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err := dyn.Resource(crdGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if present {
				last = "the CRD does not exist"
				return false, nil
			}
		case err != nil:
			last = err.Error()
			return false, nil
		case !present:
			last = "the CRD still exists"
			return false, nil
		case !established(got):
			last = "the CRD is not Established"
			return false, nil
		}
		for _, v := range versions {
			vm, _ := v.(map[string]any)
			name, _, _ := unstructured.NestedString(vm, "name")
			if served, _, _ := unstructured.NestedBool(vm, "served"); !served {
				continue
			}
			gv := group + "/" + name
			if servedBy(c, gv, plural) != present {
				last = fmt.Sprintf("discovery of %s: %s served %v, want %v", gv, plural, !present, present)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		state := "installed"
		if !present {
			state = "deleted"
		}
		return fmt.Errorf("testenv: CRD %s not %s: %w (last: %s)", crd.GetName(), state, err, last)
	}
	return nil
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, cond := range conds {
		m, _ := cond.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

func servedBy(c *Cluster, gv, plural string) bool {
	list, err := c.Client.Discovery().ServerResourcesForGroupVersion(gv)
	if err != nil {
		return false
	}
	for _, r := range list.APIResources {
		if r.Name == plural {
			return true
		}
	}
	return false
}

// InstallGatewayAPICRDs installs the Gateway API's standard channel on c (InstallGatewayAPI)
// and fails the test when it cannot.
func InstallGatewayAPICRDs(t testing.TB, c *Cluster) {
	t.Helper()
	if err := c.InstallGatewayAPI(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// DeleteGatewayAPICRDs deletes the Gateway API's standard channel from c (DeleteGatewayAPI)
// and fails the test when it cannot.
func DeleteGatewayAPICRDs(t testing.TB, c *Cluster) {
	t.Helper()
	if err := c.DeleteGatewayAPI(context.Background()); err != nil {
		t.Fatal(err)
	}
}
