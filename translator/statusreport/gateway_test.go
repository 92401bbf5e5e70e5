package statusreport

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

func gwst(kind, name, reason string) *watchv1.ObjectStatus {
	return &watchv1.ObjectStatus{Key: &watchv1.ObjectKey{Kind: kind, Namespace: "ns", Name: name}, ControllerName: "sluice.io/gateway-controller",
		Conditions: []*watchv1.Condition{{Type: "Accepted", Status: "True", Reason: reason}}}
}

// docs/protocol.md, "The status stream": the Gateway API statuses travel with the Ingresses',
// in one shape: in full on every new stream (one list, sorted by kind, namespace and name),
// then only what changed, with removed_objects for objects no longer served.
func TestReporterSendsGatewayStatusesInFullThenOnlyChanges(t *testing.T) {
	r, srv := startReporter(t)
	r.Replace([]*watchv1.ObjectStatus{gwst("HTTPRoute", "r", "Accepted"), st("a", "10.0.0.1"), gwst("Gateway", "gw", "Accepted")})
	run(t, r)
	ss := nextStream(t, srv)
	full := ss.next(t)
	want := &watchv1.ReportStatusRequest{Source: "sluice.io/ingress-controller/sluice", Full: true,
		Objects: []*watchv1.ObjectStatus{st("a", "10.0.0.1"), gwst("Gateway", "gw", "Accepted"), gwst("HTTPRoute", "r", "Accepted")}}
	if !proto.Equal(full, want) {
		t.Fatalf("first report = %v, want %v", full, want)
	}
	// The Gateway changes, the route goes away; an unchanged offer sends nothing.
	r.Update([]*watchv1.ObjectStatus{gwst("Gateway", "gw", "ListenersNotValid")}, []*watchv1.ObjectKey{{Kind: "HTTPRoute", Namespace: "ns", Name: "r"}})
	d := ss.next(t)
	want = &watchv1.ReportStatusRequest{Source: "sluice.io/ingress-controller/sluice",
		Objects:        []*watchv1.ObjectStatus{gwst("Gateway", "gw", "ListenersNotValid")},
		RemovedObjects: []*watchv1.ObjectKey{{Kind: "HTTPRoute", Namespace: "ns", Name: "r"}}}
	if !proto.Equal(d, want) {
		t.Fatalf("second report = %v, want %v", d, want)
	}
	// A new stream is told everything again.
	ss.end <- status.Error(codes.Unavailable, "leadership changed; report again")
	again := nextStream(t, srv).next(t)
	want = &watchv1.ReportStatusRequest{Source: "sluice.io/ingress-controller/sluice", Full: true,
		Objects: []*watchv1.ObjectStatus{st("a", "10.0.0.1"), gwst("Gateway", "gw", "ListenersNotValid")}}
	if !proto.Equal(again, want) {
		t.Fatalf("report on the new stream = %v, want %v", again, want)
	}
}
