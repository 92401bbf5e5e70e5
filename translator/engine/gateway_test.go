package engine

import (
	"fmt"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/sluice-io/sluice/internal/watchstream"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/translator/translate"
)

var (
	gwClassKind = &watchv1.GroupVersionKind{Group: translate.GatewayGroup, Version: "v1", Kind: "GatewayClass"}
	gatewayKind = &watchv1.GroupVersionKind{Group: translate.GatewayGroup, Version: "v1", Kind: "Gateway"}
	routeKind   = &watchv1.GroupVersionKind{Group: translate.GatewayGroup, Version: "v1", Kind: "HTTPRoute"}
	grantKind   = &watchv1.GroupVersionKind{Group: translate.GatewayGroup, Version: "v1beta1", Kind: "ReferenceGrant"}
)

// gwObject is a Gateway API object as the watcher sends a custom resource: JSON, with its
// group, version and kind.
func gwObject(kind *watchv1.GroupVersionKind, ns, name, rv, spec string) *watchv1.Object {
	raw := fmt.Sprintf(`{"apiVersion":"%s/%s","kind":%q,"metadata":{"name":%q,"namespace":%q,"resourceVersion":%q,"generation":1},"spec":%s}`,
		kind.GetGroup(), kind.GetVersion(), kind.GetKind(), name, ns, rv, spec)
	return &watchv1.Object{Kind: kind, Namespace: ns, Name: name, ResourceVersion: rv, ContentType: watchstream.ContentTypeJSON, Raw: []byte(raw)}
}

func routeTo(host string) string {
	return `{"parentRefs":[{"name":"gw"}],"hostnames":["` + host + `"],"rules":[{"backendRefs":[{"name":"web","namespace":"other","port":80}]}]}`
}

func hasHost(c *configv1.Config, host string) bool {
	for _, vh := range c.GetResources().GetVirtualHosts() {
		if vh.GetHostname() == host {
			return true
		}
	}
	return false
}

// docs/translation.md, "Gateway API": the engine feeds the Gateway API's kinds from the watch stream (custom resources
// as JSON with their GVK, ReferenceGrant in v1beta1), so an HTTPRoute is served once the
// marker verified and its statuses are offered with the Ingresses'; a change of the route
// re-offers its status, and a route that does not decode is a finding of its own while the
// others stay served (scenario 8).
func TestGatewayAPIKindsFedFromTheWatchStream(t *testing.T) {
	sink := &statusSink{}
	fw, rec := setupWith(t, func(c *Config) {
		c.Status = sink
		c.Logger = hclog.NewNullLogger()
	})
	class := gwObject(gwClassKind, "", "sluice", "1", `{"controllerName":"sluice.io/gateway-controller"}`)
	gw := gwObject(gatewayKind, "ns", "gw", "2", `{"gatewayClassName":"sluice","listeners":[{"name":"http","protocol":"HTTP","port":80}]}`)
	route := gwObject(routeKind, "ns", "r", "3", routeTo("a.example.com"))
	grant := gwObject(grantKind, "other", "g", "4", `{"from":[{"group":"gateway.networking.k8s.io","kind":"HTTPRoute","namespace":"ns"}],"to":[{"group":"","kind":"Service"}]}`)
	svc := &watchv1.Object{Kind: svcKind, Namespace: "other", Name: "web", ResourceVersion: "5", ContentType: watchstream.ContentTypeJSON,
		Raw: []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"other","resourceVersion":"5"},"spec":{"ports":[{"port":80}]}}`)}
	kinds := []*watchv1.GroupVersionKind{svcKind, gwClassKind, gatewayKind, routeKind, grantKind}
	objs := []*watchv1.Object{class, gw, route, grant, svc}
	fw.scripts <- func(send func(*watchv1.WatchResponse)) error {
		send(msg("w1", 5, &watchv1.SnapshotStart{Count: uint64(len(objs)), Kinds: kinds}))
		for _, o := range objs {
			send(msg("w1", 5, &watchv1.Upsert{Object: o}))
		}
		send(msg("w1", 5, &watchv1.SnapshotEnd{}))
		inv := &watchv1.InitialSyncComplete{}
		for _, k := range kinds {
			var of []*watchv1.Object
			for _, o := range objs {
				if o.GetKind() == k {
					of = append(of, o)
				}
			}
			inv.Inventory = append(inv.Inventory, watchstream.InventoryOf(k, of))
		}
		send(msg("w1", 5, inv))
		moved := gwObject(routeKind, "ns", "r", "6", routeTo("b.example.com"))
		send(&watchv1.WatchResponse{Epoch: "w1", Revision: 6, Event: &watchv1.WatchResponse_Upsert{Upsert: &watchv1.Upsert{Object: moved}}})
		broken := gwObject(routeKind, "ns", "broken", "7", `"not a spec"`)
		send(&watchv1.WatchResponse{Epoch: "w1", Revision: 7, Event: &watchv1.WatchResponse_Upsert{Upsert: &watchv1.Upsert{Object: broken}}})
		return nil
	}
	rec.waitUntil(t, "the first config, with the HTTPRoute's host", func(_ []string, c []*configv1.Config) bool {
		return len(c) > 0 && hasHost(c[0], "a.example.com")
	})
	rec.waitUntil(t, "the route moved to b.example.com, and the broken route's finding", func(_ []string, c []*configv1.Config) bool {
		if len(c) == 0 {
			return false
		}
		last := c[len(c)-1]
		undecodable := false
		for _, f := range last.GetResources().GetFindings() {
			if f.GetObject().GetKind() == "HTTPRoute" && f.GetObject().GetName() == "broken" && f.GetReason() == "Undecodable" {
				undecodable = true
			}
		}
		return hasHost(last, "b.example.com") && !hasHost(last, "a.example.com") && undecodable
	})
	if n := len(sink.last("GatewayClass")) + len(sink.last("Gateway")) + len(sink.last("HTTPRoute")); n != 3 {
		t.Fatalf("%d Gateway API statuses offered, want the GatewayClass, the Gateway and the HTTPRoute", n)
	}
	st := sink.get("HTTPRoute/ns/r")
	if len(st.GetParents()) != 1 {
		t.Fatalf("HTTPRoute status = %v, want one parent", st)
	}
	for _, c := range st.GetParents()[0].GetConditions() {
		if c.GetStatus() != "True" {
			t.Fatalf("HTTPRoute condition %v is not True: the v1beta1 ReferenceGrant was not read", c)
		}
	}
	if gws := sink.get("Gateway/ns/gw"); gws.GetListeners()[0].GetAttachedRoutes() != 1 {
		t.Fatalf("Gateway status = %v, want one attached route", gws)
	}
}
