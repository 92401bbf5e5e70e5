package statusreport

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

func gwst(kind, name, reason string) *watchv1.GatewayAPIStatus {
	return &watchv1.GatewayAPIStatus{Key: &watchv1.ObjectKey{Kind: kind, Namespace: "ns", Name: name}, ControllerName: "sluice.io/gateway-controller",
		Conditions: []*watchv1.Condition{{Type: "Accepted", Status: "True", Reason: reason}}}
}

// docs/protocol.md, "The status stream": the Gateway API statuses travel like the Ingresses': in full on every new
// stream (in the same first request as the Ingresses', GatewayAPIStatus sorted by kind,
// namespace and name), then only what changed, with removed_gateway for objects no longer
// served.
func TestReporterSendsGatewayStatusesInFullThenOnlyChanges(t *testing.T) {
	r, srv := startReporter(t)
	r.ReplaceGateway([]*watchv1.GatewayAPIStatus{gwst("HTTPRoute", "r", "Accepted"), gwst("Gateway", "gw", "Accepted")})
	r.Replace([]*watchv1.IngressStatus{st("a", "10.0.0.1")})
	run(t, r)
	ss := nextStream(t, srv)
	full := ss.next(t)
	want := &watchv1.ReportStatusRequest{Source: "sluice.io/ingress-controller/sluice", Full: true, Statuses: []*watchv1.IngressStatus{st("a", "10.0.0.1")},
		GatewayStatuses: []*watchv1.GatewayAPIStatus{gwst("Gateway", "gw", "Accepted"), gwst("HTTPRoute", "r", "Accepted")}}
	if !proto.Equal(full, want) {
		t.Fatalf("first report = %v, want %v", full, want)
	}
	// The Gateway changes, the route goes away; an unchanged offer sends nothing.
	r.UpdateGateway([]*watchv1.GatewayAPIStatus{gwst("Gateway", "gw", "ListenersNotValid")}, []*watchv1.ObjectKey{{Kind: "HTTPRoute", Namespace: "ns", Name: "r"}})
	d := ss.next(t)
	want = &watchv1.ReportStatusRequest{Source: "sluice.io/ingress-controller/sluice",
		GatewayStatuses: []*watchv1.GatewayAPIStatus{gwst("Gateway", "gw", "ListenersNotValid")},
		RemovedGateway:  []*watchv1.ObjectKey{{Kind: "HTTPRoute", Namespace: "ns", Name: "r"}}}
	if !proto.Equal(d, want) {
		t.Fatalf("second report = %v, want %v", d, want)
	}
	// A new stream is told everything again.
	ss.end <- status.Error(codes.Unavailable, "leadership changed; report again")
	again := nextStream(t, srv).next(t)
	want = &watchv1.ReportStatusRequest{Source: "sluice.io/ingress-controller/sluice", Full: true, Statuses: []*watchv1.IngressStatus{st("a", "10.0.0.1")},
		GatewayStatuses: []*watchv1.GatewayAPIStatus{gwst("Gateway", "gw", "ListenersNotValid")}}
	if !proto.Equal(again, want) {
		t.Fatalf("report on the new stream = %v, want %v", again, want)
	}
}
