package translate

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// This file is the Gateway API's BackendTLSPolicy (docs/translation.md, "BackendTLSPolicy"):
// an HTTPRoute's backendRef to a Service port a policy targets speaks TLS to the endpoints,
// verified against the policy's CA certificates (ConfigMaps' ca.crt) or the system's, for
// its hostname (sent as SNI) or its subjectAltNames. The backend is one of the policy's own
// (policySep). Ingresses are not governed by BackendTLSPolicies.

// policySep follows tlsSuffix in the name of a backend a BackendTLSPolicy governs:
// NS/SERVICE:PORT+tls@BackendTLSPolicy/NAME, one per policy and Service port.
const policySep = verifiedSep + "BackendTLSPolicy/"

func policyKey(k nsName) string { return "BackendTLSPolicy/" + k.ns + "/" + k.name }

// policyState is the translator's view of BackendTLSPolicies and the ConfigMaps they read.
type policyState struct {
	policies   map[nsName]*gatewayv1.BackendTLSPolicy
	configMaps map[nsName]*corev1.ConfigMap
	targets    index[nsName, nsName] // Service -> policies targeting it
	caUsers    index[nsName, nsName] // ConfigMap -> policies naming it
	// resolved memoises each policy's resolution (its CA bundle checked once, not once per
	// backendRef and status), until the policy or a ConfigMap it names changes.
	resolved map[nsName]policyResolution
}

func newPolicyState() policyState {
	return policyState{policies: map[nsName]*gatewayv1.BackendTLSPolicy{}, configMaps: map[nsName]*corev1.ConfigMap{},
		targets: newIndex[nsName, nsName](), caUsers: newIndex[nsName, nsName](), resolved: map[nsName]policyResolution{}}
}

// policyTargets are the Services a policy targets (other kinds are never governed).
func policyTargets(p *gatewayv1.BackendTLSPolicy) []nsName {
	if p == nil {
		return nil
	}
	var out []nsName
	for _, r := range p.Spec.TargetRefs {
		if r.Group == "" && r.Kind == "Service" {
			out = append(out, nsName{p.Namespace, string(r.Name)})
		}
	}
	return out
}

func policyCAs(p *gatewayv1.BackendTLSPolicy) []nsName {
	if p == nil {
		return nil
	}
	var out []nsName
	for _, r := range p.Spec.Validation.CACertificateRefs {
		if r.Group == "" && r.Kind == "ConfigMap" {
			out = append(out, nsName{p.Namespace, string(r.Name)})
		}
	}
	return out
}

// setPolicy records a BackendTLSPolicy (nil: removed). Every HTTPRoute naming a Service it
// targeted or targets is translated again, and every policy on those Services reports again
// (which one wins may have changed).
func (t *Translator) setPolicy(k nsName, p *gatewayv1.BackendTLSPolicy) {
	ps := &t.gw.pol
	old := ps.policies[k]
	for _, s := range policyTargets(old) {
		ps.targets.remove(s, k)
		t.policyTargetChanged(s)
	}
	for _, c := range policyCAs(old) {
		ps.caUsers.remove(c, k)
	}
	delete(ps.resolved, k)
	if p == nil {
		delete(ps.policies, k)
	} else {
		ps.policies[k] = p
	}
	for _, s := range policyTargets(p) {
		ps.targets.add(s, k)
		t.policyTargetChanged(s)
	}
	for _, c := range policyCAs(p) {
		ps.caUsers.add(c, k)
	}
	t.gw.statusDirty.add(policyKey(k))
}

// setConfigMap records a ConfigMap (nil: removed): the policies naming it resolve again.
func (t *Translator) setConfigMap(k nsName, cm *corev1.ConfigMap) {
	ps := &t.gw.pol
	if cm == nil {
		delete(ps.configMaps, k)
	} else {
		ps.configMaps[k] = cm
	}
	for pk := range ps.caUsers.all(k) {
		delete(ps.resolved, pk)
		for _, s := range policyTargets(ps.policies[pk]) {
			t.policyTargetChanged(s)
		}
	}
}

// policyTargetChanged re-translates the HTTPRoutes naming Service s, and marks the status
// of every policy targeting it.
func (t *Translator) policyTargetChanged(s nsName) {
	for r := range t.gw.svcUsers.all(s) {
		t.gw.dirtyRoutes.add(r)
	}
	for pk := range t.gw.pol.targets.all(s) {
		t.gw.statusDirty.add(policyKey(pk))
	}
}

// routeServicesChanged marks the status of the policies targeting services: an HTTPRoute
// naming them came, went or changed, and with it the policies' ancestors.
func (t *Translator) routeServicesChanged(services []nsName) {
	for _, s := range services {
		for pk := range t.gw.pol.targets.all(s) {
			t.gw.statusDirty.add(policyKey(pk))
		}
	}
}

