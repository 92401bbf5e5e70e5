package status

//lint:file-ignore SA1019 these tests send reports in the earlier per-API shape on purpose.

import (
	"testing"

	"google.golang.org/protobuf/proto"

	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// mixedShapes is a report that carries objects in both shapes (refused).
func mixedShapes(src string) *watchv1.ReportStatusRequest {
	return &watchv1.ReportStatusRequest{Source: src, Objects: []*watchv1.ObjectStatus{ingressStatus("ns", "b")},
		Statuses: []*watchv1.IngressStatus{{Key: &watchv1.IngressKey{Namespace: "ns", Name: "c"}, Uid: "u-c"}}}
}

// docs/protocol.md, "The status stream": a report of a translator before the one shape (its
// Ingresses in statuses/removed, its Gateway API objects in gateway_statuses/removed_gateway)
// is taken as the same report in the one shape, so that a rolling upgrade loses no status:
// addresses become typed addresses, every field of a Gateway API status is kept, and the
// removals keep their keys.
func TestEarlierReportShapeIsTakenAsTheOneShape(t *testing.T) {
	finding := &watchv1.StatusFinding{Reason: "ServiceNotFound", Field: "spec.defaultBackend", Message: "Service ns/x not found", Warning: true}
	cond := &watchv1.Condition{Type: "Accepted", Status: "True", Reason: "Accepted", ObservedGeneration: 3}
	listener := &watchv1.ListenerStatus{Name: "http", AttachedRoutes: 2, Conditions: []*watchv1.Condition{cond}}
	parent := &watchv1.RouteParentStatus{ParentRef: &watchv1.ParentReference{Name: "gw"}, Conditions: []*watchv1.Condition{cond}}
	old := &watchv1.ReportStatusRequest{Source: "s",
		Statuses: []*watchv1.IngressStatus{{Key: &watchv1.IngressKey{Namespace: "ns", Name: "a"}, Uid: "u-a", ManageLoadBalancer: true,
			LoadBalancer: []*watchv1.LoadBalancerIngress{{Ip: "10.0.0.1"}, {Hostname: "lb.example.com"}}, Findings: []*watchv1.StatusFinding{finding}}},
		Removed: []*watchv1.IngressKey{{Namespace: "ns", Name: "b"}},
		GatewayStatuses: []*watchv1.GatewayAPIStatus{{Key: &watchv1.ObjectKey{Kind: KindGateway, Namespace: "ns", Name: "gw"}, Uid: "u-gw",
			ControllerName: "c", Conditions: []*watchv1.Condition{cond}, Listeners: []*watchv1.ListenerStatus{listener}, ManageAddresses: true,
			Addresses: []*watchv1.GatewayAddress{{Type: "IPAddress", Value: "10.0.0.1"}}, Findings: []*watchv1.StatusFinding{finding},
			AttachedListenerSets: 1}, {Key: &watchv1.ObjectKey{Kind: KindHTTPRoute, Namespace: "ns", Name: "r"}, Uid: "u-r", ControllerName: "c",
			Parents: []*watchv1.RouteParentStatus{parent}}, {Key: &watchv1.ObjectKey{Kind: KindGatewayClass, Name: "sluice"}, Uid: "u-c",
			ControllerName: "c", SupportedFeatures: []string{"Gateway", "HTTPRoute"}}},
		RemovedGateway: []*watchv1.ObjectKey{{Kind: KindHTTPRoute, Namespace: "ns", Name: "gone"}},
	}
	want := &watchv1.ReportStatusRequest{Source: "s",
		Objects: []*watchv1.ObjectStatus{{Key: &watchv1.ObjectKey{Kind: KindIngress, Namespace: "ns", Name: "a"}, Uid: "u-a", ManageAddresses: true,
			Addresses: []*watchv1.GatewayAddress{{Type: "IPAddress", Value: "10.0.0.1"}, {Type: "Hostname", Value: "lb.example.com"}},
			Findings:  []*watchv1.StatusFinding{finding}}, {Key: &watchv1.ObjectKey{Kind: KindGateway, Namespace: "ns", Name: "gw"}, Uid: "u-gw",
			ControllerName: "c", Conditions: []*watchv1.Condition{cond}, Listeners: []*watchv1.ListenerStatus{listener}, ManageAddresses: true,
			Addresses: []*watchv1.GatewayAddress{{Type: "IPAddress", Value: "10.0.0.1"}}, Findings: []*watchv1.StatusFinding{finding},
			AttachedListenerSets: 1}, {Key: &watchv1.ObjectKey{Kind: KindHTTPRoute, Namespace: "ns", Name: "r"}, Uid: "u-r", ControllerName: "c",
			Parents: []*watchv1.RouteParentStatus{parent}}, {Key: &watchv1.ObjectKey{Kind: KindGatewayClass, Name: "sluice"}, Uid: "u-c",
			ControllerName: "c", SupportedFeatures: []string{"Gateway", "HTTPRoute"}}},
		RemovedObjects: []*watchv1.ObjectKey{{Kind: KindIngress, Namespace: "ns", Name: "b"}, {Kind: KindHTTPRoute, Namespace: "ns", Name: "gone"}},
	}
	got, err := upgradeReport(old)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Fatalf("upgraded report =\n%v\nwant\n%v", got, want)
	}
	if err := checkReport(got, false); err != nil {
		t.Fatalf("the upgraded report breaks the protocol: %v", err)
	}
	// A report in the one shape is taken as it is.
	if same, err := upgradeReport(want); err != nil || same != want {
		t.Fatalf("a report in the one shape was changed (%v)", err)
	}
	// A Gateway API field naming an Ingress is refused, not taken as one.
	bad := &watchv1.ReportStatusRequest{Source: "s", RemovedGateway: []*watchv1.ObjectKey{{Kind: KindIngress, Namespace: "ns", Name: "a"}}}
	if _, err := upgradeReport(bad); err == nil {
		t.Fatal("removed_gateway naming an Ingress was taken")
	}
}
