package controller

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-io/sluice/watcher/kinds"
)

// Scenario 4 (docs/design.md) through client-go's own machinery: a real SharedIndexInformer,
// its real handler registration and the kinds' transform, over a list that a fake
// ListerWatcher answers (and a watch that stays quiet). The barrier waits for the
// registration's HasSynced, which says the handler, not only the informer's store, has every
// object of the initial list; the first snapshot after the marker holds them all. The fake
// of TestLastInitialObjectIsInTheFirstSnapshot acts as its own registration; this one cannot.
func TestFirstSnapshotHoldsTheInitialListThroughARealInformer(t *testing.T) {
	gvks := []schema.GroupVersionKind{{Version: "v1", Kind: "Service"}, {Version: "v1", Kind: "ConfigMap"}}
	const perKind = 200
	for run := 0; run < 20; run++ {
		var watched []WatchedKind
		for _, gvk := range gvks {
			k := &kinds.Kind{Spec: kinds.Spec{GVR: gvk.GroupVersion().WithResource(gvk.Kind), Required: true}, GVK: gvk, Served: true}
			lw := &cache.ListWatch{
				ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
					if gvk.Kind == "Service" {
						l := &corev1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: "1000"}}
						for i := range perKind {
							l.Items = append(l.Items, corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("s%d", i), ResourceVersion: fmt.Sprint(i + 1)}})
						}
						return l, nil
					}
					l := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "1000"}}
					for i := range perKind {
						l.Items = append(l.Items, corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("c%d", i), ResourceVersion: fmt.Sprint(i + 1)},
							Data: map[string]string{"ca.crt": "x"}})
					}
					return l, nil
				},
				WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
					if o.SendInitialEvents != nil && *o.SendInitialEvents {
						// The apiservers of old answer a streaming list so; the reflector lists.
						return nil, apierrors.NewBadRequest("sendInitialEvents is not supported")
					}
					return watch.NewFake(), nil
				},
			}
			var example runtime.Object = &corev1.Service{}
			if gvk.Kind == "ConfigMap" {
				example = &corev1.ConfigMap{}
			}
			inf := cache.NewSharedIndexInformer(lw, example, 0, cache.Indexers{})
			if err := inf.SetTransform(k.Transform()); err != nil {
				t.Fatal(err)
			}
			watched = append(watched, WatchedKind{Kind: k, Informers: []Informer{inf}})
		}
		if got, want := firstSnapshot(t, run, watched), perKind*len(gvks); got != want {
			t.Fatalf("run %d: the first snapshot after the barrier holds %d objects, want %d", run, got, want)
		}
	}
}
