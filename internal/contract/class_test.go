package contract

import "testing"

// MayReport (docs/design.md, "Who may do what"): a translator may have statuses written only for Ingresses of its
// own class, of another class of its controller, or class-less ones no other controller's
// default class claims.
func TestMayReport(t *testing.T) {
	str := func(s string) *string { return &s }
	classes := map[string]IngressClassInfo{
		"sluice":          {Controller: "sluice.io/ingress-controller"},
		"sluice-internal": {Controller: "sluice.io/ingress-controller"},
		"nginx":           {Controller: "k8s.io/ingress-nginx"},
	}
	withDefault := func(name string) map[string]IngressClassInfo {
		out := map[string]IngressClassInfo{}
		for k, v := range classes {
			v.Default = k == name
			out[k] = v
		}
		return out
	}
	cases := []struct {
		name    string
		ing     ClassClaim
		classes map[string]IngressClassInfo
		want    bool
		class   string // the translator's class; empty: sluice
	}{
		{"its own class", ClassClaim{ClassName: str("sluice")}, classes, true, ""},
		{"another class of its controller", ClassClaim{ClassName: str("sluice-internal")}, classes, true, ""},
		{"another controller's class", ClassClaim{ClassName: str("nginx")}, classes, false, ""},
		{"a class that does not exist", ClassClaim{ClassName: str("ghost")}, classes, false, ""},
		{"its own class, not created yet", ClassClaim{ClassName: str("sluice")}, nil, true, ""},
		{"the legacy annotation, its class", ClassClaim{Annotation: "sluice"}, classes, true, ""},
		{"the legacy annotation, another class", ClassClaim{Annotation: "nginx"}, classes, false, ""},
		{"class-less, no default class", ClassClaim{}, classes, true, ""},
		{"class-less, its class is the default", ClassClaim{}, withDefault("sluice"), true, ""},
		{"class-less, its controller's other class is the default", ClassClaim{}, withDefault("sluice-internal"), true, ""},
		{"class-less, another controller's class is the default", ClassClaim{}, withDefault("nginx"), false, ""},
		{"its class is another controller's (a cut-over)", ClassClaim{ClassName: str("nginx")}, classes, true, "nginx"},
		{"a class of its controller while its own class is missing", ClassClaim{ClassName: str("sluice-internal")},
			map[string]IngressClassInfo{"sluice-internal": {Controller: "sluice.io/ingress-controller"}}, true, ""},
		{"class-less, its controller's class is the default while its own is missing", ClassClaim{},
			map[string]IngressClassInfo{"sluice-internal": {Controller: "sluice.io/ingress-controller", Default: true}}, true, ""},
	}
	for _, c := range cases {
		class := "sluice"
		if c.class != "" {
			class = c.class
		}
		if got := MayReport(c.ing, class, "sluice.io/ingress-controller", c.classes); got != c.want {
			t.Errorf("%s: MayReport = %v, want %v", c.name, got, c.want)
		}
	}
}
