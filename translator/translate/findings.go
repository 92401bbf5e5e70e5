package translate

// Findings: each object's findings, rebuilt whole when anything they come from changed (its
// own translation, its conflicts on the hosts it claims, its backends' ready endpoints).

import (
	"fmt"
	"strings"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// buildFindings rebuilds the findings of one object: a broken object's, or an Ingress's own,
// its conflicts on the hosts it claims, and its references to backends without ready
// endpoints (the Gateway API's objects likewise, gatewayFindings).
func (t *Translator) buildFindings(key string) {
	var fs []*configv1.Finding
	if f, ok := t.broken[key]; ok {
		fs = append(fs, f)
	}
	if f, ok := t.quarantines()[key]; ok && t.present(key) {
		fs = append(fs, f)
	}
	if rest, ok := strings.CutPrefix(key, "Ingress/"); ok {
		ns, name, _ := strings.Cut(rest, "/")
		k := nsName{ns, name}
		t.statusDirty.add(k)
		if lo, ok := t.local[k]; ok && lo.served {
			fs = append(fs, lo.findings...)
			for _, h := range lo.claims.hosts {
				fs = append(fs, t.hostFindings[h][key]...)
			}
			for _, r := range lo.refs {
				if b := t.backends[r.name]; b != nil && b.ready == 0 {
					svc, port := parseBackendName(r.name)
					fs = append(fs, findingOf(lo.meta, r.field, sevWarn, "NoReadyEndpoints", fmt.Sprintf("Service %s/%s port %d has no ready endpoints; the route answers 503 until it has", svc.ns, svc.name, port)))
				}
			}
		}
	} else {
		fs = append(fs, t.gatewayFindings(key)...)
		fs = append(fs, t.defaultCertificateFindings(key)...)
	}
	if len(fs) == 0 {
		t.out.Remove(contract.Findings, key)
		return
	}
	contract.SortFindings(fs)
	t.out.Put(contract.Findings, key, &configv1.ObjectFindings{Object: contract.ObjectOfKey(key), Findings: fs})
}

// gatewayFindings are the findings of one Gateway API object (by findings key): its own, its
// conflicts on the hosts it claims, and its references to backends without ready endpoints.
func (t *Translator) gatewayFindings(key string) []*configv1.Finding {
	kind, rest, _ := strings.Cut(key, "/")
	ns, name, _ := strings.Cut(rest, "/")
	k := nsName{ns, name}
	var fs []*configv1.Finding
	switch kind {
	case "Gateway":
		t.gw.statusDirty.add(key)
		if o := t.gw.gwOut[k]; o != nil && o.ours {
			fs = append(fs, o.findings...)
			for h := range o.claims {
				fs = append(fs, t.hostFindings[h][key]...)
			}
		}
	case "ListenerSet":
		t.gw.statusDirty.add(key)
		if so := t.listenerSetOut(k); so != nil {
			fs = append(fs, so.findings...)
		}
	case "HTTPRoute":
		t.gw.statusDirty.add(key)
		if o := t.gw.routeOut[k]; o != nil && o.ours {
			fs = append(fs, o.findings...)
			for h := range o.claims {
				fs = append(fs, t.hostFindings[h][key]...)
			}
			for _, r := range o.refs {
				if b := t.backends[r.name]; b != nil && b.ready == 0 {
					svc, port := parseBackendName(r.name)
					what := "its share of the requests gets 503"
					if strings.Contains(r.field, ".requestMirror.") {
						what = "requests are not mirrored to it"
					}
					fs = append(fs, &configv1.Finding{Object: gwRef("HTTPRoute", ns, name, string(o.rt.UID)), Field: r.field, Severity: sevWarn, Reason: "NoReadyEndpoints",
						Cause: fmt.Sprintf("Service %s/%s port %d has no ready endpoints; %s until it has", svc.ns, svc.name, port, what)})
				}
			}
		}
	}
	return fs
}