// policyFor is the policy that governs Service svc's port: one whose targetRef names the
// port (sectionName) before one that names the whole Service, then the oldest, then by
// name, as the Gateway API orders conflicting policies.
func (t *Translator) policyFor(svc nsName, port corev1.ServicePort) (nsName, *gatewayv1.BackendTLSPolicy) {
	type cand struct {
		k       nsName
		p       *gatewayv1.BackendTLSPolicy
		section bool
	}
	var cs []cand
	for pk := range t.gw.pol.targets.all(svc) {
		p := t.gw.pol.policies[pk]
		for _, r := range p.Spec.TargetRefs {
			if r.Group != "" || r.Kind != "Service" || string(r.Name) != svc.name {
				continue
			}
			switch {
			case r.SectionName == nil:
				cs = append(cs, cand{pk, p, false})
			case string(*r.SectionName) == port.Name:
				cs = append(cs, cand{pk, p, true})
			}
		}
	}
	if len(cs) == 0 {
		return nsName{}, nil
	}
	sort.Slice(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if a.section != b.section {
			return a.section
		}
		return policyPrecedes(a.k, a.p, b.k, b.p)
	})
	return cs[0].k, cs[0].p
}

// policyPrecedes says whether policy a takes precedence over policy b of the same namespace
// on one target, as the Gateway API orders them: the older, then the first by name.
func policyPrecedes(ak nsName, a *gatewayv1.BackendTLSPolicy, bk nsName, b *gatewayv1.BackendTLSPolicy) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return ak.name < bk.name
}

// policyResolution is what a policy's references and values come to.
type policyResolution struct {
	tls *configv1.BackendTLS // nil: no connection is made (a 5xx)
	// accepted and resolved are its Accepted and ResolvedRefs conditions.
	accepted, resolved *watchv1.Condition
}

// policyResolved is policy k's resolution, memoised (resolvePolicy).
func (t *Translator) policyResolved(k nsName, p *gatewayv1.BackendTLSPolicy) policyResolution {
	if r, ok := t.gw.pol.resolved[k]; ok {
		return r
	}
	r := t.resolvePolicy(p)
	t.gw.pol.resolved[k] = r
	return r
}

// resolvePolicy resolves p: its CA certificates (ConfigMaps of its namespace, ca.crt; or the
// system's with wellKnownCACertificates: System), its hostname and subjectAltNames.
func (t *Translator) resolvePolicy(p *gatewayv1.BackendTLSPolicy) policyResolution {
	gen := p.Generation
	v := p.Spec.Validation
	res := policyResolution{resolved: cond(gatewayv1.BackendTLSPolicyConditionResolvedRefs, condTrue, gatewayv1.BackendTLSPolicyReasonResolvedRefs, "references resolved", gen)}
	invalid := func(msg string) policyResolution {
		res.accepted = cond(gatewayv1.PolicyConditionAccepted, condFalse, gatewayv1.PolicyReasonInvalid, msg, gen)
		return res
	}
	host := strings.ToLower(string(v.Hostname))
	if err := checkHost(host); err != "" || strings.HasPrefix(host, "*.") {
		return invalid(fmt.Sprintf("hostname %q is not a host name", v.Hostname))
	}
	bt := &configv1.BackendTLS{Verify: true, ServerName: host, VerifyName: host}
	for i, s := range v.SubjectAltNames {
		switch s.Type {
		case gatewayv1.HostnameSubjectAltNameType:
			bt.SubjectAltNames = append(bt.SubjectAltNames, "dns:"+strings.ToLower(string(s.Hostname)))
		case gatewayv1.URISubjectAltNameType:
			bt.SubjectAltNames = append(bt.SubjectAltNames, "uri:"+string(s.URI))
		default:
			return invalid(fmt.Sprintf("subjectAltNames[%d]: type %q is not supported", i, s.Type))
		}
	}
	if len(p.Spec.Options) > 0 {
		return invalid("options are implementation-specific and Sluice defines none")
	}
	switch {
	case v.WellKnownCACertificates != nil && len(v.CACertificateRefs) > 0:
		return invalid("caCertificateRefs and wellKnownCACertificates are both set")
	case v.WellKnownCACertificates != nil:
		if *v.WellKnownCACertificates != gatewayv1.WellKnownCACertificatesSystem {
			return invalid(fmt.Sprintf("wellKnownCACertificates %q is not supported (System is)", *v.WellKnownCACertificates))
		}
	default:
		var bundle []byte
		var bad []string
		var reason gatewayv1.PolicyConditionReason
		for i, r := range v.CACertificateRefs {
			if r.Group != "" || r.Kind != "ConfigMap" {
				bad = append(bad, fmt.Sprintf("caCertificateRefs[%d]: %s/%s %s is not a ConfigMap", i, r.Group, r.Kind, r.Name))
				if reason == "" {
					reason = gatewayv1.BackendTLSPolicyReasonInvalidKind
				}
				continue
			}
			cm := t.gw.pol.configMaps[nsName{p.Namespace, string(r.Name)}]
			var why string
			switch {
			case cm == nil:
				why = "not found"
			case cm.Data[contract.CAKey] == "":
				why = "has no " + contract.CAKey
			default:
				if checked, err := contract.CheckTrustedCAs([]byte(cm.Data[contract.CAKey])); err != nil {
					why = "ca.crt: " + err.Error()
				} else {
					bundle = append(bundle, checked.PEM...)
				}
			}
			if why != "" {
				bad = append(bad, fmt.Sprintf("caCertificateRefs[%d]: ConfigMap %s/%s %s", i, p.Namespace, r.Name, why))
				if reason == "" {
					reason = gatewayv1.BackendTLSPolicyReasonInvalidCACertificateRef
				}
			}
		}
		if len(bad) > 0 {
			res.resolved = cond(gatewayv1.BackendTLSPolicyConditionResolvedRefs, condFalse, reason, strings.Join(bad, "; "), gen)
		}
		if len(bundle) == 0 {
			res.accepted = cond(gatewayv1.PolicyConditionAccepted, condFalse, gatewayv1.BackendTLSPolicyReasonNoValidCACertificate, "no valid CA certificate: connections to the backends fail (500)", gen)
			return res
		}
		bt.CaPem = bundle
	}
	if err := contract.CheckBackendTLS(bt); err != nil {
		return invalid(err.Error())
	}
	res.tls, res.accepted = bt, cond(gatewayv1.PolicyConditionAccepted, condTrue, gatewayv1.PolicyReasonAccepted, "accepted by "+t.gatewayControllerName(), gen)
	return res
}

