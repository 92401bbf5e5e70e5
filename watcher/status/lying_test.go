package status

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluice-io/sluice/internal/syncbuf"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// alwaysLeader is a Leadership under which this replica leads for good.
type alwaysLeader struct{}

func (alwaysLeader) Leader() (Leader, <-chan struct{}) {
	return Leader{Identity: "self@127.0.0.1:1", Address: "127.0.0.1:1", Self: true}, make(chan struct{})
}

// takenReports records the reports that reach the Writer.
type takenReports struct {
	mu  sync.Mutex
	got []*watchv1.ReportStatusRequest
}

func (r *takenReports) Report(_ Origin, req *watchv1.ReportStatusRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, req)
}

func (r *takenReports) all() []*watchv1.ReportStatusRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*watchv1.ReportStatusRequest(nil), r.got...)
}

// statusLog is a log output the test reads while the code under test writes.
type statusLog = syncbuf.Buffer

func ingressStatus(ns, name string) *watchv1.ObjectStatus {
	return &watchv1.ObjectStatus{Key: &watchv1.ObjectKey{Kind: "Ingress", Namespace: ns, Name: name}, Uid: "u-" + name, ManageAddresses: true,
		Addresses: []*watchv1.GatewayAddress{{Type: "IPAddress", Value: "10.0.0.1"}}}
}

