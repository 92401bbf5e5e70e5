package translate

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-io/sluice/internal/contract"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// routesOn is the names of the routes served on host, stop routes left out.
func routesOn(tr *Translator, host string) []string {
	var out []string
	for _, vh := range tr.State().Resources().GetVirtualHosts() {
		if vh.GetHostname() == host {
			for _, r := range vh.GetRoutes() {
				// The listener's stop route (listener isolation) is there whoever attaches.
				if !r.GetStop() {
					out = append(out, r.GetName())
				}
			}
		}
	}
	return out
}

// routeAccepted is the Accepted condition of an HTTPRoute's first parent.
func routeAccepted(t *testing.T, tr *Translator, ns, name string) *watchv1.Condition {
	t.Helper()
	lb, manage := tr.PublishedAddresses()
	st := tr.GatewayStatus(&watchv1.ObjectKey{Kind: "HTTPRoute", Namespace: ns, Name: name}, contract.TypedAddresses(lb), manage)
	for _, c := range st.GetParents()[0].GetConditions() {
		if c.GetType() == "Accepted" {
			return c
		}
	}
	t.Fatalf("HTTPRoute %s/%s has no Accepted condition: %v", ns, name, st)
	return nil
}

// A Selector listener admits the routes of the namespaces its selector matches, and a change
// of a Namespace's labels re-translates that namespace's routes alone: relabelled out, its
// route is detached (NotAllowedByListeners) and no longer served; relabelled in, another
// namespace's route attaches. Each step equals a full translation.
func TestRelabellingANamespaceMovesItsRoutesInAndOutOfASelectorListener(t *testing.T) {
	in := load(t, "gateway-selector.yaml")
	tr := New(goldenOpts)
	for _, o := range in.objects() {
		tr.Set(o)
	}
	tr.Build()
	const host = "selected.example.com"
	if got := routesOn(tr, host); len(got) != 1 || routeAccepted(t, tr, "shop", "store").GetStatus() != condTrue {
		t.Fatalf("routes on %s: %v, want shop/store's alone, attached", host, got)
	}
	tr.TakeGatewayStatusChanges()

	relabel := func(name string, labels map[string]string) []string {
		tr.Set(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
		for i, ns := range in.Namespaces {
			if ns.Name == name {
				in.Namespaces[i] = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
			}
		}
		tr.Build()
		if want := Translate(in, goldenOpts); Hash(want) != tr.State().Hash() {
			t.Fatalf("after relabelling %s: the incremental state differs from a full translation:\n%s", name,
				diffLines(string(render(t, want)), string(render(t, tr.State().Resources()))))
		}
		var changed []string
		for _, k := range tr.TakeGatewayStatusChanges() {
			changed = append(changed, k.GetKind()+"/"+k.GetNamespace()+"/"+k.GetName())
		}
		return changed
	}

	changed := relabel("shop", map[string]string{"team": "blog"})
	if got := routesOn(tr, host); len(got) != 0 {
		t.Errorf("routes on %s after shop lost its label: %v, want none", host, got)
	}
	if c := routeAccepted(t, tr, "shop", "store"); c.GetStatus() != condFalse || c.GetReason() != "NotAllowedByListeners" {
		t.Errorf("shop/store after shop lost its label: Accepted %s %s, want False NotAllowedByListeners", c.GetStatus(), c.GetReason())
	}
	if !slices.Contains(changed, "HTTPRoute/shop/store") || slices.Contains(changed, "HTTPRoute/blog/posts") {
		t.Errorf("statuses changed by relabelling shop: %v, want shop's route and not blog's", changed)
	}

	relabel("blog", map[string]string{"team": "shop"})
	if got := routesOn(tr, host); len(got) != 1 || routeAccepted(t, tr, "blog", "posts").GetStatus() != condTrue {
		t.Errorf("routes on %s after blog took the label: %v, want blog/posts's, attached", host, got)
	}

	tr.Remove(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "blog"}})
	in.Namespaces = slices.DeleteFunc(in.Namespaces, func(ns *corev1.Namespace) bool { return ns.Name == "blog" })
	tr.Build()
	if got := routesOn(tr, host); len(got) != 0 || routeAccepted(t, tr, "blog", "posts").GetReason() != "NotAllowedByListeners" {
		t.Errorf("routes on %s after blog's Namespace went away: %v, want none and blog/posts not allowed", host, got)
	}
	if Hash(Translate(in, goldenOpts)) != tr.State().Hash() {
		t.Error("after the Namespace went away: the incremental state differs from a full translation")
	}
}
