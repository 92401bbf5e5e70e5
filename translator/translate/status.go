package translate

import (
	"net"
	"sort"
	"strings"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// Statuses returns what every Ingress the translator serves should show, sorted by
// namespace and name: the proxy's addresses (when Options.PublishService or
// Options.PublishAddresses give them) and the Ingress's findings in res. Like Translate, it is
// pure.
func Statuses(in Input, opts Options, res *configv1.Resources) []*watchv1.ObjectStatus {
	lb, manage := PublishedAddresses(in, opts)
	addrs := contract.TypedAddresses(lb) // one list, shared by every status
	byObject := map[nsName][]*watchv1.StatusFinding{}
	for _, f := range res.GetFindings() {
		o := f.GetObject()
		if o.GetKind() != "Ingress" {
			continue
		}
		k := nsName{o.GetNamespace(), o.GetName()}
		byObject[k] = append(byObject[k], statusFinding(f))
	}
	served := Served(in, opts)
	out := make([]*watchv1.ObjectStatus, 0, len(served))
	for _, ing := range served {
		st := &watchv1.ObjectStatus{
			Key: IngressKey(ing.Namespace, ing.Name), Uid: string(ing.UID),
			ManageAddresses: manage, Findings: byObject[nsName{ing.Namespace, ing.Name}],
		}
		if manage {
			st.Addresses = addrs
		}
		out = append(out, st)
	}
	SortStatuses(out)
	return out
}

// IngressKey is the status stream's key of the Ingress namespace/name.
func IngressKey(namespace, name string) *watchv1.ObjectKey {
	return &watchv1.ObjectKey{Kind: "Ingress", Namespace: namespace, Name: name}
}

// PublishedAddresses returns the proxy's addresses, sorted, and whether they are known:
// Options.PublishAddresses as given, or the status.loadBalancer and spec.externalIPs of
// Options.PublishService. An absent publish Service means unknown (the statuses are then
// left alone rather than emptied); neither option set means unknown too.
func PublishedAddresses(in Input, opts Options) ([]*watchv1.LoadBalancerIngress, bool) {
	return publishedAddresses(opts, func(k nsName) *service {
		for _, s := range in.Services {
			if s.Namespace == k.ns && s.Name == k.name {
				return compactService(s)
			}
		}
		return nil
	})
}

func publishedAddresses(opts Options, published func(nsName) *service) ([]*watchv1.LoadBalancerIngress, bool) {
	var raw []string
	switch {
	case len(opts.PublishAddresses) > 0:
		raw = opts.PublishAddresses
	case opts.PublishService != "":
		ns, name, _ := strings.Cut(opts.PublishService, "/")
		s := published(nsName{ns, name})
		if s == nil {
			return nil, false
		}
		for _, i := range s.Status.LoadBalancer.Ingress {
			if i.IP != "" {
				raw = append(raw, i.IP)
			} else if i.Hostname != "" {
				raw = append(raw, i.Hostname)
			}
		}
		raw = append(raw, s.Spec.ExternalIPs...)
	default:
		return nil, false
	}
	seen := map[string]bool{}
	var out []*watchv1.LoadBalancerIngress
	for _, a := range raw {
		if seen[a] {
			continue
		}
		seen[a] = true
		if ip := net.ParseIP(a); ip != nil {
			out = append(out, &watchv1.LoadBalancerIngress{Ip: ip.String()})
		} else {
			out = append(out, &watchv1.LoadBalancerIngress{Hostname: a})
		}
	}
	contract.SortLoadBalancer(out)
	return out, true
}

func statusFinding(f *configv1.Finding) *watchv1.StatusFinding {
	return &watchv1.StatusFinding{
		Reason: f.GetReason(), Field: f.GetField(), Message: f.GetCause(),
		Warning: f.GetSeverity() != configv1.FindingSeverity_FINDING_SEVERITY_UNSPECIFIED,
	}
}

// PublishedAddresses is PublishedAddresses over the translator's current objects.
func (t *Translator) PublishedAddresses() ([]*watchv1.LoadBalancerIngress, bool) {
	return publishedAddresses(t.opts, func(k nsName) *service { return t.services[k] })
}

// Status is the desired status of the Ingress namespace/name, nil when it is not served;
// addrs and manage are the published addresses (shared, never modified) and whether they are
// known. It is what Statuses gives for that Ingress from a full translation.
func (t *Translator) Status(key *watchv1.ObjectKey, addrs []*watchv1.GatewayAddress, manage bool) *watchv1.ObjectStatus {
	lo, ok := t.local[nsName{key.GetNamespace(), key.GetName()}]
	if !ok || !lo.served {
		return nil
	}
	st := &watchv1.ObjectStatus{Key: key, Uid: string(lo.meta.UID), ManageAddresses: manage}
	if manage {
		st.Addresses = addrs // shared: the statuses of a build name the same addresses
	}
	if g, ok := t.out.Get(contract.Findings, "Ingress/"+key.GetNamespace()+"/"+key.GetName()).(*configv1.ObjectFindings); ok {
		for _, f := range g.GetFindings() {
			if f.GetObject().GetKind() == "Ingress" {
				st.Findings = append(st.Findings, statusFinding(f))
			}
		}
	}
	return st
}

// ServedKeys returns the keys of every served Ingress, sorted.
func (t *Translator) ServedKeys() []*watchv1.ObjectKey {
	var out []*watchv1.ObjectKey
	for k, lo := range t.local {
		if lo.served {
			out = append(out, IngressKey(k.ns, k.name))
		}
	}
	sort.Slice(out, func(i, j int) bool { return LessObjectKey(out[i], out[j]) })
	return out
}

// TakeStatusChanges returns the Ingresses whose status may have changed since the last
// call (re-translated, or their findings rebuilt), sorted.
func (t *Translator) TakeStatusChanges() []*watchv1.ObjectKey {
	out := make([]*watchv1.ObjectKey, 0, len(t.statusDirty))
	for k := range t.statusDirty {
		out = append(out, IngressKey(k.ns, k.name))
	}
	t.statusDirty = set[nsName]{}
	sort.Slice(out, func(i, j int) bool { return LessObjectKey(out[i], out[j]) })
	return out
}
