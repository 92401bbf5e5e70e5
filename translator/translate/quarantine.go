package translate

import (
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// ReasonRejectedByDataPlane is the finding reason, and an HTTPRoute's Accepted=False
// condition reason, of an object left out because a data plane refused what it became: the
// data plane holds a rule the translator does not know. The object is left out until it
// changes (the engine lifts the quarantine then).
const ReasonRejectedByDataPlane = "RejectedByDataPlane"

// Quarantinable says whether an object of kind can be left out on a data plane's word: the
// objects a data plane's refusal is traced to (the source of a route or a certificate).
func Quarantinable(kind string) bool {
	return kind == "Ingress" || kind == "HTTPRoute" || kind == "Secret"
}

// SetQuarantined leaves the object of kind (Ingress, HTTPRoute or Secret) out, as if
// invalid, because a data plane rejected it (why, the data plane's error); an empty why
// takes it back. Options.Quarantined gives the same at construction. An Ingress or HTTPRoute
// left out is served by no route (an HTTPRoute reports Accepted=False on every parent), a
// Secret's certificate is not served; each, while it exists, carries the finding "rejected
// by the data plane".
func (t *Translator) SetQuarantined(kind, namespace, name, why string) {
	if !Quarantinable(kind) {
		return
	}
	key := kind + "/" + namespace + "/" + name
	q := t.quarantines()
	if why == "" {
		if _, ok := q[key]; !ok {
			return
		}
		delete(q, key)
	} else {
		q[key] = quarantineFinding(kind, namespace, name, why)
	}
	k := nsName{namespace, name}
	switch kind {
	case "Ingress":
		t.dirtyIngresses.add(k)
	case "HTTPRoute":
		t.gw.dirtyRoutes.add(k)
	case "Secret":
		t.dirtySecrets.add(k)
	}
	t.dirtyFindings.add(key)
}

// present says whether the quarantinable object of findings key is in the view: only then
// does it carry its quarantine's finding.
func (t *Translator) present(key string) bool {
	kind, rest, _ := strings.Cut(key, "/")
	ns, name, _ := strings.Cut(rest, "/")
	k := nsName{ns, name}
	switch kind {
	case "Ingress":
		_, ok := t.ingresses[k]
		return ok
	case "HTTPRoute":
		_, ok := t.gw.routes[k]
		return ok
	case "Secret":
		_, ok := t.secrets[k]
		return ok
	}
	return false
}

// quarantines are the objects left out, by findings key: Options.Quarantined until the
// first SetQuarantined.
func (t *Translator) quarantines() map[string]*configv1.Finding {
	if t.quarantined == nil {
		t.quarantined = quarantinedOf(t.opts.Quarantined)
	}
	return t.quarantined
}

func quarantineFinding(kind, namespace, name, why string) *configv1.Finding {
	return &configv1.Finding{Object: &configv1.ObjectRef{Kind: kind, Namespace: namespace, Name: name},
		Cause:    "rejected by the data plane: " + why + "; left out until the object changes",
		Severity: sevError, Reason: ReasonRejectedByDataPlane}
}

// quarantinedOf turns Options.Quarantined (findings keys, "Kind/namespace/name", to the data
// plane's error) into findings.
func quarantinedOf(q map[string]string) map[string]*configv1.Finding {
	out := map[string]*configv1.Finding{}
	for key, why := range q {
		o := contract.ObjectOfKey(key)
		if why == "" || !Quarantinable(o.GetKind()) || strings.Contains(o.GetName(), "/") {
			continue
		}
		out[key] = quarantineFinding(o.GetKind(), o.GetNamespace(), o.GetName(), why)
	}
	return out
}

// quarantineRoute leaves out an HTTPRoute a data plane rejected: it claims nothing, refers
// to no backend, attaches nowhere, and every parent says Accepted=False (the finding is the
// object's own, buildFindings).
func (t *Translator) quarantineRoute(out *routeOut) *routeOut {
	rt := out.rt
	q, ok := t.quarantines()[httpRouteKey(nsName{rt.Namespace, rt.Name})]
	if !ok || !out.ours {
		return out
	}
	out.claims, out.refs = map[string][]gwClaim{}, nil
	for _, p := range out.parents {
		p.attached = nil
		conds := []*watchv1.Condition{cond(gatewayv1.RouteConditionAccepted, condFalse, ReasonRejectedByDataPlane, q.GetCause(), rt.Generation)}
		for _, c := range p.conditions {
			if c.GetType() == string(gatewayv1.RouteConditionResolvedRefs) {
				conds = append(conds, c)
			}
		}
		p.conditions = conds
	}
	return out
}
