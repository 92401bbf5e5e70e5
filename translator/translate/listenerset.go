package translate

// A ListenerSet adds listeners to the Gateway it names, when that Gateway admits ListenerSets
// of its namespace (spec.allowedListeners; none by default). Its listeners are translated
// with the Gateway's, after the Gateway's own and in the sets' order (oldest first, then
// namespace/name), so that a conflict of port and hostname, or of port and protocol, is
// lost by the later listener. Routes attach to a ListenerSet's listeners only through a
// parentRef naming the ListenerSet, and to the Gateway's own listeners only through one
// naming the Gateway (docs/translation.md, "ListenerSet").

import (
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// setOut is what one ListenerSet contributes to its Gateway.
type setOut struct {
	ls         *gatewayv1.ListenerSet
	listeners  []*listenerOut
	conditions []*watchv1.Condition
	findings   []*configv1.Finding
	attached   bool // Accepted: counted in the Gateway's attachedListenerSets
}

// listenerSetsOf are the ListenerSets naming Gateway k as their parent, in precedence order:
// oldest first, then namespace/name.
func (t *Translator) listenerSetsOf(k nsName) []*gatewayv1.ListenerSet {
	var out []*gatewayv1.ListenerSet
	for sk := range t.gw.setsOf.all(k) {
		if ls := t.gw.listenerSets[sk]; ls != nil {
			out = append(out, ls)
		}
	}
	sort.Slice(out, func(i, j int) bool { return older(out[i], out[j]) })
	return out
}

// listenerSetParent is the Gateway a ListenerSet names; ok false when it names another kind.
func listenerSetParent(ls *gatewayv1.ListenerSet) (nsName, bool) {
	p := ls.Spec.ParentRef
	if (p.Group != nil && string(*p.Group) != GatewayGroup) || (p.Kind != nil && string(*p.Kind) != "Gateway") {
		return nsName{}, false
	}
	ns := ls.Namespace
	if p.Namespace != nil {
		ns = string(*p.Namespace)
	}
	return nsName{ns, string(p.Name)}, true
}

// admitsListenerSets says whether gw admits ListenerSets of namespace ns
// (spec.allowedListeners), and why not.
func (t *Translator) admitsListenerSets(gw *gatewayv1.Gateway, ns string) (bool, string) {
	from := gatewayv1.FromNamespaces("None")
	var sel *metav1.LabelSelector
	if a := gw.Spec.AllowedListeners; a != nil && a.Namespaces != nil {
		if a.Namespaces.From != nil {
			from = *a.Namespaces.From
		}
		sel = a.Namespaces.Selector
	}
	switch from {
	case gatewayv1.NamespacesFromAll:
		return true, ""
	case gatewayv1.NamespacesFromSame:
		if ns == gw.Namespace {
			return true, ""
		}
		return false, fmt.Sprintf("Gateway %s/%s admits ListenerSets of its own namespace only", gw.Namespace, gw.Name)
	case gatewayv1.NamespacesFromSelector:
		if sel == nil {
			return false, fmt.Sprintf("Gateway %s/%s admits ListenerSets by a selector it does not give", gw.Namespace, gw.Name)
		}
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return false, fmt.Sprintf("Gateway %s/%s: allowedListeners.namespaces.selector is invalid: %v", gw.Namespace, gw.Name, err)
		}
		if l, ok := t.gw.namespaces[ns]; ok && s.Matches(labels.Set(l)) {
			return true, ""
		}
		return false, fmt.Sprintf("Gateway %s/%s admits ListenerSets of the namespaces its selector matches, and %s is not one", gw.Namespace, gw.Name, ns)
	}
	return false, fmt.Sprintf("Gateway %s/%s admits no ListenerSets (spec.allowedListeners)", gw.Namespace, gw.Name)
}

