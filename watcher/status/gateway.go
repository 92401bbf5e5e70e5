package status

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// The Gateway API kinds whose status the Writer writes (group gateway.networking.k8s.io).
const (
	GatewayGroup     = "gateway.networking.k8s.io"
	KindGatewayClass = "GatewayClass"
	KindGateway      = "Gateway"
	KindHTTPRoute    = "HTTPRoute"
	KindListenerSet  = "ListenerSet"
	// KindBackendTLSPolicy's status is its ancestors: one per Gateway (PolicyAncestorStatus).
	KindBackendTLSPolicy = "BackendTLSPolicy"
)

// gatewayResources are the resources of the kinds above, for the status subresource's URL.
var gatewayResources = map[string]string{KindGatewayClass: "gatewayclasses", KindGateway: "gateways", KindHTTPRoute: "httproutes",
	KindListenerSet: "listenersets", KindBackendTLSPolicy: "backendtlspolicies"}

// gatewayObject is a Gateway API object as the store holds it, decoded with the v1 types
// (v1beta1 of these kinds has the same schema). Exactly one of class, gw, route and ls is set.
type gatewayObject struct {
	version string // the served version the store holds, for the status subresource's URL
	meta    *metav1.ObjectMeta
	class   *gwv1.GatewayClass
	gw      *gwv1.Gateway
	route   *gwv1.HTTPRoute
	ls      *gwv1.ListenerSet
	policy  *gwv1.BackendTLSPolicy
}

func (o *gatewayObject) gvr(kind string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: GatewayGroup, Version: o.version, Resource: gatewayResources[kind]}
}

// decodeGateway decodes a wire object of a Gateway API kind (JSON: the store holds custom
// resources as the apiserver sends them).
func decodeGateway(kind, version string, contentType string, raw []byte) (*gatewayObject, error) {
	if contentType != watchstream.ContentTypeJSON {
		return nil, fmt.Errorf("content type %q, want %s", contentType, watchstream.ContentTypeJSON)
	}
	o := &gatewayObject{version: version}
	var err error
	switch kind {
	case KindGatewayClass:
		o.class = &gwv1.GatewayClass{}
		err = json.Unmarshal(raw, o.class)
		o.meta = &o.class.ObjectMeta
	case KindGateway:
		o.gw = &gwv1.Gateway{}
		err = json.Unmarshal(raw, o.gw)
		o.meta = &o.gw.ObjectMeta
	case KindHTTPRoute:
		o.route = &gwv1.HTTPRoute{}
		err = json.Unmarshal(raw, o.route)
		o.meta = &o.route.ObjectMeta
	case KindListenerSet:
		o.ls = &gwv1.ListenerSet{}
		err = json.Unmarshal(raw, o.ls)
		o.meta = &o.ls.ObjectMeta
	case KindBackendTLSPolicy:
		o.policy = &gwv1.BackendTLSPolicy{}
		err = json.Unmarshal(raw, o.policy)
		o.meta = &o.policy.ObjectMeta
	default:
		return nil, fmt.Errorf("kind %q is not one whose status is written", kind)
	}
	if err != nil {
		return nil, err
	}
	return o, nil
}

// gatewayInput is everything that decides one Gateway API object's status.
type gatewayInput struct {
	kind string
	// controller is this watcher's Gateway controller name (--gateway-controller-name).
	controller string
	// now stamps a condition whose status changed.
	now metav1.Time
	// obj is the object as the store (or, after a conflict, a fresh read) shows it; nil when
	// it does not exist.
	obj *gatewayObject
	// classController is, for a Gateway, the spec.controllerName of its GatewayClass, and for
	// a ListenerSet that of its Gateway's class (empty when either is unknown).
	classController string
	// reports are the reports about it, one per source in source name order, with who sent
	// each.
	reports sourceReports
	// translatorClass is the IngressClass of the translator whose identity serves this
	// watcher's Gateway controller (--gateway-translator-class): a checked origin of another
	// class may not decide Gateway API statuses.
	translatorClass string
	// released says that a source reported the object and then let go of it (only a source
	// that may decide releases; a report that decides outweighs it).
	released bool
}

