package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-io/sluice/internal/watchstream"
	"github.com/sluice-io/sluice/watcher/kinds"
	"github.com/sluice-io/sluice/watcher/refs"
	"github.com/sluice-io/sluice/watcher/store"
)

// docs/design.md, the watch stream: a TLS Secret is on the stream only while a watched route
// object references it; its upsert comes before the event that first references it, and a
// delete follows when the last reference goes. The snapshot and the marker's inventory count
// exactly the Secrets served.
func TestSecretsReachTheStoreOnlyWhileReferenced(t *testing.T) {
	ingressKind := &kinds.Kind{Spec: kinds.Spec{GVR: schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}, Required: true},
		GVK: schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}, Served: true}
	secretKind := testKind("Secret")
	ingInf, secInf := newScriptedInformer(), newScriptedInformer()
	c, err := New(Config{Logger: hclog.NewNullLogger(), SyncTimeout: time.Hour, Store: store.Config{Epoch: "e1"},
		Kinds: []WatchedKind{{Kind: ingressKind, Informers: []Informer{ingInf}}, {Kind: secretKind, Informers: []Informer{secInf}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	ing, sec := <-ingInf.handlers, <-secInf.handlers

	ingress := func(name, rv string, secrets ...string) *kinds.Stored {
		s := stored(ingressKind, name, rv)
		if len(secrets) > 0 {
			s.Refs = &refs.Refs{}
			for _, n := range secrets {
				s.Refs.Secrets = append(s.Refs.Secrets, refs.SecretKey{Namespace: "ns", Name: n})
			}
		}
		return s
	}
	secret := func(name, rv string) *kinds.Stored { return stored(secretKind, name, rv) }

	// The initial lists: the Ingress comes before its Secret, as two informers may order them.
	ing.OnAdd(ingress("web", "1", "used"), true)
	sec.OnAdd(secret("used", "2"), true)
	sec.OnAdd(secret("unused", "3"), true)
	sec.OnAdd(secret("ca", "4"), true)
	close(ingInf.synced)
	close(secInf.synced)
	select {
	case <-c.Synced():
	case <-time.After(watchdog):
		t.Fatal("no barrier")
	}
	sub, err := c.Subscribe(ctx, store.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range sub.Snapshot() {
		names = append(names, o.GetKind().GetKind()+" "+o.GetName())
	}
	if got, want := strings.Join(names, ", "), "Ingress web, Secret used"; got != want {
		t.Fatalf("snapshot: %s; want %s (no unreferenced Secret)", got, want)
	}
	for _, inv := range sub.StartInventory() {
		if inv.GetKind().GetKind() == "Secret" && inv.GetCount() != 1 {
			t.Fatalf("the marker's inventory counts %d Secrets; 1 is served", inv.GetCount())
		}
	}

	var pending []store.Event
	next := func(want ...string) {
		t.Helper()
		for _, w := range want {
			for len(pending) == 0 {
				select {
				case <-sub.Ready():
					pending = sub.Take()
				case <-time.After(watchdog):
					t.Fatalf("no event; want %q", w)
				}
			}
			ev := pending[0]
			pending = pending[1:]
			typ := map[store.EventType]string{store.EventUpsert: "upsert", store.EventDelete: "delete"}[ev.Type]
			if got := fmt.Sprintf("%s %s %s@%s", typ, ev.Object.GetKind().GetKind(), ev.Object.GetName(), ev.Object.GetResourceVersion()); got != w {
				t.Fatalf("event %q; want %q", got, w)
			}
		}
	}
	// A new reference: the Secret first, then the Ingress that names it.
	ing.OnAdd(ingress("late", "10", "unused"), false)
	next("upsert Secret unused@3", "upsert Ingress late@10")
	// A referenced Secret's change is on the stream; an unreferenced one's is not.
	sec.OnUpdate(secret("ca", "4"), secret("ca", "11"))
	sec.OnUpdate(secret("unused", "3"), secret("unused", "12"))
	next("upsert Secret unused@12")
	// The last reference goes: the Ingress's change, then the Secret's delete.
	ing.OnUpdate(ingress("late", "10", "unused"), ingress("late", "13"))
	next("upsert Ingress late@13", "delete Secret unused@12")
	// A second Ingress naming "used", then the first deleted: still served.
	ing.OnAdd(ingress("also", "14", "used"), false)
	ing.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: ingress("web", "1", "used")})
	next("upsert Ingress also@14", "delete Ingress web@1")
	// A served Secret deleted, then created again while referenced.
	sec.OnDelete(secret("used", "2"))
	sec.OnAdd(secret("used", "15"), false)
	next("delete Secret used@2", "upsert Secret used@15")
	ing.OnDelete(ingress("also", "14", "used"))
	next("delete Ingress also@14", "delete Secret used@15")
	// The unreferenced ones never came: the next event is this one.
	ing.OnAdd(ingress("plain", "16"), false)
	next("upsert Ingress plain@16")
	if n := c.store.Count(watchstream.KindKey(secretKind.Wire())); n != 0 {
		t.Fatalf("store holds %d Secrets with no reference left", n)
	}
}

// docs/design.md, the watch stream: the Secrets the operator named as default certificates
// (ServedSecrets) are on the stream with no route object referencing them, and no other
// unreferenced Secret is.
func TestServedSecretsReachTheStoreUnreferenced(t *testing.T) {
	r := startRunningKinds(t, []string{"Secret"}, []int{1}, func(c *Config) {
		c.ServedSecrets = []refs.SecretKey{{Namespace: "ns", Name: "default-cert"}}
	})
	sec := r.handlers[0][0]
	sec.OnAdd(stored(r.kinds[0], "default-cert", "1"), true)
	sec.OnAdd(stored(r.kinds[0], "other", "2"), true)
	close(r.infs[0][0].synced)
	select {
	case <-r.c.Synced():
	case <-time.After(watchdog):
		t.Fatal("no barrier")
	}
	sub, err := r.c.Subscribe(context.Background(), store.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range sub.Snapshot() {
		names = append(names, o.GetKind().GetKind()+" "+o.GetName())
	}
	if got, want := strings.Join(names, ", "), "Secret default-cert"; got != want {
		t.Fatalf("snapshot: %s; want %s", got, want)
	}
}
