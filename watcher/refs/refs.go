// Package refs owns which TLS Secrets the watch stream may carry: exactly those a watched
// route object references. An Ingress's spec.tls[].secretName and its proxy-ssl-secret
// annotation name Secrets of its own namespace; a Gateway's or a ListenerSet's listener's tls.certificateRefs names one of its
// own namespace, or of another namespace while a ReferenceGrant there allows objects of its
// kind and namespace to refer to it. No other Secret, and so no other private key, leaves the watcher.
//
// It is reference bookkeeping over objects the watcher already holds, never translation:
// Of reads one object's references, Served is the whole rule as a pure function (references
// in, served Secrets out), and Index keeps the same answer incrementally, telling on every
// change which Secrets became served and which stopped being served, in O(the change).
package refs

import (
	"fmt"
	"sort"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sluice-io/sluice/internal/contract"
)

// SecretKey names a Secret.
type SecretKey struct {
	Namespace, Name string
}

func (k SecretKey) String() string { return k.Namespace + "/" + k.Name }

// Owner names an object that references Secrets or grants references to them.
type Owner struct {
	// Kind is the object's kind ("Ingress", "Gateway", "ListenerSet", "ReferenceGrant").
	Kind, Namespace, Name string
}

func (o Owner) String() string { return o.Kind + " " + o.Namespace + "/" + o.Name }

// Refs is what one object contributes to the rule.
type Refs struct {
	// Secrets are the Secrets the object names (an Ingress's: all in its own namespace).
	Secrets []SecretKey
	// Grant is a ReferenceGrant's spec; nil for any other object.
	Grant *contract.Grant
}

// empty reports whether r contributes nothing.
func (r *Refs) empty() bool { return r == nil || (len(r.Secrets) == 0 && r.Grant == nil) }

// The kinds that reference or grant, by group and kind.
var (
	ingressGK        = schema.GroupKind{Group: networkingv1.GroupName, Kind: "Ingress"}
	gatewayGK        = schema.GroupKind{Group: contract.GatewayGroup, Kind: "Gateway"}
	referenceGrantGK = schema.GroupKind{Group: contract.GatewayGroup, Kind: "ReferenceGrant"}
	listenerSetGK    = schema.GroupKind{Group: contract.GatewayGroup, Kind: "ListenerSet"}
)

// Tracked reports whether objects of gk may reference or grant (an Ingress, a Gateway or a
// ListenerSet, a ReferenceGrant): only their changes can change the served set.
func Tracked(gk schema.GroupKind) bool {
	return gk == ingressGK || gk == gatewayGK || gk == listenerSetGK || gk == referenceGrantGK
}

// Of reads the references of obj, an object of kind gk as an informer delivers it (a typed
// Ingress, or any of the kinds as unstructured). It returns nil for an object of another
// kind, or one that references nothing.
func Of(gk schema.GroupKind, obj runtime.Object) (*Refs, error) {
	if !Tracked(gk) {
		return nil, nil
	}
	var r *Refs
	switch gk {
	case ingressGK:
		ing := &networkingv1.Ingress{}
		if err := into(obj, ing); err != nil {
			return nil, err
		}
		r = ofIngress(ing)
	case gatewayGK:
		gw := &gatewayv1.Gateway{}
		if err := into(obj, gw); err != nil {
			return nil, err
		}
		r = ofListeners(gw.Namespace, gw.Spec.Listeners)
	case listenerSetGK:
		ls := &gatewayv1.ListenerSet{}
		if err := into(obj, ls); err != nil {
			return nil, err
		}
		ls2 := make([]gatewayv1.Listener, 0, len(ls.Spec.Listeners))
		for _, e := range ls.Spec.Listeners {
			ls2 = append(ls2, gatewayv1.Listener{TLS: e.TLS})
		}
		r = ofListeners(ls.Namespace, ls2)
	case referenceGrantGK:
		// v1 and v1beta1 share the spec's shape; the v1 type reads both.
		g := &gatewayv1.ReferenceGrant{}
		if err := into(obj, g); err != nil {
			return nil, err
		}
		r = &Refs{Grant: GrantOf(g)}
	}
	if r.empty() {
		return nil, nil
	}
	return r, nil
}