// gatewayDecision is what the object needs. When write is set, status is the object's new
// status as a merge patch: the fields this controller owns, whole (a merge patch replaces
// lists whole), and nothing else, so every field of others is kept.
type gatewayDecision struct {
	// report is the report that decides; nil when no source may.
	report *watchv1.ObjectStatus
	write  bool
	status map[string]any
	// why names, when nothing is written, the rule that decided so (for tests and debug logs).
	why string
}

// Why a Gateway API status is not written.
const (
	whyAbsent      = "absent"       // the object is not in the store
	whyNoReport    = "no report"    // no source reports it (and it was not released)
	whyNotServed   = "not served"   // every report is from a translator that does not serve our controller
	whyRefused     = "refused"      // the report names another controller
	whyUIDMismatch = "uid mismatch" // the report is about an earlier object of that name
	whyNotOurs     = "not ours"     // a GatewayClass of another controller, a Gateway of its class
	whyEqual       = "equal"        // the object already shows it
	whyLeftAsIs    = "left as is"   // a released GatewayClass or Gateway keeps its status
)

// gatewayRefusal says why a report from from may not decide Gateway API statuses; empty
// when it may. An origin that is not checked (authorization off) always may; a checked one
// only when its identity serves translatorClass, the IngressClass of the translator that
// serves this watcher's Gateway controller. (The watcher cannot tell which Gateway
// controller a translator serves: its identity names only its IngressClass.)
func gatewayRefusal(from Origin, translatorClass string) string {
	switch {
	case !from.Checked:
		return ""
	case translatorClass == "":
		return "no translator class serves this watcher's Gateway controller (--gateway-translator-class is empty)"
	case from.Class != translatorClass:
		return fmt.Sprintf("the reporter's identity serves IngressClass %q, and only the translator of --gateway-translator-class %q serves this watcher's Gateway controller",
			from.Class, translatorClass)
	}
	return ""
}

// chooseGatewayReport is the report of the smallest source name that may decide Gateway API
// statuses (gatewayRefusal); refused says a report was passed over for its reporter.
func chooseGatewayReport(reports sourceReports, translatorClass string) (best *watchv1.ObjectStatus, refused bool) {
	for _, r := range reports { // in source name order: the first that may decide is chosen
		if gatewayRefusal(r.from, translatorClass) != "" {
			refused = true
			continue
		}
		if best == nil {
			best = r.status
		}
	}
	return best, refused
}

// decideGateway decides one Gateway API object's status. It is pure: the same input gives the
// same decision (the time is in the input).
//
//   - The report that decides is the one of the smallest source name among those that may
//     (gatewayRefusal: a checked translator only when its class is --gateway-translator-class);
//     the others are kept but never acted on.
//   - A report naming another controller than ours is refused.
//   - A GatewayClass is written only when its spec.controllerName is ours, a Gateway only when
//     its class's is; the report's uid must be the object's (a recreated object waits for a
//     report about it).
//   - GatewayClass and Gateway: the report's conditions (and a Gateway's listeners, and its
//     addresses when the report manages them) replace the object's.
//   - HTTPRoute: status.parents entries whose controllerName is ours are replaced by the
//     reported ones (controllerName ours), after every other controller's, which are kept as
//     they are. Released (no source reports it any more): ours are removed.
//   - BackendTLSPolicy: the same with status.ancestors (the reported parents are its
//     ancestors, the Gateways of ours whose routes it governs).
//   - Released GatewayClass or Gateway: the status is left as it is (as Contour and Envoy
//     Gateway do): another controller may own it by now, or nobody will keep it current.
//   - A condition keeps the object's lastTransitionTime for its type when its status did not
//     change; else it is now. observedGeneration is as reported.
//   - Nothing is written when the result equals what the object shows.
func decideGateway(in gatewayInput) gatewayDecision {
	r, refused := chooseGatewayReport(in.reports, in.translatorClass)
	dec := decideGatewayReport(in, r, refused)
	dec.report = r
	return dec
}

