package refs

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sluice-io/sluice/internal/contract"
)

func ing(ns, name string, secrets ...string) (Owner, *Refs) {
	r := &Refs{}
	for _, s := range secrets {
		r.Secrets = append(r.Secrets, SecretKey{ns, s})
	}
	return Owner{"Ingress", ns, name}, r
}

func gw(ns, name string, secrets ...SecretKey) (Owner, *Refs) {
	return Owner{"Gateway", ns, name}, &Refs{Secrets: secrets}
}

func grant(ns, name string, from []contract.GrantFrom, to ...contract.GrantTo) (Owner, *Refs) {
	return Owner{"ReferenceGrant", ns, name}, &Refs{Grant: &contract.Grant{From: from, To: to}}
}

var (
	fromGatewaysOfA = []contract.GrantFrom{{Group: contract.GatewayGroup, Kind: "Gateway", Namespace: "a"}}
	anySecret       = contract.GrantTo{Kind: "Secret"}
)

// TestServedOnlyWhileReferenced is the rule of "TLS Secrets only where a route uses them"
// (docs/design.md, the watch stream): references in, the served set out.
func TestServedOnlyWhileReferenced(t *testing.T) {
	type obj struct {
		o Owner
		r *Refs
	}
	k := func(ns, name string) SecretKey { return SecretKey{ns, name} }
	cases := []struct {
		name string
		in   []obj
		want []SecretKey
	}{
		{"nothing references: nothing served", nil, nil},
		{"an Ingress's secretName, its own namespace", []obj{
			func() obj { o, r := ing("a", "web", "web-tls"); return obj{o, r} }(),
		}, []SecretKey{k("a", "web-tls")}},
		{"two Ingresses naming one Secret serve it once", []obj{
			func() obj { o, r := ing("a", "x", "tls"); return obj{o, r} }(),
			func() obj { o, r := ing("a", "y", "tls"); return obj{o, r} }(),
		}, []SecretKey{k("a", "tls")}},
		{"a Gateway's certificateRef in its own namespace", []obj{
			func() obj { o, r := gw("a", "gw", k("a", "gw-tls")); return obj{o, r} }(),
		}, []SecretKey{k("a", "gw-tls")}},
		{"a Gateway's certificateRef across namespaces without a grant: not served", []obj{
			func() obj { o, r := gw("a", "gw", k("b", "shared")); return obj{o, r} }(),
		}, nil},
		{"a ListenerSet's certificateRef in its own namespace", []obj{
			{Owner{"ListenerSet", "a", "ls"}, &Refs{Secrets: []SecretKey{k("a", "ls-tls")}}},
		}, []SecretKey{k("a", "ls-tls")}},
		{"a ListenerSet's across namespaces: only with a grant for ListenerSets, not Gateways", []obj{
			{Owner{"ListenerSet", "a", "ls"}, &Refs{Secrets: []SecretKey{k("b", "shared")}}},
			func() obj { o, r := grant("b", "g", fromGatewaysOfA, anySecret); return obj{o, r} }(),
		}, nil},
		{"a ListenerSet's across namespaces with a grant for ListenerSets of a", []obj{
			{Owner{"ListenerSet", "a", "ls"}, &Refs{Secrets: []SecretKey{k("b", "shared")}}},
			func() obj {
				o, r := grant("b", "g", []contract.GrantFrom{{Group: contract.GatewayGroup, Kind: "ListenerSet", Namespace: "a"}}, anySecret)
				return obj{o, r}
			}(),
		}, []SecretKey{k("b", "shared")}},
		{"with a grant in the Secret's namespace for Gateways of a", []obj{
			func() obj { o, r := gw("a", "gw", k("b", "shared")); return obj{o, r} }(),
			func() obj { o, r := grant("b", "g", fromGatewaysOfA, anySecret); return obj{o, r} }(),
		}, []SecretKey{k("b", "shared")}},
		{"a grant naming another Secret does not allow this one", []obj{
			func() obj { o, r := gw("a", "gw", k("b", "shared")); return obj{o, r} }(),
			func() obj {
				o, r := grant("b", "g", fromGatewaysOfA, contract.GrantTo{Kind: "Secret", Name: "other"})
				return obj{o, r}
			}(),
		}, nil},
		{"a grant naming this Secret allows it", []obj{
			func() obj { o, r := gw("a", "gw", k("b", "shared")); return obj{o, r} }(),
			func() obj {
				o, r := grant("b", "g", fromGatewaysOfA, contract.GrantTo{Kind: "Secret", Name: "shared"})
				return obj{o, r}
			}(),
		}, []SecretKey{k("b", "shared")}},
		{"a grant in the Gateway's namespace, not the Secret's, allows nothing", []obj{
			func() obj { o, r := gw("a", "gw", k("b", "shared")); return obj{o, r} }(),
			func() obj { o, r := grant("a", "g", fromGatewaysOfA, anySecret); return obj{o, r} }(),
		}, nil},
		{"a grant for Gateways of another namespace allows nothing", []obj{
			func() obj { o, r := gw("a", "gw", k("b", "shared")); return obj{o, r} }(),
			func() obj {
				o, r := grant("b", "g", []contract.GrantFrom{{Group: contract.GatewayGroup, Kind: "Gateway", Namespace: "c"}}, anySecret)
				return obj{o, r}
			}(),
		}, nil},
		{"a grant for HTTPRoutes allows no Gateway", []obj{
			func() obj { o, r := gw("a", "gw", k("b", "shared")); return obj{o, r} }(),
			func() obj {
				o, r := grant("b", "g", []contract.GrantFrom{{Group: contract.GatewayGroup, Kind: "HTTPRoute", Namespace: "a"}}, anySecret)
				return obj{o, r}
			}(),
		}, nil},
		{"a grant to Services allows no Secret", []obj{
			func() obj { o, r := gw("a", "gw", k("b", "shared")); return obj{o, r} }(),
			func() obj {
				o, r := grant("b", "g", fromGatewaysOfA, contract.GrantTo{Kind: "Service"})
				return obj{o, r}
			}(),
		}, nil},
		{"a grant alone serves nothing", []obj{
			func() obj { o, r := grant("b", "g", fromGatewaysOfA, anySecret); return obj{o, r} }(),
		}, nil},
		{"an Ingress's reference never crosses namespaces, even with a grant", []obj{
			{Owner{"Ingress", "a", "x"}, &Refs{Secrets: []SecretKey{k("b", "shared")}}},
			func() obj { o, r := grant("b", "g", fromGatewaysOfA, anySecret); return obj{o, r} }(),
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := map[Owner]*Refs{}
			for _, o := range tc.in {
				in[o.o] = o.r
			}
			if got := Served(in); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Served = %v, want %v", got, tc.want)
			}
			// The index, fed the same objects in any order, agrees.
			for _, order := range [][]obj{tc.in, reversed(tc.in)} {
				x := NewIndex()
				for _, o := range order {
					x.Set(o.o, o.r)
				}
				if got := x.list(); !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("Index = %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func reversed[T any](xs []T) []T {
	out := make([]T, len(xs))
	for i, x := range xs {
		out[len(xs)-1-i] = x
	}
	return out
}

func (x *Index) list() []SecretKey {
	var out []SecretKey
	for k := range x.served {
		out = append(out, k)
	}
	sortKeys(out)
	return out
}

// TestIndexChangesInStreamOrder: the changes the controller turns into upserts before the
// referencing event and deletes after it.
func TestIndexChangesInStreamOrder(t *testing.T) {
	x := NewIndex()
	k := SecretKey{"b", "shared"}
	steps := []struct {
		name string
		do   func() Change
		want Change
	}{
		{"the Gateway names an ungranted Secret", func() Change { return x.Set(gw("a", "gw", k)) }, Change{}},
		{"the grant appears: the Secret is added", func() Change { return x.Set(grant("b", "g", fromGatewaysOfA, anySecret)) }, Change{Added: []SecretKey{k}}},
		{"an Ingress of b names it too: no change", func() Change { return x.Set(ing("b", "web", "shared")) }, Change{}},
		{"the grant goes: the Ingress still serves it", func() Change { return x.Delete(Owner{"ReferenceGrant", "b", "g"}) }, Change{}},
		{"the Ingress drops it: removed", func() Change { return x.Set(ing("b", "web")) }, Change{Removed: []SecretKey{k}}},
		{"the grant comes back: added", func() Change { return x.Set(grant("b", "g2", fromGatewaysOfA, anySecret)) }, Change{Added: []SecretKey{k}}},
		{"the listener is edited to a Secret of its own namespace", func() Change { return x.Set(gw("a", "gw", SecretKey{"a", "own"})) },
			Change{Added: []SecretKey{{"a", "own"}}, Removed: []SecretKey{k}}},
		{"the Gateway is deleted", func() Change { return x.Delete(Owner{"Gateway", "a", "gw"}) }, Change{Removed: []SecretKey{{"a", "own"}}}},
		{"deleting it again changes nothing", func() Change { return x.Delete(Owner{"Gateway", "a", "gw"}) }, Change{}},
	}
	for _, s := range steps {
		if got := s.do(); !reflect.DeepEqual(got, s.want) {
			t.Fatalf("%s: got %+v, want %+v", s.name, got, s.want)
		}
	}
	if x.Len() != 0 || len(x.users) != 0 || len(x.crossIn) != 0 || len(x.owners) != 1 {
		t.Fatalf("index not back to only the grant: %d served, %d users, %d crossIn, %d owners", x.Len(), len(x.users), len(x.crossIn), len(x.owners))
	}
}

// TestIndexEqualsServedUnderRandomChanges: after every change of a random sequence, the
// incremental index equals the whole rule, and the changes it reported replay to it.
func TestIndexEqualsServedUnderRandomChanges(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		x := NewIndex()
		objects := map[Owner]*Refs{}
		replayed := map[SecretKey]bool{}
		nss := []string{"a", "b", "c"}
		secret := func() SecretKey { return SecretKey{nss[r.IntN(3)], fmt.Sprint("s", r.IntN(4))} }
		for step := 0; step < 60; step++ {
			ns := nss[r.IntN(3)]
			var o Owner
			var refs *Refs
			switch r.IntN(3) {
			case 0:
				o = Owner{"Ingress", ns, fmt.Sprint("i", r.IntN(3))}
				refs = &Refs{}
				for n := r.IntN(3); n > 0; n-- {
					refs.Secrets = append(refs.Secrets, SecretKey{ns, fmt.Sprint("s", r.IntN(4))})
				}
				refs.Secrets = uniq(refs.Secrets)
			case 1:
				o = Owner{"Gateway", ns, fmt.Sprint("g", r.IntN(2))}
				refs = &Refs{}
				for n := r.IntN(3); n > 0; n-- {
					refs.Secrets = append(refs.Secrets, secret())
				}
				refs.Secrets = uniq(refs.Secrets)
			default:
				o = Owner{"ReferenceGrant", ns, fmt.Sprint("rg", r.IntN(2))}
				to := contract.GrantTo{Kind: "Secret"}
				if r.IntN(2) == 0 {
					to.Name = fmt.Sprint("s", r.IntN(4))
				}
				refs = &Refs{Grant: &contract.Grant{From: []contract.GrantFrom{{Group: contract.GatewayGroup, Kind: "Gateway", Namespace: nss[r.IntN(3)]}}, To: []contract.GrantTo{to}}}
			}
			var ch Change
			if r.IntN(4) == 0 {
				delete(objects, o)
				ch = x.Delete(o)
			} else {
				objects[o] = refs
				ch = x.Set(o, refs)
			}
			for _, k := range ch.Added {
				if replayed[k] {
					t.Fatalf("seed %d step %d: %v added twice", seed, step, k)
				}
				replayed[k] = true
			}
			for _, k := range ch.Removed {
				if !replayed[k] {
					t.Fatalf("seed %d step %d: %v removed but not served", seed, step, k)
				}
				delete(replayed, k)
			}
			want := Served(objects)
			if got := x.list(); !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d step %d: index %v, rule %v", seed, step, got, want)
			}
			var fromChanges []SecretKey
			for k := range replayed {
				fromChanges = append(fromChanges, k)
			}
			sortKeys(fromChanges)
			if !reflect.DeepEqual(fromChanges, want) {
				t.Fatalf("seed %d step %d: changes replay to %v, rule %v", seed, step, fromChanges, want)
			}
		}
	}
}

// TestOfReadsEachKind: the references as the informers deliver the objects (typed
// Ingresses; unstructured Gateways and ReferenceGrants).
func TestOfReadsEachKind(t *testing.T) {
	ingress := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web"},
		Spec: networkingv1.IngressSpec{TLS: []networkingv1.IngressTLS{{SecretName: "z"}, {Hosts: []string{"x"}}, {SecretName: "y"}, {SecretName: "z"}}}}
	other := gatewayv1.Namespace("b")
	core, secretKind, svcKind := gatewayv1.Group(""), gatewayv1.Kind("Secret"), gatewayv1.Kind("Service")
	cm := gatewayv1.Group("example.com")
	gateway := &gatewayv1.Gateway{TypeMeta: metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "Gateway"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "gw"},
		Spec: gatewayv1.GatewaySpec{Listeners: []gatewayv1.Listener{
			{Name: "http"},
			{Name: "https", TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{
				{Name: "own"}, {Name: "shared", Namespace: &other, Group: &core, Kind: &secretKind},
				{Name: "svc", Kind: &svcKind}, {Name: "custom", Group: &cm},
			}}},
		}}}
	name := gatewayv1.ObjectName("shared")
	rg := &gatewayv1.ReferenceGrant{TypeMeta: metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1beta1", Kind: "ReferenceGrant"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "g"},
		Spec: gatewayv1.ReferenceGrantSpec{From: []gatewayv1.ReferenceGrantFrom{{Group: contract.GatewayGroup, Kind: "Gateway", Namespace: "a"}},
			To: []gatewayv1.ReferenceGrantTo{{Kind: "Secret", Name: &name}, {Kind: "Secret"}}}}
	unstr := func(o runtime.Object) runtime.Object {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		return &unstructured.Unstructured{Object: m}
	}
	cases := []struct {
		name string
		gk   string
		obj  runtime.Object
		want *Refs
	}{
		{"typed Ingress: its Secrets, sorted, once each", "Ingress", ingress, &Refs{Secrets: []SecretKey{{"a", "y"}, {"a", "z"}}}},
		{"unstructured Ingress reads the same", "Ingress", unstr(ingress), &Refs{Secrets: []SecretKey{{"a", "y"}, {"a", "z"}}}},
		{"an Ingress without TLS references nothing", "Ingress", &networkingv1.Ingress{}, nil},
		{"an Ingress's proxy-ssl-secret of its own namespace, with or without it", "Ingress", &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "up",
			Annotations: map[string]string{contract.ProxySSLSecretAnnotation: "a/upstream"}}}, &Refs{Secrets: []SecretKey{{"a", "upstream"}}}},
		{"a bare name is of the Ingress's namespace", "Ingress", &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "up",
			Annotations: map[string]string{contract.ProxySSLSecretAnnotation: "upstream"}}}, &Refs{Secrets: []SecretKey{{"a", "upstream"}}}},
		{"a proxy-ssl-secret of another namespace is not referenced", "Ingress", &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "up",
			Annotations: map[string]string{contract.ProxySSLSecretAnnotation: "b/upstream"}}}, nil},
		{"Gateway: core Secrets only, defaulting to its namespace", "Gateway", unstr(gateway), &Refs{Secrets: []SecretKey{{"a", "own"}, {"b", "shared"}}}},
		{"ReferenceGrant: its spec", "ReferenceGrant", unstr(rg), &Refs{Grant: &contract.Grant{
			From: []contract.GrantFrom{{Group: contract.GatewayGroup, Kind: "Gateway", Namespace: "a"}},
			To:   []contract.GrantTo{{Kind: "Secret", Name: "shared"}, {Kind: "Secret"}}}}},
		{"ListenerSet: its listeners' core Secrets, like a Gateway's", "ListenerSet", unstr(&gatewayv1.ListenerSet{
			TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "ListenerSet"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "ls"},
			Spec:       gatewayv1.ListenerSetSpec{Listeners: []gatewayv1.ListenerEntry{{Name: "https", TLS: gateway.Spec.Listeners[1].TLS}}}}),
			&Refs{Secrets: []SecretKey{{"a", "own"}, {"b", "shared"}}}},
		{"an HTTPRoute is not tracked", "HTTPRoute", unstr(gateway), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			group := contract.GatewayGroup
			if tc.gk == "Ingress" {
				group = networkingv1.GroupName
			}
			gk := ingressGK
			gk.Group, gk.Kind = group, tc.gk
			got, err := Of(gk, tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Of = %+v, want %+v", got, tc.want)
			}
		})
	}
	if _, err := Of(gatewayGK, &networkingv1.Ingress{}); err == nil {
		t.Fatal("Of read a Gateway from an Ingress")
	}
}
