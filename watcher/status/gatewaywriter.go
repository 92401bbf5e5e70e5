package status

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/store"
)

// gatewayState is the Writer's view of the Gateway API objects and the reports about them;
// owned by Run, like the Ingress view.
type gatewayState struct {
	objects  map[objKey]*gatewayObject
	sources  map[string]map[objKey]*watchv1.GatewayAPIStatus
	released map[objKey]bool // HTTPRoutes (and others) a source reported and let go of
	said     map[objKey]announced
	// refusedNames are the source and controller name pairs already logged as refused.
	refusedNames map[string]bool
	// refusedSources are, by source whose reporter may not decide Gateway API statuses
	// (gatewayRefusal), the objects already counted as refused; a source is logged once.
	refusedSources map[string]map[objKey]bool
}

func newGatewayState() gatewayState {
	return gatewayState{objects: map[objKey]*gatewayObject{}, sources: map[string]map[objKey]*watchv1.GatewayAPIStatus{},
		released: map[objKey]bool{}, said: map[objKey]announced{}, refusedNames: map[string]bool{},
		refusedSources: map[string]map[objKey]bool{}}
}

// resetTerm forgets the reports: translators report in full again to whichever replica leads.
func (g *gatewayState) resetTerm() {
	g.sources = map[string]map[objKey]*watchv1.GatewayAPIStatus{}
	g.released = map[objKey]bool{}
	g.said = map[objKey]announced{}
}

// gwIntent is one pending Gateway API status write: the input it was decided on (the base
// object in it) and the status to patch.
type gwIntent struct {
	in     gatewayInput
	status map[string]any
}

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
		delete(w.gw.objects, k)
		return k
	}
	w.gw.objects[k] = obj
	return k
}

// gatewayResync decides again every Gateway API object held before (old) or now.
func (w *Writer) gatewayResync(old map[objKey]*gatewayObject) {
	for k := range old {
		if _, ok := w.gw.objects[k]; !ok {
			w.gatewayEvaluate(k, false)
		}
	}
	for k := range w.gw.objects {
		w.gatewayEvaluate(k, false)
	}
}

func (w *Writer) gatewayStoreEvent(ev store.Event) {
	var k objKey
	switch ev.Type {
	case store.EventUpsert:
		k = w.gatewayUpsert(ev.Object)
	case store.EventDelete:
		k = objKey{kind: ev.Object.GetKind().GetKind(), key: key{ev.Object.GetNamespace(), ev.Object.GetName()}}
		delete(w.gw.objects, k)
		delete(w.gw.said, k)
		delete(w.gw.released, k)
	default:
		return
	}
	w.gatewayEvaluate(k, false)
	if k.kind == KindGatewayClass || k.kind == KindGateway {
		// Whether its Gateways, and their ListenerSets, are ours may have changed.
		for gk, o := range w.gw.objects {
			if (k.kind == KindGatewayClass && gk.kind == KindGateway && string(o.gw.Spec.GatewayClassName) == k.name) || gk.kind == KindListenerSet {
				w.gatewayEvaluate(gk, false)
			}
		}
	}
}

// gatewayReport applies the Gateway API part of a report. A status naming another
// controller is refused (counted, logged once per source and name) and taken as if the
// source had not reported it. A report from an origin that may not decide Gateway API
// statuses (gatewayRefusal) is kept but never acted on: nothing is evaluated, released or
// written for it (decideGateway passes it over).
func (w *Writer) gatewayReport(src string, from Origin, req *watchv1.ReportStatusRequest) {
	var valid []*watchv1.GatewayAPIStatus
	var refused []objKey
	for _, st := range req.GetGatewayStatuses() {
		if st.GetControllerName() == w.cfg.GatewayControllerName && w.cfg.GatewayControllerName != "" {
			valid = append(valid, st)
			continue
		}
		refused = append(refused, gatewayKeyOf(st.GetKey()))
		w.cfg.Metrics.StatusWrite("refused")
		if once := src + "\x00" + st.GetControllerName(); !w.gw.refusedNames[once] {
			w.gw.refusedNames[once] = true
			w.log.Warn("gateway api status report refused: it names another controller than this watcher's --gateway-controller-name",
				"source", src, "controller", st.GetControllerName(), "want", w.cfg.GatewayControllerName, "object", gatewayKeyOf(st.GetKey()).String())
		}
	}
	why := gatewayRefusal(from, w.cfg.GatewayTranslatorClass)
	if why != "" {
		w.refuseGatewaySource(src, from, why, valid)
	}
	cur := w.gw.sources[src]
	if cur == nil || req.GetFull() {
		next := make(map[objKey]*watchv1.GatewayAPIStatus, len(valid))
		for _, st := range valid {
			next[gatewayKeyOf(st.GetKey())] = st
		}
		w.gw.sources[src] = next
		if why != "" {
			return
		}
		for k := range cur {
			if _, ok := next[k]; !ok {
				w.gatewayRelease(k)
			}
		}
		for k, st := range next {
			if old, ok := cur[k]; !ok || !proto.Equal(old, st) {
				w.gatewayEvaluate(k, true)
			}
		}
		return
	}
	gone := refused
	for _, r := range req.GetRemovedGateway() {
		gone = append(gone, gatewayKeyOf(r))
	}
	for _, st := range valid {
		k := gatewayKeyOf(st.GetKey())
		cur[k] = st
		if why == "" {
			w.gatewayEvaluate(k, true)
		}
	}
	for _, k := range gone {
		if _, ok := cur[k]; ok {
			delete(cur, k)
			if why == "" {
				w.gatewayRelease(k)
			}
		}
	}
}