// policyBackend is the backend of Service svc's port under the policy that governs it: its
// name and Backend.tls, ok false when the policy cannot be used (the request gets 500), and
// name "" when no policy governs the port.
func (t *Translator) policyBackend(svc nsName, port corev1.ServicePort) (name string, bt *configv1.BackendTLS, ok bool) {
	pk, p := t.policyFor(svc, port)
	if p == nil {
		return "", nil, true
	}
	r := t.policyResolved(pk, p)
	if r.tls == nil {
		return "", nil, false
	}
	return backendName(svc.ns, svc.name, port.Port) + tlsSuffix + policySep + pk.name, r.tls, true
}

// policyStatus is a policy's status: one ancestor per Gateway of ours that an HTTPRoute
// naming a Service it targets is attached to, each with the policy's conditions (Accepted
// false, Conflicted, where another policy governs a port it names instead). Nil when it has
// no such ancestor.
func (t *Translator) policyStatus(k nsName) (*gatewayv1.BackendTLSPolicy, []*watchv1.RouteParentStatus) {
	p := t.gw.pol.policies[k]
	if p == nil {
		return nil, nil
	}
	gws := map[nsName]bool{}
	conflicted := false
	for _, s := range policyTargets(p) {
		conflicted = conflicted || t.precededOnTarget(k, p, s)
		for rk := range t.gw.svcUsers.all(s) {
			if ro := t.gw.routeOut[rk]; ro != nil && ro.ours {
				for _, pa := range ro.parents {
					gws[pa.gw] = true
				}
			}
		}
	}
	if len(gws) == 0 {
		return p, nil
	}
	r := t.policyResolved(k, p)
	conds := []*watchv1.Condition{r.accepted, r.resolved}
	if conflicted && r.accepted.GetStatus() == condTrue {
		conds[0] = cond(gatewayv1.PolicyConditionAccepted, condFalse, gatewayv1.PolicyReasonConflicted, "another BackendTLSPolicy governs the same Service port and takes precedence", p.Generation)
	}
	keys := make([]nsName, 0, len(gws))
	for g := range gws {
		keys = append(keys, g)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].ns < keys[j].ns || keys[i].ns == keys[j].ns && keys[i].name < keys[j].name
	})
	var out []*watchv1.RouteParentStatus
	for _, g := range keys {
		out = append(out, &watchv1.RouteParentStatus{ParentRef: &watchv1.ParentReference{Group: GatewayGroup, Kind: "Gateway", Namespace: g.ns, Name: g.name},
			Conditions: conds})
	}
	return p, out
}

// precededOnTarget says whether another policy names Service s with the same sectionName (or
// none, as k) as policy k and takes precedence: the older, then the first by name. A policy
// naming one port and another naming the whole Service do not conflict: the first governs
// that port, the other the rest.
func (t *Translator) precededOnTarget(k nsName, p *gatewayv1.BackendTLSPolicy, s nsName) bool {
	sections := func(q *gatewayv1.BackendTLSPolicy) map[string]bool {
		out := map[string]bool{}
		for _, r := range q.Spec.TargetRefs {
			if r.Group == "" && r.Kind == "Service" && string(r.Name) == s.name {
				sec := ""
				if r.SectionName != nil {
					sec = "/" + string(*r.SectionName)
				}
				out[sec] = true
			}
		}
		return out
	}
	mine := sections(p)
	for qk := range t.gw.pol.targets.all(s) {
		q := t.gw.pol.policies[qk]
		if qk == k || q == nil {
			continue
		}
		if !policyPrecedes(qk, q, k, p) {
			continue
		}
		for sec := range sections(q) {
			if mine[sec] {
				return true
			}
		}
	}
	return false
}