// decideGatewayReport is decideGateway once the report that decides (r, nil when none may) is
// chosen; refused says a report was passed over for its reporter.
func decideGatewayReport(in gatewayInput, r *watchv1.ObjectStatus, refused bool) gatewayDecision {
	if in.obj == nil {
		return gatewayDecision{why: whyAbsent}
	}
	if r == nil {
		// Released: ours are removed from the lists that name a controller.
		if in.released && in.kind == KindHTTPRoute {
			return decideOurs(in.obj.route.Status.Parents, nil, in, routeParent)
		}
		if in.released && in.kind == KindBackendTLSPolicy {
			return decideOurs(in.obj.policy.Status.Ancestors, nil, in, policyAncestor)
		}
		if in.released {
			return gatewayDecision{why: whyLeftAsIs}
		}
		if refused {
			return gatewayDecision{why: whyNotServed}
		}
		return gatewayDecision{why: whyNoReport}
	}
	if r.GetControllerName() != in.controller {
		return gatewayDecision{why: whyRefused}
	}
	if string(in.obj.meta.UID) != r.GetUid() {
		return gatewayDecision{why: whyUIDMismatch}
	}
	switch in.kind {
	case KindGatewayClass:
		c := in.obj.class
		if string(c.Spec.ControllerName) != in.controller {
			return gatewayDecision{why: whyNotOurs}
		}
		conds := conditionsOf(r.GetConditions(), c.Status.Conditions, in.now)
		var features []gwv1.SupportedFeature
		for _, f := range r.GetSupportedFeatures() {
			features = append(features, gwv1.SupportedFeature{Name: gwv1.FeatureName(f)})
		}
		if equality.Semantic.DeepEqual(emptyNil(conds), emptyNil(c.Status.Conditions)) &&
			equality.Semantic.DeepEqual(emptyNil(features), emptyNil(c.Status.SupportedFeatures)) {
			return gatewayDecision{why: whyEqual}
		}
		return gatewayDecision{write: true, status: map[string]any{"conditions": nilIfEmpty(conds), "supportedFeatures": nilIfEmpty(features)}}
	case KindGateway:
		g := in.obj.gw
		if in.classController != in.controller {
			return gatewayDecision{why: whyNotOurs}
		}
		conds := conditionsOf(r.GetConditions(), g.Status.Conditions, in.now)
		listeners := listenersOf(r.GetListeners(), g.Status.Listeners, in.now)
		same := equality.Semantic.DeepEqual(emptyNil(conds), emptyNil(g.Status.Conditions)) &&
			equality.Semantic.DeepEqual(emptyNil(listeners), emptyNil(g.Status.Listeners))
		attachedSets := r.GetAttachedListenerSets()
		// Unset reads as none, as the Gateway API's own helpers read it.
		shownSets := int32(0)
		if g.Status.AttachedListenerSets != nil {
			shownSets = *g.Status.AttachedListenerSets
		}
		same = same && attachedSets == shownSets
		st := map[string]any{"conditions": nilIfEmpty(conds), "listeners": nilIfEmpty(listeners), "attachedListenerSets": attachedSets}
		if r.GetManageAddresses() {
			addrs := addressesOf(r.GetAddresses())
			same = same && equality.Semantic.DeepEqual(emptyNil(addrs), emptyNil(g.Status.Addresses))
			st["addresses"] = nilIfEmpty(addrs)
		}
		if same {
			return gatewayDecision{why: whyEqual}
		}
		return gatewayDecision{write: true, status: st}
	case KindListenerSet:
		ls := in.obj.ls
		if in.classController != in.controller {
			return gatewayDecision{why: whyNotOurs}
		}
		// A ListenerSet's listener statuses have a Gateway listener's fields: compare and
		// build them as those.
		cur := make([]gwv1.ListenerStatus, 0, len(ls.Status.Listeners))
		for _, l := range ls.Status.Listeners {
			cur = append(cur, gwv1.ListenerStatus(l))
		}
		conds := conditionsOf(r.GetConditions(), ls.Status.Conditions, in.now)
		listeners := listenersOf(r.GetListeners(), cur, in.now)
		if equality.Semantic.DeepEqual(emptyNil(conds), emptyNil(ls.Status.Conditions)) && equality.Semantic.DeepEqual(emptyNil(listeners), emptyNil(cur)) {
			return gatewayDecision{why: whyEqual}
		}
		return gatewayDecision{write: true, status: map[string]any{"conditions": nilIfEmpty(conds), "listeners": nilIfEmpty(listeners)}}
	case KindHTTPRoute:
		return decideOurs(in.obj.route.Status.Parents, r.GetParents(), in, routeParent)
	case KindBackendTLSPolicy:
		return decideOurs(in.obj.policy.Status.Ancestors, r.GetParents(), in, policyAncestor)
	}
	return gatewayDecision{why: fmt.Sprintf("kind %q", in.kind)}
}

