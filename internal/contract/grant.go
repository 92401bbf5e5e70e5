package contract

// GatewayGroup is the Gateway API's API group.
const GatewayGroup = "gateway.networking.k8s.io"

// GrantFrom is one entry of a ReferenceGrant's spec.from: objects of Group and Kind in
// Namespace may refer to the grant's targets.
type GrantFrom struct {
	Group, Kind, Namespace string
}

// GrantTo is one entry of a ReferenceGrant's spec.to: objects of Group and Kind in the
// grant's own namespace; Name empty means every object of that kind.
type GrantTo struct {
	Group, Kind, Name string
}

// Grant is one ReferenceGrant's spec, as plain values (the contract takes no Kubernetes
// types, so that the pusher and the Caddy module do not link them).
type Grant struct {
	From []GrantFrom
	To   []GrantTo
}

// Allows says whether g, which lives in the target's namespace, lets an object of the
// Gateway API's kind fromKind in namespace fromNs refer to the core object toKind/toName.
// The watcher (which Secrets it may serve at all) and the translator (which references
// resolve) decide it with this one rule, so that a reference the translator resolves is
// never one whose Secret the watcher withholds.
func (g Grant) Allows(fromNs, fromKind, toKind, toName string) bool {
	from := false
	for _, f := range g.From {
		if f.Group == GatewayGroup && f.Kind == fromKind && f.Namespace == fromNs {
			from = true
			break
		}
	}
	if !from {
		return false
	}
	for _, t := range g.To {
		if t.Group == "" && t.Kind == toKind && (t.Name == "" || t.Name == toName) {
			return true
		}
	}
	return false
}
