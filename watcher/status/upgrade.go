package status

//lint:file-ignore SA1019 upgradeReport reads the earlier per-API fields of a report on purpose.

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-io/sluice/internal/contract"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// upgradeReport returns req in the status stream's one shape (Objects, RemovedObjects): a
// report of a translator before it carries Ingresses and Gateway API objects in fields of
// their own (docs/protocol.md, "The status stream"), taken as if they were Objects, so that a
// rolling upgrade loses no status. A report that mixes the two shapes is refused
// (INVALID_ARGUMENT): which one would it mean?
func upgradeReport(req *watchv1.ReportStatusRequest) (*watchv1.ReportStatusRequest, error) {
	old := len(req.GetStatuses()) + len(req.GetRemoved()) + len(req.GetGatewayStatuses()) + len(req.GetRemovedGateway())
	if old == 0 {
		return req, nil
	}
	if len(req.GetObjects())+len(req.GetRemovedObjects()) > 0 {
		return nil, status.Error(codes.InvalidArgument, "a report carries objects both in objects/removed_objects and in the earlier per-API fields; use objects alone")
	}
	out := &watchv1.ReportStatusRequest{Source: req.GetSource(), Full: req.GetFull(),
		Objects: make([]*watchv1.ObjectStatus, 0, len(req.GetStatuses())+len(req.GetGatewayStatuses()))}
	for _, st := range req.GetStatuses() {
		o := &watchv1.ObjectStatus{Uid: st.GetUid(), ManageAddresses: st.GetManageLoadBalancer(), Findings: st.GetFindings()}
		if k := st.GetKey(); k != nil {
			o.Key = &watchv1.ObjectKey{Kind: KindIngress, Namespace: k.GetNamespace(), Name: k.GetName()}
		}
		if lb := st.GetLoadBalancer(); len(lb) > 0 {
			o.Addresses = contract.TypedAddresses(lb)
		}
		out.Objects = append(out.Objects, o)
	}
	for _, k := range req.GetRemoved() {
		out.RemovedObjects = append(out.RemovedObjects, &watchv1.ObjectKey{Kind: KindIngress, Namespace: k.GetNamespace(), Name: k.GetName()})
	}
	for _, st := range req.GetGatewayStatuses() {
		if k := st.GetKey(); k != nil && k.GetKind() == KindIngress {
			return nil, status.Error(codes.InvalidArgument, "a gateway_statuses entry names an Ingress")
		}
		out.Objects = append(out.Objects, &watchv1.ObjectStatus{Key: st.GetKey(), Uid: st.GetUid(), ControllerName: st.GetControllerName(),
			Conditions: st.GetConditions(), Listeners: st.GetListeners(), ManageAddresses: st.GetManageAddresses(), Addresses: st.GetAddresses(),
			Parents: st.GetParents(), Findings: st.GetFindings(), SupportedFeatures: st.GetSupportedFeatures(), AttachedListenerSets: st.GetAttachedListenerSets()})
	}
	for _, k := range req.GetRemovedGateway() {
		if k.GetKind() == KindIngress {
			return nil, status.Error(codes.InvalidArgument, "a removed_gateway entry names an Ingress")
		}
		out.RemovedObjects = append(out.RemovedObjects, k)
	}
	return out, nil
}
