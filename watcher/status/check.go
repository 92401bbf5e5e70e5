package status

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/validation"

	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// checkReport refuses a report that breaks the status protocol (docs/protocol.md, "The
// status stream"): a stream's first report that is not full, a full report that removes
// something, and a report about a key that cannot name an object whose status is written (no
// key, another kind, a namespace or name Kubernetes would refuse), about one key twice, or
// that both reports and removes a key. The error is INVALID_ARGUMENT naming what was wrong;
// the caller ends the stream, and nothing of the report is taken. req is in the one shape
// (upgradeReport).
func checkReport(req *watchv1.ReportStatusRequest, first bool) error {
	if first && !req.GetFull() {
		return status.Error(codes.InvalidArgument, "the first report of a stream must be full (full: true): every object the source serves")
	}
	if req.GetFull() && len(req.GetRemovedObjects()) > 0 {
		return status.Errorf(codes.InvalidArgument, "a full report removes nothing, yet it removes %d keys", len(req.GetRemovedObjects()))
	}
	seen := make(map[objKey]bool, len(req.GetObjects()))
	for i, st := range req.GetObjects() {
		k, err := checkKey(st.GetKey())
		if err != nil {
			return status.Errorf(codes.InvalidArgument, "status %d: %v", i, err)
		}
		if seen[k] {
			return status.Errorf(codes.InvalidArgument, "status %d: %s reported twice", i, k)
		}
		seen[k] = true
	}
	for i, r := range req.GetRemovedObjects() {
		k, err := checkKey(r)
		if err != nil {
			return status.Errorf(codes.InvalidArgument, "removed %d: %v", i, err)
		}
		if seen[k] {
			return status.Errorf(codes.InvalidArgument, "removed %d: %s is both reported and removed", i, k)
		}
		seen[k] = true
	}
	return nil
}

// checkKey returns the key of the object k names, or why it names none: an Ingress or a
// Gateway API object whose status the Writer writes, cluster-scoped only for a GatewayClass.
func checkKey(k *watchv1.ObjectKey) (objKey, error) {
	if k == nil {
		return objKey{}, errors.New("no key")
	}
	what := fmt.Sprintf("the key %q %q/%q", truncate(k.GetKind()), truncate(k.GetNamespace()), truncate(k.GetName()))
	if _, ok := gatewayResources[k.GetKind()]; !ok && k.GetKind() != KindIngress {
		return objKey{}, fmt.Errorf("%s: kind: not Ingress, GatewayClass, Gateway, ListenerSet, HTTPRoute or BackendTLSPolicy", what)
	}
	if k.GetKind() == KindGatewayClass {
		if k.GetNamespace() != "" {
			return objKey{}, fmt.Errorf("%s: namespace: a GatewayClass has none", what)
		}
	} else if errs := validation.IsDNS1123Label(k.GetNamespace()); len(errs) > 0 {
		return objKey{}, fmt.Errorf("%s: namespace: %s", what, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(k.GetName()); len(errs) > 0 {
		return objKey{}, fmt.Errorf("%s: name: %s", what, strings.Join(errs, "; "))
	}
	return objKeyOf(k), nil
}

// truncate keeps an error about a garbage key short.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
