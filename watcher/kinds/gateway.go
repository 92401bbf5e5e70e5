package kinds

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GatewayAPIMode is --gateway-api: whether the Gateway API kinds are watched.
type GatewayAPIMode string

// The modes of --gateway-api.
const (
	// GatewayAPIAuto watches the Gateway API kinds while discovery serves them, and starts a
	// new epoch when they appear or disappear.
	GatewayAPIAuto GatewayAPIMode = "auto"
	// GatewayAPIOn makes them required kinds: no marker until they synced.
	GatewayAPIOn GatewayAPIMode = "on"
	// GatewayAPIOff never watches them.
	GatewayAPIOff GatewayAPIMode = "off"
)

// ParseGatewayAPIMode parses --gateway-api.
func ParseGatewayAPIMode(s string) (GatewayAPIMode, error) {
	switch m := GatewayAPIMode(s); m {
	case GatewayAPIAuto, GatewayAPIOn, GatewayAPIOff:
		return m, nil
	}
	return "", fmt.Errorf("want auto, on or off")
}

// GatewayGroup is the Gateway API's group.
const GatewayGroup = "gateway.networking.k8s.io"

// NamespacesGVR are core Namespaces: the Gateway API reads their labels (a listener's
// allowedRoutes.namespaces.from Selector), nothing else does.
var NamespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// GatewaySpecs are the kinds --gateway-api adds: the Gateway API kinds Sluice translates
// (ListenerSets and BackendTLSPolicies always optional), at the version preferred (a ReferenceGrant is read as v1beta1 where the installed CRDs do not
// serve v1 yet; the translator accepts both), Namespaces, whose labels select the
// namespaces a listener admits routes from, and ConfigMaps, which hold BackendTLSPolicies'
// CA certificates (optional as the policies are).
func GatewaySpecs(required bool) []Spec {
	v1 := func(resource string, fallback ...string) Spec {
		return Spec{GVR: schema.GroupVersionResource{Group: GatewayGroup, Version: "v1", Resource: resource}, Fallback: fallback, Required: required, Gateway: true}
	}
	// ListenerSets are optional whatever the mode: their CRD came with the Gateway API v1.5,
	// and a cluster with an older standard channel must still get its marker.
	listenerSets := v1("listenersets")
	listenerSets.Required = false
	// BackendTLSPolicies (GA in v1.4) are optional too, for the same reason, and so are the
	// ConfigMaps they take their CA certificates from: without the policies nothing reads them.
	policies := v1("backendtlspolicies")
	policies.Required = false
	return []Spec{v1("gatewayclasses"), v1("gateways"), v1("httproutes"), v1("referencegrants", "v1beta1"), listenerSets, policies,
		{GVR: NamespacesGVR, Required: required, Gateway: true}, {GVR: ConfigMapsGVR, Gateway: true}}
}

// ConfigMapsGVR are core ConfigMaps: a BackendTLSPolicy's CA certificates (ca.crt). Only
// those with a ca.crt are streamed, and only that key of them (Transform).
var ConfigMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// CheckNoGatewayKinds refuses a Gateway API kind in a --kinds or --optional-kinds list:
// --gateway-api alone decides them, so that the two cannot contradict each other.
func CheckNoGatewayKinds(specs []Spec) error {
	for _, s := range specs {
		for _, g := range GatewaySpecs(false) {
			if s.GVR.Group == g.GVR.Group && s.GVR.Resource == g.GVR.Resource {
				return fmt.Errorf("kind %q is a Gateway API kind (or one it needs): --gateway-api (auto, on or off) decides whether it is watched; remove it from the list", s.String())
			}
		}
	}
	return nil
}

// WithGateway returns specs with the Gateway API kinds that mode adds: required ones for
// on, optional ones for auto, none for off.
func WithGateway(mode GatewayAPIMode, specs []Spec) []Spec {
	out := append([]Spec{}, specs...)
	switch mode {
	case GatewayAPIOn:
		out = append(out, GatewaySpecs(true)...)
	case GatewayAPIAuto:
		out = append(out, GatewaySpecs(false)...)
	}
	return out
}

// Served is one answer of discovery: for each group version asked about, the resources it
// serves; a group version missing from Resources and Failed is not served (404).
type Served struct {
	Resources map[string][]metav1.APIResource
	// Failed holds the group versions discovery could not answer for (apiserver unreachable,
	// 403, 503 of an aggregated API): nothing can be decided about their kinds.
	Failed map[string]error
}