// refuseGatewaySource counts each Gateway API status of a source that may not decide them
// once per object (as a report about an Ingress of another class is), and logs the source
// once.
func (w *Writer) refuseGatewaySource(src string, from Origin, why string, sts []*watchv1.GatewayAPIStatus) {
	seen := w.gw.refusedSources[src]
	if seen == nil {
		seen = map[objKey]bool{}
		w.gw.refusedSources[src] = seen
		w.log.Warn("gateway api status report refused: its Gateway API statuses are kept but never written",
			"source", src, "class", from.Class, "why", why)
	}
	for _, st := range sts {
		if k := gatewayKeyOf(st.GetKey()); !seen[k] {
			seen[k] = true
			w.cfg.Metrics.StatusWrite("refused")
		}
	}
}

// gatewayRelease notes that a source no longer serves an object: an HTTPRoute loses our
// status.parents entries unless another source serves it; a GatewayClass or Gateway keeps
// its status (decideGateway says why).
func (w *Writer) gatewayRelease(k objKey) {
	w.gw.released[k] = true
	delete(w.gw.said, k)
	w.gatewayEvaluate(k, true)
}

// gatewayReports are the reports about an object, by source, with their origins
// (decideGateway chooses among them). The map is new: an intent holds it.
func (w *Writer) gatewayReports(k objKey) map[string]gatewaySourceReport {
	var out map[string]gatewaySourceReport
	for src, m := range w.gw.sources {
		if st, ok := m[k]; ok {
			if out == nil {
				out = map[string]gatewaySourceReport{}
			}
			out[src] = gatewaySourceReport{from: w.origins[src], status: st}
		}
	}
	return out
}

// classController is the controllerName of a Gateway's GatewayClass, empty when the store
// holds no such class.
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
		return w.classController(w.gw.objects[objKey{kind: KindGateway, key: key{ns, string(p.Name)}}])
	}
	if obj == nil || obj.gw == nil {
		return ""
	}
	c := w.gw.objects[objKey{kind: KindGatewayClass, key: key{"", string(obj.gw.Spec.GatewayClassName)}}]
	if c == nil || c.class == nil {
		return ""
	}
	return string(c.class.Spec.ControllerName)
}