// translateListenerSets translates the ListenerSets naming out's Gateway, after its own
// listeners (lc) and conditions.
func (t *Translator) translateListenerSets(out *gatewayOut, lc *listenerCtx) {
	gw := out.gw
	gwAccepted := len(out.conditions) > 0 && out.conditions[0].Status == condTrue
	// A namespace's labels decide which sets it admits: their change re-translates it.
	if a := gw.Spec.AllowedListeners; a != nil && a.Namespaces != nil && a.Namespaces.From != nil && *a.Namespaces.From == gatewayv1.NamespacesFromSelector {
		out.setsByLabels = true
	}
	for _, ls := range t.listenerSetsOf(nsName{gw.Namespace, gw.Name}) {
		k := nsName{ls.Namespace, ls.Name}
		so := &setOut{ls: ls}
		out.sets[k] = so
		gen := ls.Generation
		owner := gwRef("ListenerSet", ls.Namespace, ls.Name, string(ls.UID))
		add := func(field string, sev configv1.FindingSeverity, reason, cause string) {
			so.findings = append(so.findings, &configv1.Finding{Object: owner, Field: field, Cause: cause, Severity: sev, Reason: reason})
		}
		ok, why := t.admitsListenerSets(gw, ls.Namespace)
		if !ok {
			add("spec.parentRef", sevError, "NotAllowed", why)
			so.conditions = []*watchv1.Condition{cond(gatewayv1.ListenerSetConditionAccepted, condFalse, gatewayv1.ListenerSetReasonNotAllowed, why, gen), cond(gatewayv1.ListenerSetConditionProgrammed, condFalse, gatewayv1.ListenerSetReasonNotAllowed, why, gen)}
			continue
		}
		if !gwAccepted {
			msg := fmt.Sprintf("Gateway %s/%s is not accepted", gw.Namespace, gw.Name)
			add("spec.parentRef", sevError, "ParentNotAccepted", msg)
			so.conditions = []*watchv1.Condition{cond(gatewayv1.ListenerSetConditionAccepted, condFalse, gatewayv1.ListenerSetReasonParentNotAccepted, msg, gen), cond(gatewayv1.ListenerSetConditionProgrammed, condFalse, gatewayv1.ListenerSetReasonParentNotAccepted, msg, gen)}
			continue
		}
		slc := *lc
		slc.ns, slc.kind, slc.owner, slc.gen, slc.add, slc.age, slc.name, slc.set = ls.Namespace, "ListenerSet", owner, gen, add, ls.CreationTimestamp.Time, ls.Name, true
		served := 0
		for i, e := range ls.Spec.Listeners {
			lo := t.translateListener(&slc, i, gatewayv1.Listener(e))
			so.listeners = append(so.listeners, lo)
			if lo.served {
				served++
			}
		}
		switch {
		case served == 0:
			msg := "no listener is valid: see their conditions"
			so.conditions = []*watchv1.Condition{cond(gatewayv1.ListenerSetConditionAccepted, condFalse, gatewayv1.ListenerSetReasonListenersNotValid, msg, gen), cond(gatewayv1.ListenerSetConditionProgrammed, condFalse, gatewayv1.ListenerSetReasonListenersNotValid, msg, gen)}
		case served < len(so.listeners):
			so.attached = true
			so.conditions = []*watchv1.Condition{cond(gatewayv1.ListenerSetConditionAccepted, condTrue, gatewayv1.ListenerSetReasonListenersNotValid, "some listeners are not valid: see their conditions", gen), cond(gatewayv1.ListenerSetConditionProgrammed, condTrue, gatewayv1.ListenerSetReasonProgrammed, "listener set programmed", gen)}
		default:
			so.attached = true
			so.conditions = []*watchv1.Condition{cond(gatewayv1.ListenerSetConditionAccepted, condTrue, gatewayv1.ListenerSetReasonAccepted, "listener set accepted", gen), cond(gatewayv1.ListenerSetConditionProgrammed, condTrue, gatewayv1.ListenerSetReasonProgrammed, "listener set programmed", gen)}
		}
	}
}

// setListenerSet records a ListenerSet (nil removes it): the Gateways it named and names are
// re-translated (its listeners and status are theirs), and the routes naming it.
func (t *Translator) setListenerSet(k nsName, ls *gatewayv1.ListenerSet) {
	g := &t.gw
	if old := g.listenerSets[k]; old != nil {
		if p, ok := listenerSetParent(old); ok {
			g.setsOf.remove(p, k)
			g.dirtyGateways.add(p)
		}
	}
	if ls == nil {
		delete(g.listenerSets, k)
	} else {
		g.listenerSets[k] = ls
		if p, ok := listenerSetParent(ls); ok {
			g.setsOf.add(p, k)
			g.dirtyGateways.add(p)
		}
	}
	for r := range g.setRoutes.all(k) {
		g.dirtyRoutes.add(r)
	}
	key := listenerSetKey(k)
	t.dirtyFindings.add(key)
	g.statusDirty.add(key)
}

func listenerSetKey(k nsName) string { return "ListenerSet/" + k.ns + "/" + k.name }

// setsChanged marks the findings and statuses of out's ListenerSets to be built again.
func (t *Translator) setsChanged(out *gatewayOut) {
	for k := range out.sets {
		key := listenerSetKey(k)
		t.dirtyFindings.add(key)
		t.gw.statusDirty.add(key)
	}
}

// listenerSetOut is what ListenerSet k contributes to the Gateway of ours it names; nil when
// it names none.
func (t *Translator) listenerSetOut(k nsName) *setOut {
	ls := t.gw.listenerSets[k]
	if ls == nil {
		return nil
	}
	p, ok := listenerSetParent(ls)
	if !ok {
		return nil
	}
	if o := t.gw.gwOut[p]; o != nil && o.ours {
		return o.sets[k]
	}
	return nil
}

func isListenerSetParent(pr gatewayv1.ParentReference) bool {
	return pr.Group != nil && string(*pr.Group) == GatewayGroup && pr.Kind != nil && string(*pr.Kind) == "ListenerSet"
}