// GroupVersions are the group versions discovery must be asked about to decide specs.
func GroupVersions(specs []Spec) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range specs {
		for _, v := range append([]string{s.GVR.Version}, s.Fallback...) {
			gv := schema.GroupVersion{Group: s.GVR.Group, Version: v}.String()
			if !seen[gv] {
				seen[gv] = true
				out = append(out, gv)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Decision is which kinds to watch now.
type Decision struct {
	// Watch are the kinds to watch, sorted (SortKinds).
	Watch []*Kind
	// Skipped are the optional kinds discovery does not serve.
	Skipped []Spec
	// Pending are the kinds nothing can be decided about yet, by Spec.String(): a required
	// kind not served, or a group version discovery failed on. Their cause wraps
	// ErrNotServed when the kind is not served.
	Pending map[string]error
}

// Decided reports whether every kind was decided.
func (d Decision) Decided() bool { return len(d.Pending) == 0 }

// Key names the set of kinds watched: two decisions with the same key watch the same kinds
// (group, version, resource, scope and field selector).
func (d Decision) Key() string {
	var parts []string
	for _, k := range d.Watch {
		parts = append(parts, fmt.Sprintf("%s|%s|%t", k.Spec.String(), k.GVK.Kind, k.Namespaced))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// Decide is the watcher's policy of which kinds to watch, a pure function of the mode of
// --gateway-api, the configured specs (--kinds, --optional-kinds) and one discovery answer.
// A kind is watched when discovery serves it at its version or, failing that, at one of its
// fallback versions in order; an optional kind not served is skipped; a required one not
// served, or any kind whose group version discovery failed on, is pending.
func Decide(mode GatewayAPIMode, specs []Spec, served Served) Decision {
	d := Decision{Pending: map[string]error{}}
	for _, s := range WithGateway(mode, specs) {
		k, err := decideOne(s, served)
		switch {
		case err == nil:
			d.Watch = append(d.Watch, k)
		case errors.Is(err, ErrNotServed) && !s.Required:
			d.Skipped = append(d.Skipped, s)
		default:
			d.Pending[s.String()] = err
		}
	}
	// Namespaces are served by every apiserver; under auto they are watched only together
	// with the Gateway API's CRDs, which are the only reason to read them.
	if mode == GatewayAPIAuto && !slices.ContainsFunc(d.Watch, func(k *Kind) bool { return k.Gateway && k.GVR.Group == GatewayGroup }) {
		d.Watch = slices.DeleteFunc(d.Watch, func(k *Kind) bool {
			if k.Gateway && k.GVR == NamespacesGVR {
				d.Skipped = append(d.Skipped, k.Spec)
				return true
			}
			return false
		})
	}
	// ConfigMaps likewise only together with BackendTLSPolicies, whose CA certificates they hold.
	if !slices.ContainsFunc(d.Watch, func(k *Kind) bool { return k.Gateway && k.GVR.Resource == "backendtlspolicies" }) {
		d.Watch = slices.DeleteFunc(d.Watch, func(k *Kind) bool {
			if k.Gateway && k.GVR == ConfigMapsGVR {
				d.Skipped = append(d.Skipped, k.Spec)
				return true
			}
			return false
		})
	}
	SortKinds(d.Watch)
	return d
}

func decideOne(s Spec, served Served) (*Kind, error) {
	var notServed []string
	for _, v := range append([]string{s.GVR.Version}, s.Fallback...) {
		gv := schema.GroupVersion{Group: s.GVR.Group, Version: v}
		if err := served.Failed[gv.String()]; err != nil {
			return nil, fmt.Errorf("discovery of %s: %w", gv, err)
		}
		list, ok := served.Resources[gv.String()]
		if !ok {
			notServed = append(notServed, fmt.Sprintf("group version %s does not exist", gv))
			continue
		}
		found := false
		for _, r := range list {
			if r.Name != s.GVR.Resource {
				continue
			}
			found = true
			k := &Kind{Spec: s, GVK: gv.WithKind(r.Kind), Namespaced: r.Namespaced, Served: true}
			k.Spec.GVR.Version = v
			return k, nil
		}
		if !found {
			notServed = append(notServed, fmt.Sprintf("group version %s has no resource %q", gv, s.GVR.Resource))
		}
	}
	return nil, fmt.Errorf("%w: %s", ErrNotServed, strings.Join(notServed, "; "))
}
