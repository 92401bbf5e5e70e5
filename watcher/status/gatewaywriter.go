package status

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/store"
)

func isGatewayKind(k *watchv1.GroupVersionKind) bool {
	_, ok := gatewayResources[k.GetKind()]
	return ok && k.GetGroup() == GatewayGroup
}

// gatewayKinds are the Gateway API kinds the store holds now (none when the CRDs are not
// served, or when Gateway statuses are off). The store's kinds change with its epoch, so
// they are asked at every subscription: an empty request subscribes to every kind, and the
// subscription is dropped at once, before its snapshot is ever taken.
func (w *Writer) gatewayKinds(ctx context.Context) ([]*watchv1.GroupVersionKind, error) {
	if w.cfg.GatewayControllerName == "" {
		return nil, nil
	}
	probe, err := w.cfg.Source.Subscribe(ctx, store.Request{})
	if err != nil {
		return nil, err
	}
	all := probe.Kinds
	w.cfg.Source.Unsubscribe(probe)
	var out []*watchv1.GroupVersionKind
	for _, k := range all {
		if isGatewayKind(k) {
			out = append(out, k)
		}
	}
	return out, nil
}

func (w *Writer) gatewayUpsert(o *watchv1.Object) objKey {
	k := objKey{kind: o.GetKind().GetKind(), key: key{o.GetNamespace(), o.GetName()}}
	obj, err := decodeGateway(k.kind, o.GetKind().GetVersion(), o.GetContentType(), o.GetRaw())
	if err != nil {
		w.log.Error("gateway api object does not decode; its status is not written", "object", k.String(), "error", err)
		delete(w.gateways, k)
		return k
	}
	w.gateways[k] = obj
	return k
}

func (w *Writer) gatewayStoreEvent(ev store.Event) {
	var k objKey
	switch ev.Type {
	case store.EventUpsert:
		k = w.gatewayUpsert(ev.Object)
	case store.EventDelete:
		k = objKey{kind: ev.Object.GetKind().GetKind(), key: key{ev.Object.GetNamespace(), ev.Object.GetName()}}
		delete(w.gateways, k)
		w.forget(k)
	default:
		return
	}
	w.evaluate(k, false)
	if k.kind == KindGatewayClass || k.kind == KindGateway {
		// Whether its Gateways, and their ListenerSets, are ours may have changed.
		for gk, o := range w.gateways {
			if (k.kind == KindGatewayClass && gk.kind == KindGateway && string(o.gw.Spec.GatewayClassName) == k.name) || gk.kind == KindListenerSet {
				w.evaluate(gk, false)
			}
		}
	}
}

// classController is the controllerName of a Gateway's GatewayClass (of a ListenerSet's
// Gateway's), empty when the store holds no such class.
func (w *Writer) classController(obj *gatewayObject) string {
	if obj != nil && obj.ls != nil {
		p := obj.ls.Spec.ParentRef
		if (p.Group != nil && string(*p.Group) != GatewayGroup) || (p.Kind != nil && string(*p.Kind) != KindGateway) {
			return ""
		}
		ns := obj.ls.Namespace
		if p.Namespace != nil {
			ns = string(*p.Namespace)
		}
		return w.classController(w.gateways[objKey{kind: KindGateway, key: key{ns, string(p.Name)}}])
	}
	if obj == nil || obj.gw == nil {
		return ""
	}
	c := w.gateways[objKey{kind: KindGatewayClass, key: key{"", string(obj.gw.Spec.GatewayClassName)}}]
	if c == nil || c.class == nil {
		return ""
	}
	return string(c.class.Spec.ControllerName)
}

// evaluateGateway decides a Gateway API object (decideGateway), records its Events, and
// returns the write it needs (nil: none) and whether a report that decides found it right.
func (w *Writer) evaluateGateway(k objKey) (pendingWrite, bool) {
	obj := w.gateways[k]
	in := gatewayInput{kind: k.kind, controller: w.cfg.GatewayControllerName, now: metav1.NewTime(w.cfg.Now()).Rfc3339Copy(), obj: obj,
		classController: w.classController(obj), reports: w.reports(k), translatorClass: w.cfg.GatewayTranslatorClass,
		released: w.released[k] != nil}
	dec := decideGateway(in)
	d := dec.report
	if d != nil {
		delete(w.released, k) // a source that may decide serves it again
	}
	if w.log.IsTrace() { // every object is decided at a cold start: no key string built for nothing
		w.log.Trace("gateway api status decided", "object", k.String(), "write", dec.write, "why", dec.why)
	}
	if d != nil && (dec.write || dec.why == whyEqual) {
		ref := &corev1.ObjectReference{Kind: k.kind, APIVersion: GatewayGroup + "/" + obj.version, Namespace: k.ns, Name: k.name,
			UID: obj.meta.UID, ResourceVersion: obj.meta.ResourceVersion}
		w.tell(k, w.announceTo(w.said[k], ref, d.GetFindings()))
	}
	if in.released && !dec.write {
		delete(w.released, k) // nothing (more) of ours to take back
	}
	if dec.write {
		return gatewayWrite{in: in, status: dec.status}, false
	}
	return nil, d != nil && dec.why == whyEqual
}

// gatewayWrite is one Gateway API status write: the input it was decided on (the base object
// in it) and the status to patch.
type gatewayWrite struct {
	in     gatewayInput
	status map[string]any
}

func (p gatewayWrite) resource(w *Writer, k objKey) dynamic.ResourceInterface {
	r := w.cfg.Dynamic.Resource(p.in.obj.gvr(k.kind))
	if k.ns != "" {
		return r.Namespace(k.ns)
	}
	return r
}

func (p gatewayWrite) patch(ctx context.Context, w *Writer, k objKey) error {
	body, err := gatewayPatch(p.in.obj.meta.ResourceVersion, p.status)
	if err != nil {
		return err
	}
	_, err = p.resource(w, k).Patch(ctx, k.name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager}, "status")
	return err
}

func (p gatewayWrite) again(ctx context.Context, w *Writer, k objKey) (pendingWrite, string, error) {
	base := p.in.obj
	fresh, err := p.resource(w, k).Get(ctx, k.name, metav1.GetOptions{})
	if err != nil {
		return nil, "", err
	}
	raw, err := fresh.MarshalJSON()
	if err != nil {
		return nil, "", fmt.Errorf("encode %s: %w", k, err)
	}
	obj, err := decodeGateway(k.kind, base.version, watchstream.ContentTypeJSON, raw)
	if err != nil {
		return nil, "", fmt.Errorf("decode %s: %w", k, err)
	}
	if obj.meta.UID != base.meta.UID {
		return nil, "gone", nil
	}
	next := p.in
	next.obj, next.now = obj, metav1.NewTime(w.cfg.Now()).Rfc3339Copy()
	dec := decideGateway(next)
	if !dec.write {
		return nil, "skipped", nil
	}
	return gatewayWrite{in: next, status: dec.status}, "", nil
}