// maxPolicyAncestors is the most entries a policy's status.ancestors holds (the CRD's bound).
const maxPolicyAncestors = 16

// entry is how mergeOurs reads and makes one entry of a status list whose entries name a
// parent and a controller: a route's status.parents, a policy's status.ancestors. field is
// the list's name in the status, bound the most entries the API keeps (0: no bound).
type entry[T any] struct {
	field string
	bound int
	ref   func(T) gwv1.ParentReference
	owner func(T) gwv1.GatewayController
	conds func(T) []metav1.Condition
	make  func(gwv1.ParentReference, gwv1.GatewayController, []metav1.Condition) T
}

var (
	routeParent = entry[gwv1.RouteParentStatus]{
		field: "parents",
		ref:   func(p gwv1.RouteParentStatus) gwv1.ParentReference { return p.ParentRef },
		owner: func(p gwv1.RouteParentStatus) gwv1.GatewayController { return p.ControllerName },
		conds: func(p gwv1.RouteParentStatus) []metav1.Condition { return p.Conditions },
		make: func(r gwv1.ParentReference, c gwv1.GatewayController, cs []metav1.Condition) gwv1.RouteParentStatus {
			return gwv1.RouteParentStatus{ParentRef: r, ControllerName: c, Conditions: cs}
		},
	}
	policyAncestor = entry[gwv1.PolicyAncestorStatus]{
		field: "ancestors", bound: maxPolicyAncestors,
		ref:   func(a gwv1.PolicyAncestorStatus) gwv1.ParentReference { return a.AncestorRef },
		owner: func(a gwv1.PolicyAncestorStatus) gwv1.GatewayController { return a.ControllerName },
		conds: func(a gwv1.PolicyAncestorStatus) []metav1.Condition { return a.Conditions },
		make: func(r gwv1.ParentReference, c gwv1.GatewayController, cs []metav1.Condition) gwv1.PolicyAncestorStatus {
			return gwv1.PolicyAncestorStatus{AncestorRef: r, ControllerName: c, Conditions: cs}
		},
	}
)

// mergeOurs is cur with the entries of controller replaced by the reported ones, after every
// other controller's, which are kept as they are and in their order; a condition keeps its
// time while its status holds (conditionsOf). Nothing reported: ours are removed.
func mergeOurs[T any](cur []T, reported []*watchv1.RouteParentStatus, controller string, now metav1.Time, e entry[T]) []T {
	var next []T
	for _, c := range cur {
		if string(e.owner(c)) != controller {
			next = append(next, c)
		}
	}
	for _, p := range reported {
		ref := parentRefOf(p.GetParentRef())
		var old []metav1.Condition
		for _, c := range cur {
			if string(e.owner(c)) == controller && equality.Semantic.DeepEqual(e.ref(c), ref) {
				old = e.conds(c)
				break
			}
		}
		next = append(next, e.make(ref, gwv1.GatewayController(controller), conditionsOf(p.GetConditions(), old, now)))
	}
	return next
}

// decideOurs decides a status list of e's kind: cur with ours replaced by reported (removed
// when nothing is reported), at most e.bound entries (ours come after every other
// controller's, so ours are cut), written when it changed.
func decideOurs[T any](cur []T, reported []*watchv1.RouteParentStatus, in gatewayInput, e entry[T]) gatewayDecision {
	next := mergeOurs(cur, reported, in.controller, in.now, e)
	if e.bound > 0 && len(next) > e.bound {
		next = next[:e.bound]
	}
	if equality.Semantic.DeepEqual(emptyNil(next), emptyNil(cur)) {
		return gatewayDecision{why: whyEqual}
	}
	return gatewayDecision{write: true, status: map[string]any{e.field: nonNil(next)}}
}

