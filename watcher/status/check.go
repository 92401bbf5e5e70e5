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
// status stream"): a stream's first report that is not full, and a report about an Ingress
// (or Gateway API object) key that cannot name one (no key, a namespace or name Kubernetes would refuse), about one
// key twice, or that both reports and removes a key. The error is INVALID_ARGUMENT naming
// what was wrong; the caller ends the stream, and nothing of the report is taken.
func checkReport(req *watchv1.ReportStatusRequest, first bool) error {
	if first && !req.GetFull() {
		return status.Error(codes.InvalidArgument, "the first report of a stream must be full (full: true): every Ingress the source serves")
	}
	if req.GetFull() && len(req.GetRemoved()) > 0 {
		return status.Errorf(codes.InvalidArgument, "a full report removes nothing, yet it removes %d keys", len(req.GetRemoved()))
	}
	seen := make(map[key]bool, len(req.GetStatuses()))
	for i, st := range req.GetStatuses() {
		k, err := checkKey(st.GetKey())
		if err != nil {
			return status.Errorf(codes.InvalidArgument, "status %d: %v", i, err)
		}
		if seen[k] {
			return status.Errorf(codes.InvalidArgument, "status %d: Ingress %s reported twice", i, k)
		}
		seen[k] = true
	}
	for i, r := range req.GetRemoved() {
		k, err := checkKey(r)
		if err != nil {
			return status.Errorf(codes.InvalidArgument, "removed %d: %v", i, err)
		}
		if seen[k] {
			return status.Errorf(codes.InvalidArgument, "removed %d: Ingress %s is both reported and removed", i, k)
		}
		seen[k] = true
	}
	return checkGatewayReport(req)
}

// checkGatewayReport holds the Gateway API part of a report to the same rules: every key
// names a GatewayClass, Gateway or HTTPRoute, once; a full report removes nothing.
func checkGatewayReport(req *watchv1.ReportStatusRequest) error {
	if req.GetFull() && len(req.GetRemovedGateway()) > 0 {
		return status.Errorf(codes.InvalidArgument, "a full report removes nothing, yet it removes %d Gateway API keys", len(req.GetRemovedGateway()))
	}
	seen := make(map[objKey]bool, len(req.GetGatewayStatuses()))
	for i, st := range req.GetGatewayStatuses() {
		k, err := checkGatewayKey(st.GetKey())
		if err != nil {
			return status.Errorf(codes.InvalidArgument, "gateway status %d: %v", i, err)
		}
		if seen[k] {
			return status.Errorf(codes.InvalidArgument, "gateway status %d: %s reported twice", i, k)
		}
		seen[k] = true
	}
	for i, r := range req.GetRemovedGateway() {
		k, err := checkGatewayKey(r)
		if err != nil {
			return status.Errorf(codes.InvalidArgument, "removed gateway %d: %v", i, err)
		}
		if seen[k] {
			return status.Errorf(codes.InvalidArgument, "removed gateway %d: %s is both reported and removed", i, k)
		}
		seen[k] = true
	}
	return nil
}

// checkGatewayKey returns the key of the Gateway API object k names, or why it names none.
func checkGatewayKey(k *watchv1.ObjectKey) (objKey, error) {
	if k == nil {
		return objKey{}, errors.New("no Gateway API key")
	}
	what := fmt.Sprintf("the key %q %q/%q", truncate(k.GetKind()), truncate(k.GetNamespace()), truncate(k.GetName()))
	if _, ok := gatewayResources[k.GetKind()]; !ok {
		return objKey{}, fmt.Errorf("%s: kind: not GatewayClass, Gateway or HTTPRoute", what)
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
	return gatewayKeyOf(k), nil
}

// checkKey returns the key of an Ingress named by k, or why k names none.
func checkKey(k *watchv1.IngressKey) (key, error) {
	if k == nil {
		return key{}, errors.New("no Ingress key")
	}
	if errs := validation.IsDNS1123Label(k.GetNamespace()); len(errs) > 0 {
		return key{}, fmt.Errorf("the key %q/%q of an Ingress: namespace: %s", truncate(k.GetNamespace()), truncate(k.GetName()), strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(k.GetName()); len(errs) > 0 {
		return key{}, fmt.Errorf("the key %q/%q of an Ingress: name: %s", truncate(k.GetNamespace()), truncate(k.GetName()), strings.Join(errs, "; "))
	}
	return key{k.GetNamespace(), k.GetName()}, nil
}

// truncate keeps an error about a garbage key short.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
