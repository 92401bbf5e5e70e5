package translate

// A listener's allowedRoutes.namespaces.from Selector admits routes from the namespaces whose
// labels its selector matches. The labels come from the watched Namespaces; an HTTPRoute
// that was judged by its namespace's labels is indexed under that namespace, so that a
// change of the labels re-translates exactly those routes.

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// setNamespace records a Namespace's labels (nil removes it) and re-translates the
// HTTPRoutes of that namespace that a Selector listener judged by them.
func (t *Translator) setNamespace(name string, ns *corev1.Namespace) {
	g := &t.gw
	if ns == nil {
		delete(g.namespaces, name)
	} else {
		l := ns.Labels
		if l == nil {
			l = map[string]string{}
		}
		g.namespaces[name] = l
	}
	for k := range g.nsRoutes.all(name) {
		g.dirtyRoutes.add(k)
	}
	// A Gateway admitting ListenerSets by their namespace's labels judges them again.
	for k, o := range g.gwOut {
		if o.setsByLabels {
			g.dirtyGateways.add(k)
		}
	}
}

// listenerSelector reads a Selector listener's allowedRoutes.namespaces.selector: why it is
// not usable, or the selector.
func listenerSelector(ar *gatewayv1.AllowedRoutes) (labels.Selector, string) {
	sel := ar.Namespaces.Selector
	if sel == nil {
		return nil, "allowedRoutes.namespaces.from Selector needs allowedRoutes.namespaces.selector"
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, fmt.Sprintf("allowedRoutes.namespaces.selector is invalid: %v", err)
	}
	return s, ""
}

// selectedBy reports whether listener lo admits routes of namespace ns by its selector. A
// namespace the translator has not seen (Namespaces not watched) is admitted by none.
func (t *Translator) selectedBy(lo *listenerOut, ns string) bool {
	if lo.selector == nil {
		return false
	}
	l, ok := t.gw.namespaces[ns]
	return ok && lo.selector.Matches(labels.Set(l))
}