// nonNil: status.parents and status.ancestors are required, so an empty list is written as
// [], not removed.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// conditionsOf converts reported conditions, keeping the lastTransitionTime of the current
// condition of the same type when its status is unchanged.
func conditionsOf(reported []*watchv1.Condition, current []metav1.Condition, now metav1.Time) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(reported))
	for _, c := range reported {
		// apimachinery's rule: a condition whose status holds keeps its lastTransitionTime.
		conds := []metav1.Condition{}
		if old := meta.FindStatusCondition(current, c.GetType()); old != nil {
			conds = append(conds, *old)
		}
		meta.SetStatusCondition(&conds, metav1.Condition{Type: c.GetType(), Status: metav1.ConditionStatus(c.GetStatus()), Reason: c.GetReason(),
			Message: c.GetMessage(), ObservedGeneration: c.GetObservedGeneration(), LastTransitionTime: now})
		out = append(out, conds[0])
	}
	return out
}

func listenersOf(reported []*watchv1.ListenerStatus, current []gwv1.ListenerStatus, now metav1.Time) []gwv1.ListenerStatus {
	var out []gwv1.ListenerStatus
	for _, l := range reported {
		var old []metav1.Condition
		for _, c := range current {
			if string(c.Name) == l.GetName() {
				old = c.Conditions
				break
			}
		}
		ls := gwv1.ListenerStatus{Name: gwv1.SectionName(l.GetName()), AttachedRoutes: l.GetAttachedRoutes(),
			SupportedKinds: []gwv1.RouteGroupKind{}, Conditions: conditionsOf(l.GetConditions(), old, now)}
		for _, k := range l.GetSupportedKinds() {
			// The CRD defaults an absent group to the Gateway API's; say it, so that what is
			// written compares equal to what is read back.
			g := gwv1.Group(k.GetGroup())
			if g == "" {
				g = GatewayGroup
			}
			ls.SupportedKinds = append(ls.SupportedKinds, gwv1.RouteGroupKind{Group: &g, Kind: gwv1.Kind(k.GetKind())})
		}
		if ls.Conditions == nil {
			ls.Conditions = []metav1.Condition{} // required
		}
		out = append(out, ls)
	}
	return out
}

func addressesOf(reported []*watchv1.GatewayAddress) []gwv1.GatewayStatusAddress {
	var out []gwv1.GatewayStatusAddress
	for _, a := range reported {
		t := gwv1.AddressType(a.GetType())
		if t == "" {
			t = gwv1.IPAddressType // the CRD's default
		}
		out = append(out, gwv1.GatewayStatusAddress{Type: &t, Value: a.GetValue()})
	}
	return out
}

// parentRefOf is a reported parentRef as the apiserver stores it: unset fields stay unset,
// except group and kind, which the CRD defaults (gateway.networking.k8s.io, Gateway).
func parentRefOf(p *watchv1.ParentReference) gwv1.ParentReference {
	g, k := gwv1.Group(p.GetGroup()), gwv1.Kind(p.GetKind())
	if g == "" {
		g = GatewayGroup
	}
	if k == "" {
		k = KindGateway
	}
	ref := gwv1.ParentReference{Group: &g, Kind: &k, Name: gwv1.ObjectName(p.GetName())}
	if p.GetNamespace() != "" {
		ns := gwv1.Namespace(p.GetNamespace())
		ref.Namespace = &ns
	}
	if p.GetSectionName() != "" {
		s := gwv1.SectionName(p.GetSectionName())
		ref.SectionName = &s
	}
	if p.GetPort() != 0 {
		port := p.GetPort()
		ref.Port = &port
	}
	return ref
}

// emptyNil makes an empty list and an absent one compare equal.
func emptyNil[T any](l []T) []T {
	if len(l) == 0 {
		return nil
	}
	return l
}

// nilIfEmpty is a list for a merge patch: null removes the field.
func nilIfEmpty[T any](l []T) any {
	if len(l) == 0 {
		return nil
	}
	return l
}

// gatewayPatch is the merge patch of one object's status: it names the resourceVersion the
// decision was made on, so that a concurrent change (another controller's parents entry)
// is a conflict, decided again on a fresh read.
func gatewayPatch(resourceVersion string, status map[string]any) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": resourceVersion}, "status": status})
}