// gatewayEvaluate decides what one Gateway API object needs (decideGateway): a status write
// (queued, latest wins), Events, or nothing. Only in a term.
func (w *Writer) gatewayEvaluate(k objKey, fromReport bool) {
	if w.term == nil {
		return // beginTerm evaluates every object again
	}
	obj := w.gw.objects[k]
	in := gatewayInput{kind: k.kind, controller: w.cfg.GatewayControllerName, now: metav1.NewTime(w.cfg.Now()).Rfc3339Copy(), obj: obj,
		classController: w.classController(obj), reports: w.gatewayReports(k), translatorClass: w.cfg.GatewayTranslatorClass,
		released: w.gw.released[k]}
	dec := decideGateway(in)
	d := dec.report
	if d != nil {
		delete(w.gw.released, k) // a source that may decide serves it again
	}
	w.log.Trace("gateway api status decided", "object", k.String(), "write", dec.write, "why", dec.why)
	acted := dec.write || dec.why == whyEqual
	if d != nil && acted {
		ref := &corev1.ObjectReference{Kind: k.kind, APIVersion: GatewayGroup + "/" + obj.version, Namespace: k.ns, Name: k.name,
			UID: obj.meta.UID, ResourceVersion: obj.meta.ResourceVersion}
		w.gw.said[k] = w.announceTo(w.gw.said[k], ref, d.GetFindings())
	}
	if in.released && !dec.write {
		delete(w.gw.released, k) // nothing (more) of ours to take back
	}
	w.mu.Lock()
	if dec.write {
		w.gwPending[k] = gwIntent{in: in, status: dec.status}
	} else {
		delete(w.gwPending, k)
	}
	n := w.pendingLen()
	w.mu.Unlock()
	w.cfg.Metrics.SetStatusPending(n)
	if dec.write {
		w.term.queue.Add(k)
	} else if fromReport && d != nil && dec.why == whyEqual {
		w.cfg.Metrics.StatusWrite("skipped")
	}
}

// gatewayWork writes one Gateway API object's newest intent; false when the term is over.
// A conflict is decided again on a fresh read and retried through the queue.
func (w *Writer) gatewayWork(t *term, k objKey) bool {
	w.mu.Lock()
	in, ok := w.gwPending[k]
	delete(w.gwPending, k)
	n := w.pendingLen()
	w.mu.Unlock()
	if !ok {
		return true
	}
	retry, err := w.gatewayWrite(t.ctx, k, in)
	switch {
	case t.ctx.Err() != nil:
		return false // the lease is gone: this replica writes nothing more
	case err == nil && retry == nil:
		t.queue.Forget(k)
	default:
		if err != nil {
			w.log.Warn("status write failed; retrying", "object", k.String(), "error", err)
			retry = &in
		}
		w.mu.Lock()
		if _, newer := w.gwPending[k]; !newer {
			w.gwPending[k] = *retry
		}
		n = w.pendingLen()
		w.mu.Unlock()
		t.queue.AddRateLimited(k)
	}
	w.cfg.Metrics.SetStatusPending(n)
	return true
}

// gatewayWrite patches one object's status subresource. On a conflict it reads the object
// again and returns the intent decided on that read (nil: nothing to write any more).
func (w *Writer) gatewayWrite(ctx context.Context, k objKey, in gwIntent) (*gwIntent, error) {
	base := in.in.obj
	body, err := gatewayPatch(base.meta.ResourceVersion, in.status)
	if err != nil {
		return nil, err
	}
	var ri dynamic.ResourceInterface = w.cfg.Dynamic.Resource(base.gvr(k.kind))
	if k.ns != "" {
		ri = w.cfg.Dynamic.Resource(base.gvr(k.kind)).Namespace(k.ns)
	}
	_, err = ri.Patch(ctx, k.name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager}, "status")
	switch {
	case err == nil:
		w.cfg.Metrics.StatusWrite("done")
		return nil, nil
	case apierrors.IsNotFound(err):
		w.cfg.Metrics.StatusWrite("gone")
		return nil, nil
	case !apierrors.IsConflict(err):
		w.cfg.Metrics.StatusWrite("failed")
		return nil, fmt.Errorf("patch status of %s: %w", k, err)
	}
	w.cfg.Metrics.StatusWrite("conflict")
	fresh, err := ri.Get(ctx, k.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		w.cfg.Metrics.StatusWrite("gone")
		return nil, nil
	}
	if err != nil {
		w.cfg.Metrics.StatusWrite("failed")
		return nil, fmt.Errorf("read %s after a conflict: %w", k, err)
	}
	raw, err := fresh.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("read %s after a conflict: %w", k, err)
	}
	obj, err := decodeGateway(k.kind, base.version, watchstream.ContentTypeJSON, raw)
	if err != nil {
		return nil, fmt.Errorf("read %s after a conflict: %w", k, err)
	}
	if obj.meta.UID != base.meta.UID {
		w.cfg.Metrics.StatusWrite("gone")
		return nil, nil
	}
	next := in.in
	next.obj, next.now = obj, metav1.NewTime(w.cfg.Now()).Rfc3339Copy()
	dec := decideGateway(next)
	if !dec.write {
		w.cfg.Metrics.StatusWrite("skipped")
		return nil, nil
	}
	return &gwIntent{in: next, status: dec.status}, nil
}