// A lying translator on the status stream (docs/protocol.md, "The status
// stream"; docs/design.md, reliability scenario 10): a first report that is not full, a
// report without a source, and reports about keys that name no object whose status is
// written (none, a namespace or name Kubernetes refuses, one key twice, a key reported and
// removed at once, removals in a full report, another kind, a namespaced GatewayClass), or
// that mix the one shape with the earlier per-API one, end the stream with INVALID_ARGUMENT naming what was wrong; the Writer gets
// nothing of the lying report nor of anything after it, and only the honest reports that
// came before it.
func TestLyingTranslatorStatusReportIsRefusedNothingTaken(t *testing.T) {
	const src = "sluice.io/ingress-controller/sluice"
	honest := &watchv1.ReportStatusRequest{Source: src, Full: true, Objects: []*watchv1.ObjectStatus{ingressStatus("ns", "a")}}
	cases := []struct {
		name     string
		reports  []*watchv1.ReportStatusRequest // the last one is the lie
		wantErr  string
		wantTook int // honest reports the Writer got
	}{{
		name:    "FirstReportIsNotFull",
		reports: []*watchv1.ReportStatusRequest{{Source: src, Objects: []*watchv1.ObjectStatus{ingressStatus("ns", "a")}}},
		wantErr: "the first report of a stream must be full",
	}, {
		name:    "ReportWithoutASource",
		reports: []*watchv1.ReportStatusRequest{{Full: true, Objects: []*watchv1.ObjectStatus{ingressStatus("ns", "a")}}},
		wantErr: "report without a source",
	}, {
		name:    "StatusWithoutAKey",
		reports: []*watchv1.ReportStatusRequest{honest, {Source: src, Objects: []*watchv1.ObjectStatus{{Uid: "u"}}}},
		wantErr: "status 0: no key", wantTook: 1,
	}, {
		name:    "KeyWithAnEmptyName",
		reports: []*watchv1.ReportStatusRequest{{Source: src, Full: true, Objects: []*watchv1.ObjectStatus{ingressStatus("ns", "a"), ingressStatus("ns", "")}}},
		wantErr: `status 1: the key "Ingress" "ns"/"": name:`,
	}, {
		name:    "KeyWithAGarbageNamespace",
		reports: []*watchv1.ReportStatusRequest{honest, {Source: src, Objects: []*watchv1.ObjectStatus{ingressStatus("../kube-system", "a")}}},
		wantErr: `status 0: the key "Ingress" "../kube-system"/"a": namespace:`, wantTook: 1,
	}, {
		name:    "KeyWithAGarbageName",
		reports: []*watchv1.ReportStatusRequest{{Source: src, Full: true, Objects: []*watchv1.ObjectStatus{ingressStatus("ns", "Not A Name\x00")}}},
		wantErr: `status 0: the key "Ingress" "ns"/"Not A Name\x00": name:`,
	}, {
		name:    "KeyOfAThousandCharacters",
		reports: []*watchv1.ReportStatusRequest{{Source: src, Full: true, Objects: []*watchv1.ObjectStatus{ingressStatus("ns", strings.Repeat("a", 1000))}}},
		wantErr: `status 0: the key "Ingress" "ns"/"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa…": name: must be no more than 253 characters`,
	}, {
		name:    "OneKeyTwice",
		reports: []*watchv1.ReportStatusRequest{{Source: src, Full: true, Objects: []*watchv1.ObjectStatus{ingressStatus("ns", "a"), ingressStatus("ns", "a")}}},
		wantErr: "status 1: Ingress ns/a reported twice",
	}, {
		name: "KeyReportedAndRemoved",
		reports: []*watchv1.ReportStatusRequest{honest, {Source: src, Objects: []*watchv1.ObjectStatus{ingressStatus("ns", "b")},
			RemovedObjects: []*watchv1.ObjectKey{{Kind: "Ingress", Namespace: "ns", Name: "b"}}}},
		wantErr: "removed 0: Ingress ns/b is both reported and removed", wantTook: 1,
	}, {
		name:    "GarbageRemoval",
		reports: []*watchv1.ReportStatusRequest{honest, {Source: src, RemovedObjects: []*watchv1.ObjectKey{{Kind: "Ingress", Namespace: "", Name: "a"}}}},
		wantErr: `removed 0: the key "Ingress" ""/"a": namespace:`, wantTook: 1,
	}, {
		name:    "FullReportThatRemoves",
		reports: []*watchv1.ReportStatusRequest{{Source: src, Full: true, RemovedObjects: []*watchv1.ObjectKey{{Kind: "Ingress", Namespace: "ns", Name: "a"}}}},
		wantErr: "a full report removes nothing, yet it removes 1 keys",
	}, {
		name: "GatewayKeyOfAnotherKind",
		reports: []*watchv1.ReportStatusRequest{{Source: src, Full: true, Objects: []*watchv1.ObjectStatus{
			{Key: &watchv1.ObjectKey{Kind: "Secret", Namespace: "ns", Name: "a"}}}}},
		wantErr: `status 0: the key "Secret" "ns"/"a": kind: not Ingress, GatewayClass, Gateway, ListenerSet, HTTPRoute or BackendTLSPolicy`,
	}, {
		name: "GatewayClassKeyWithANamespace",
		reports: []*watchv1.ReportStatusRequest{{Source: src, Full: true, Objects: []*watchv1.ObjectStatus{
			{Key: &watchv1.ObjectKey{Kind: "GatewayClass", Namespace: "ns", Name: "a"}}}}},
		wantErr: `status 0: the key "GatewayClass" "ns"/"a": namespace: a GatewayClass has none`,
	}, {
		name: "HTTPRouteReportedTwice",
		reports: []*watchv1.ReportStatusRequest{{Source: src, Full: true, Objects: []*watchv1.ObjectStatus{
			{Key: &watchv1.ObjectKey{Kind: "HTTPRoute", Namespace: "ns", Name: "r"}}, {Key: &watchv1.ObjectKey{Kind: "HTTPRoute", Namespace: "ns", Name: "r"}}}}},
		wantErr: "status 1: HTTPRoute ns/r reported twice",
	}, {
		name: "HTTPRouteReportedAndRemoved",
		reports: []*watchv1.ReportStatusRequest{honest, {Source: src, Objects: []*watchv1.ObjectStatus{
			{Key: &watchv1.ObjectKey{Kind: "HTTPRoute", Namespace: "ns", Name: "r"}}}, RemovedObjects: []*watchv1.ObjectKey{{Kind: "HTTPRoute", Namespace: "ns", Name: "r"}}}},
		wantErr: "removed 0: HTTPRoute ns/r is both reported and removed", wantTook: 1,
	}, {
		name:    "FullReportThatRemovesAGateway",
		reports: []*watchv1.ReportStatusRequest{{Source: src, Full: true, RemovedObjects: []*watchv1.ObjectKey{{Kind: "Gateway", Namespace: "ns", Name: "g"}}}},
		wantErr: "a full report removes nothing, yet it removes 1 keys",
	}, {
		name:    "ShapesMixed",
		reports: []*watchv1.ReportStatusRequest{honest, mixedShapes(src)},
		wantErr: "a report carries objects both in objects/removed_objects and in the earlier per-API fields", wantTook: 1,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logs := &statusLog{}
			stopping := make(chan struct{})
			svc, err := NewService(ServiceConfig{Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info}), Stopping: stopping,
				Dial: func(string) (grpc.ClientConnInterface, error) { t.Error("the leader relays nothing"); return nil, nil }})
			if err != nil {
				t.Fatal(err)
			}
			rep := &takenReports{}
			svc.SetLeadership(alwaysLeader{}, rep)
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			gs := grpc.NewServer()
			watchv1.RegisterStatusServiceServer(gs, svc)
			go func() { _ = gs.Serve(lis) }()
			t.Cleanup(func() { close(stopping); gs.Stop() })
			conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := watchv1.NewStatusServiceClient(conn).ReportStatus(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Recv(); err != nil {
				t.Fatalf("first answer: %v", err)
			}
			for _, r := range tc.reports {
				if err := s.Send(r); err != nil {
					t.Fatal(err)
				}
			}
			// After the lie, an honest report: the Writer must not get it either.
			_ = s.Send(&watchv1.ReportStatusRequest{Source: src, Objects: []*watchv1.ObjectStatus{ingressStatus("ns", "after")}})
			for err == nil {
				_, err = s.Recv()
			}
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.wantErr) {
				t.Fatalf("the stream ended with %v; want INVALID_ARGUMENT saying %q", err, tc.wantErr)
			}
			got := rep.all()
			if len(got) != tc.wantTook {
				t.Fatalf("the Writer got %d reports, want the %d honest ones before the lie: %v", len(got), tc.wantTook, got)
			}
			for _, r := range got {
				if r != nil && r.GetObjects()[0].GetKey().GetName() != "a" {
					t.Fatalf("the Writer got %v", r)
				}
			}
		})
	}
}
