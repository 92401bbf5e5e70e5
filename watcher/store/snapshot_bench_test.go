package store

import (
	"fmt"
	"testing"

	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// BenchmarkSnapshot is what a subscriber joining a large store costs the owner: the copy of
// every object and its sort into stream order (docs/design.md, "Cold start": a translator
// that restarts against a warm watcher is the common cold start).
func BenchmarkSnapshot(b *testing.B) {
	kinds := []*watchv1.GroupVersionKind{{Version: "v1", Kind: "Service"}, {Group: "discovery.k8s.io", Version: "v1", Kind: "EndpointSlice"},
		{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}}
	st, err := New(Config{Epoch: "e", Kinds: kinds})
	if err != nil {
		b.Fatal(err)
	}
	const n = 100000
	for i := range n {
		for _, k := range kinds {
			if _, err := st.Upsert(&watchv1.Object{Kind: k, Namespace: "bench", Name: fmt.Sprintf("app%d", i), Uid: fmt.Sprint(i), ResourceVersion: "1"}); err != nil {
				b.Fatal(err)
			}
		}
	}
	st.MarkSynced()
	b.ResetTimer()
	for b.Loop() {
		sub, err := st.Subscribe(Request{})
		if err != nil {
			b.Fatal(err)
		}
		if got := len(sub.Snapshot()); got != 3*n {
			b.Fatalf("snapshot of %d objects, want %d", got, 3*n)
		}
		st.Unsubscribe(sub)
	}
}
