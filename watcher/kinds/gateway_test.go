package kinds

import (
	"errors"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// served builds a discovery answer: "gv" -> "plural:Kind:ns|cluster", ...
func served(t *testing.T, gvs map[string][]string, failed ...string) Served {
	t.Helper()
	s := Served{Resources: map[string][]metav1.APIResource{}, Failed: map[string]error{}}
	for gv, rs := range gvs {
		list := []metav1.APIResource{}
		for _, r := range rs {
			p := strings.Split(r, ":")
			if len(p) != 3 {
				t.Fatalf("bad resource %q", r)
			}
			list = append(list, metav1.APIResource{Name: p[0], Kind: p[1], Namespaced: p[2] == "ns"})
		}
		s.Resources[gv] = list
	}
	for _, gv := range failed {
		s.Failed[gv] = errors.New("connection refused")
	}
	return s
}

var (
	core     = map[string][]string{"v1": {"services:Service:ns", "secrets:Secret:ns", "namespaces:Namespace:cluster", "configmaps:ConfigMap:ns"}}
	gwV1     = []string{"gatewayclasses:GatewayClass:cluster", "gateways:Gateway:ns", "httproutes:HTTPRoute:ns", "referencegrants:ReferenceGrant:ns"}
	gwV1NoRG = []string{"gatewayclasses:GatewayClass:cluster", "gateways:Gateway:ns", "httproutes:HTTPRoute:ns"}
)

func with(base map[string][]string, gv string, rs []string) map[string][]string {
	out := map[string][]string{}
	for k, v := range base {
		out[k] = v
	}
	out[gv] = rs
	return out
}

// Scenario 2 and 11 (docs/design.md): which kinds the watcher watches is decided from
// discovery alone: a required kind not served keeps everything pending (no marker), an
// optional one is skipped; --gateway-api decides the four Gateway API kinds, ReferenceGrant
// at v1 when served, else v1beta1, and Namespaces with them (under auto only while the
// Gateway API's CRDs are served); a failed discovery decides nothing.
func TestDecideWhichKindsToWatch(t *testing.T) {
	userSpecs, err := ParseSpecs([]string{"v1/services"}, []string{"widgets.example/v1/widgets"})
	if err != nil {
		t.Fatal(err)
	}
	const gw = "gateway.networking.k8s.io/v1"
	const gwB = "gateway.networking.k8s.io/v1beta1"
	cases := []struct {
		name    string
		mode    GatewayAPIMode
		served  Served
		watch   []string // Spec.String() of watched kinds, in stream order (group, version, kind)
		skipped []string
		pending []string // substrings: "kind: cause"
	}{
		{name: "auto, no CRDs: gateway kinds skipped", mode: GatewayAPIAuto, served: served(t, core),
			watch:   []string{"v1/services"},
			skipped: []string{"widgets.example/v1/widgets", gw + "/gatewayclasses", gw + "/gateways", gw + "/httproutes", gw + "/referencegrants", gw + "/listenersets", gw + "/backendtlspolicies", "v1/namespaces", "v1/configmaps"}},
		{name: "auto, CRDs served: all four watched, and Namespaces", mode: GatewayAPIAuto, served: served(t, with(core, gw, gwV1)),
			watch:   []string{"v1/namespaces", gw + "/gatewayclasses", "v1/services", gw + "/referencegrants", gw + "/gateways", gw + "/httproutes"},
			skipped: []string{"widgets.example/v1/widgets", gw + "/listenersets", gw + "/backendtlspolicies", "v1/configmaps"}},
		{name: "auto, ReferenceGrant only at v1beta1", mode: GatewayAPIAuto,
			served:  served(t, with(with(core, gw, gwV1NoRG), gwB, []string{"referencegrants:ReferenceGrant:ns"})),
			watch:   []string{"v1/namespaces", gw + "/gatewayclasses", "v1/services", gwB + "/referencegrants", gw + "/gateways", gw + "/httproutes"},
			skipped: []string{"widgets.example/v1/widgets", gw + "/listenersets", gw + "/backendtlspolicies", "v1/configmaps"}},
		{name: "on, no CRDs: the four are pending, not served", mode: GatewayAPIOn, served: served(t, core),
			watch:   []string{"v1/namespaces", "v1/services"},
			skipped: []string{"widgets.example/v1/widgets", gw + "/listenersets", gw + "/backendtlspolicies", "v1/configmaps"},
			pending: []string{gw + "/gatewayclasses: not served by the apiserver: group version " + gw + " does not exist",
				gw + "/gateways: not served", gw + "/httproutes: not served",
				gw + "/referencegrants: not served by the apiserver: group version " + gw + " does not exist; group version " + gwB + " does not exist"}},
		{name: "on, CRDs served", mode: GatewayAPIOn, served: served(t, with(core, gw, gwV1)),
			watch:   []string{"v1/namespaces", gw + "/gatewayclasses", "v1/services", gw + "/referencegrants", gw + "/gateways", gw + "/httproutes"},
			skipped: []string{"widgets.example/v1/widgets", gw + "/listenersets", gw + "/backendtlspolicies", "v1/configmaps"}},
		{name: "off, CRDs served: never watched", mode: GatewayAPIOff, served: served(t, with(core, gw, gwV1)),
			watch: []string{"v1/services"}, skipped: []string{"widgets.example/v1/widgets"}},
		{name: "auto, discovery of the gateway group failed: pending, not skipped", mode: GatewayAPIAuto, served: served(t, core, gw),
			watch: []string{"v1/services"}, skipped: []string{"widgets.example/v1/widgets", "v1/namespaces", "v1/configmaps"},
			pending: []string{gw + "/gatewayclasses: discovery of " + gw + ": connection refused", gw + "/gateways: discovery", gw + "/httproutes: discovery", gw + "/referencegrants: discovery", gw + "/listenersets: discovery", gw + "/backendtlspolicies: discovery"}},
		{name: "on, CRDs with ListenerSets served: they are watched too", mode: GatewayAPIOn, served: served(t, with(core, gw, append([]string{"listenersets:ListenerSet:ns"}, gwV1...))),
			watch:   []string{"v1/namespaces", gw + "/gatewayclasses", "v1/services", gw + "/referencegrants", gw + "/gateways", gw + "/listenersets", gw + "/httproutes"},
			skipped: []string{"widgets.example/v1/widgets", gw + "/backendtlspolicies", "v1/configmaps"}},
		{name: "auto, BackendTLSPolicies served: they and ConfigMaps are watched", mode: GatewayAPIAuto, served: served(t, with(core, gw, append([]string{"backendtlspolicies:BackendTLSPolicy:ns"}, gwV1...))),
			watch:   []string{"v1/configmaps", "v1/namespaces", gw + "/gatewayclasses", "v1/services", gw + "/referencegrants", gw + "/backendtlspolicies", gw + "/gateways", gw + "/httproutes"},
			skipped: []string{"widgets.example/v1/widgets", gw + "/listenersets"}},
		{name: "required core kind not served: pending", mode: GatewayAPIOff, served: served(t, map[string][]string{"v1": {"secrets:Secret:ns"}}),
			skipped: []string{"widgets.example/v1/widgets"},
			pending: []string{`v1/services: not served by the apiserver: group version v1 has no resource "services"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.mode, userSpecs, tc.served)
			var watch, skipped, pending []string
			for _, k := range d.Watch {
				watch = append(watch, k.Spec.String())
			}
			for _, s := range d.Skipped {
				skipped = append(skipped, s.String())
			}
			for k, err := range d.Pending {
				pending = append(pending, k+": "+err.Error())
			}
			if !slices.Equal(watch, tc.watch) {
				t.Errorf("watch %v, want %v", watch, tc.watch)
			}
			if !slices.Equal(skipped, tc.skipped) {
				t.Errorf("skipped %v, want %v", skipped, tc.skipped)
			}
			if len(pending) != len(tc.pending) {
				t.Errorf("pending %v, want %v", pending, tc.pending)
			}
			for _, want := range tc.pending {
				if !slices.ContainsFunc(pending, func(p string) bool { return strings.HasPrefix(p, want) }) {
					t.Errorf("pending %v lacks %q", pending, want)
				}
			}
			if d.Decided() != (len(tc.pending) == 0) {
				t.Errorf("Decided() = %v with pending %v", d.Decided(), pending)
			}
			for _, k := range d.Watch {
				if k.Spec.Gateway && k.Required != (tc.mode == GatewayAPIOn && k.Spec.GVR.Resource != "listenersets") {
					t.Errorf("%s required=%v in mode %s", k.Spec.String(), k.Required, tc.mode)
				}
			}
		})
	}
}

// A new epoch starts exactly when the set of watched kinds changes: the key of a decision
// names the kinds and the versions they are read at, nothing else.
func TestDecisionKeyChangesWithTheWatchedSetOnly(t *testing.T) {
	specs, _ := ParseSpecs([]string{"v1/services"}, nil)
	const gw = "gateway.networking.k8s.io/v1"
	none := Decide(GatewayAPIAuto, specs, served(t, core))
	none2 := Decide(GatewayAPIAuto, specs, served(t, with(core, "other.example/v1", []string{"things:Thing:ns"})))
	all := Decide(GatewayAPIAuto, specs, served(t, with(core, gw, gwV1)))
	rgBeta := Decide(GatewayAPIAuto, specs, served(t, with(with(core, gw, gwV1NoRG), "gateway.networking.k8s.io/v1beta1", []string{"referencegrants:ReferenceGrant:ns"})))
	if none.Key() != none2.Key() {
		t.Errorf("an unrelated group changed the key: %q vs %q", none.Key(), none2.Key())
	}
	if none.Key() == all.Key() || all.Key() == rgBeta.Key() {
		t.Errorf("keys do not tell the sets apart: %q, %q, %q", none.Key(), all.Key(), rgBeta.Key())
	}
}

func TestGatewayAPIModeAndListedGatewayKinds(t *testing.T) {
	for _, s := range []string{"auto", "on", "off"} {
		if m, err := ParseGatewayAPIMode(s); err != nil || string(m) != s {
			t.Errorf("ParseGatewayAPIMode(%q) = %q, %v", s, m, err)
		}
	}
	if _, err := ParseGatewayAPIMode("yes"); err == nil {
		t.Error("ParseGatewayAPIMode(yes) accepted")
	}
	specs, _ := ParseSpecs([]string{"v1/services"}, []string{"gateway.networking.k8s.io/v1beta1/referencegrants"})
	err := CheckNoGatewayKinds(specs)
	if err == nil || !strings.Contains(err.Error(), `"gateway.networking.k8s.io/v1beta1/referencegrants" is a Gateway API kind`) {
		t.Errorf("a listed Gateway API kind: %v", err)
	}
	ok, _ := ParseSpecs(DefaultRequired, []string{"gateway.networking.k8s.io/v1/tlsroutes"})
	if err := CheckNoGatewayKinds(ok); err != nil {
		t.Errorf("kinds Sluice does not decide were refused: %v", err)
	}
}