// into sets out from obj: obj itself when it has out's type, else converted from its
// unstructured form.
func into[T any](obj runtime.Object, out *T) error {
	if typed, ok := any(obj).(*T); ok {
		*out = *typed
		return nil
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("refs: want %T or unstructured, got %T", out, obj)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return fmt.Errorf("refs: read %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

func ofIngress(ing *networkingv1.Ingress) *Refs {
	r := &Refs{}
	for _, t := range ing.Spec.TLS {
		if t.SecretName != "" {
			r.Secrets = append(r.Secrets, SecretKey{ing.Namespace, t.SecretName})
		}
	}
	// proxy-ssl-secret: the one Secret contract.ProxySSLSecret says the translator resolves.
	if v, ok := ing.Annotations[contract.ProxySSLSecretAnnotation]; ok {
		if ns, name, why := contract.ProxySSLSecret(ing.Namespace, v); why == "" {
			r.Secrets = append(r.Secrets, SecretKey{ns, name})
		}
	}
	r.Secrets = uniq(r.Secrets)
	return r
}

// ofListeners are the certificateRefs of a Gateway's or a ListenerSet's listeners, of
// namespace ns.
func ofListeners(ns0 string, listeners []gatewayv1.Listener) *Refs {
	r := &Refs{}
	for _, l := range listeners {
		if l.TLS == nil {
			continue
		}
		for _, ref := range l.TLS.CertificateRefs {
			// Only core Secrets: the translator refuses any other certificateRef kind.
			if (ref.Group != nil && *ref.Group != "") || (ref.Kind != nil && *ref.Kind != "Secret") {
				continue
			}
			ns := ns0
			if ref.Namespace != nil && *ref.Namespace != "" {
				ns = string(*ref.Namespace)
			}
			r.Secrets = append(r.Secrets, SecretKey{ns, string(ref.Name)})
		}
	}
	r.Secrets = uniq(r.Secrets)
	return r
}

// GrantOf is a ReferenceGrant's spec as the contract reads it.
func GrantOf(g *gatewayv1.ReferenceGrant) *contract.Grant {
	out := &contract.Grant{}
	for _, f := range g.Spec.From {
		out.From = append(out.From, contract.GrantFrom{Group: string(f.Group), Kind: string(f.Kind), Namespace: string(f.Namespace)})
	}
	for _, t := range g.Spec.To {
		to := contract.GrantTo{Group: string(t.Group), Kind: string(t.Kind)}
		if t.Name != nil {
			to.Name = string(*t.Name)
		}
		out.To = append(out.To, to)
	}
	return out
}

func uniq(ks []SecretKey) []SecretKey {
	sortKeys(ks)
	out := ks[:0]
	for i, k := range ks {
		if i == 0 || k != ks[i-1] {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func sortKeys(ks []SecretKey) {
	sort.Slice(ks, func(i, j int) bool {
		if ks[i].Namespace != ks[j].Namespace {
			return ks[i].Namespace < ks[j].Namespace
		}
		return ks[i].Name < ks[j].Name
	})
}

// allowed says whether owner o's reference to Secret k may be served, given the grants of
// k's namespace: a reference within one namespace always; across namespaces only a
// Gateway's or a ListenerSet's, and only while a grant there allows its kind.
func allowed(o Owner, k SecretKey, grants map[Owner]*contract.Grant) bool {
	if o.Namespace == k.Namespace {
		return true
	}
	if o.Kind != gatewayGK.Kind && o.Kind != listenerSetGK.Kind {
		return false
	}
	for _, g := range grants {
		if g.Allows(o.Namespace, o.Kind, "Secret", k.Name) {
			return true
		}
	}
	return false
}

// Served is the rule whole: given every object's references, the Secrets the watch stream
// may carry, sorted.
func Served(objects map[Owner]*Refs) []SecretKey {
	grants := map[string]map[Owner]*contract.Grant{} // namespace -> grants there
	for o, r := range objects {
		if r != nil && r.Grant != nil {
			if grants[o.Namespace] == nil {
				grants[o.Namespace] = map[Owner]*contract.Grant{}
			}
			grants[o.Namespace][o] = r.Grant
		}
	}
	set := map[SecretKey]bool{}
	for o, r := range objects {
		if r == nil {
			continue
		}
		for _, k := range r.Secrets {
			if allowed(o, k, grants[k.Namespace]) {
				set[k] = true
			}
		}
	}
	var out []SecretKey
	for k := range set {
		out = append(out, k)
	}
	sortKeys(out)
	return out
}

// Change is what one change of an owner did to the served set, each list sorted.
type Change struct {
	// Added are Secrets served from now on: the stream carries each before the event that
	// references it.
	Added []SecretKey
	// Removed are Secrets no longer served: the stream deletes each after the event.
	Removed []SecretKey
}

// Index keeps Served incrementally. It is not safe for concurrent use: the watcher's
// controller, which owns the store, owns it too.
type Index struct {
	owners map[Owner]*Refs
	// users: Secret -> the owners naming it.
	users map[SecretKey]map[Owner]struct{}
	// grants: namespace -> the ReferenceGrants there.
	grants map[string]map[Owner]*contract.Grant
	// crossIn: namespace -> the Secrets there named from another namespace, which a grant
	// of that namespace may decide.
	crossIn map[string]map[SecretKey]int
	served  map[SecretKey]bool
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{owners: map[Owner]*Refs{}, users: map[SecretKey]map[Owner]struct{}{},
		grants: map[string]map[Owner]*contract.Grant{}, crossIn: map[string]map[SecretKey]int{}, served: map[SecretKey]bool{}}
}

// Served reports whether Secret k is served now.
func (x *Index) Served(k SecretKey) bool { return x.served[k] }

// Len is the number of Secrets served.
func (x *Index) Len() int { return len(x.served) }

// Set records o's references (nil or empty: none) and returns what that changed.
func (x *Index) Set(o Owner, r *Refs) Change {
	if r.empty() {
		r = nil
	}
	old := x.owners[o]
	if old == nil && r == nil {
		return Change{}
	}
	affected := map[SecretKey]bool{}
	x.unlink(o, old, affected)
	if r != nil {
		x.owners[o] = r
		x.link(o, r, affected)
	} else {
		delete(x.owners, o)
	}
	return x.decide(affected)
}

// Delete forgets o and returns what that changed.
func (x *Index) Delete(o Owner) Change { return x.Set(o, nil) }

func (x *Index) unlink(o Owner, r *Refs, affected map[SecretKey]bool) {
	if r == nil {
		return
	}
	for _, k := range r.Secrets {
		affected[k] = true
		delete(x.users[k], o)
		if len(x.users[k]) == 0 {
			delete(x.users, k)
		}
		if k.Namespace != o.Namespace {
			if x.crossIn[k.Namespace][k]--; x.crossIn[k.Namespace][k] <= 0 {
				delete(x.crossIn[k.Namespace], k)
				if len(x.crossIn[k.Namespace]) == 0 {
					delete(x.crossIn, k.Namespace)
				}
			}
		}
	}
	if r.Grant != nil {
		for k := range x.crossIn[o.Namespace] {
			affected[k] = true
		}
		delete(x.grants[o.Namespace], o)
		if len(x.grants[o.Namespace]) == 0 {
			delete(x.grants, o.Namespace)
		}
	}
}

func (x *Index) link(o Owner, r *Refs, affected map[SecretKey]bool) {
	for _, k := range r.Secrets {
		affected[k] = true
		if x.users[k] == nil {
			x.users[k] = map[Owner]struct{}{}
		}
		x.users[k][o] = struct{}{}
		if k.Namespace != o.Namespace {
			if x.crossIn[k.Namespace] == nil {
				x.crossIn[k.Namespace] = map[SecretKey]int{}
			}
			x.crossIn[k.Namespace][k]++
		}
	}
	if r.Grant != nil {
		if x.grants[o.Namespace] == nil {
			x.grants[o.Namespace] = map[Owner]*contract.Grant{}
		}
		x.grants[o.Namespace][o] = r.Grant
		for k := range x.crossIn[o.Namespace] {
			affected[k] = true
		}
	}
}

// decide settles each affected Secret and returns the differences.
func (x *Index) decide(affected map[SecretKey]bool) Change {
	var ch Change
	for k := range affected {
		now := false
		for o := range x.users[k] {
			if allowed(o, k, x.grants[k.Namespace]) {
				now = true
				break
			}
		}
		switch was := x.served[k]; {
		case now && !was:
			x.served[k] = true
			ch.Added = append(ch.Added, k)
		case !now && was:
			delete(x.served, k)
			ch.Removed = append(ch.Removed, k)
		}
	}
	sortKeys(ch.Added)
	sortKeys(ch.Removed)
	return ch
}
