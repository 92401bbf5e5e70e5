package status

import (
	"context"
	"encoding/json"
	"maps"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/store"
)

// ingressView is what the writer reads of an Ingress: its identity, its class and the
// addresses its status shows. The writer holds one per Ingress of the cluster: the whole
// Ingress was about a fifth of the watcher's heap at 10k Ingresses, and an Ingress struct
// with only those fields set still 37 MB at 100k (docs/design.md, "Cold start").
type ingressView struct {
	namespace, name string
	uid             types.UID
	resourceVersion string
	className       *string // spec.ingressClassName
	classAnnotation string  // the kubernetes.io/ingress.class annotation; "" when unset
	lb              []networkingv1.IngressLoadBalancerIngress
}

// statusView is the writer's view of ing.
func statusView(ing *networkingv1.Ingress) *ingressView {
	return &ingressView{namespace: ing.Namespace, name: ing.Name, uid: ing.UID, resourceVersion: ing.ResourceVersion,
		className: ing.Spec.IngressClassName, classAnnotation: ing.Annotations[contract.AnnotationIngressClass],
		lb: ing.Status.LoadBalancer.Ingress}
}

func ingressKey(k key) objKey { return objKey{kind: KindIngress, key: k} }

// ingressUpsert takes an Ingress or an IngressClass from the store into the view; it returns
// the Ingress's key, false for an IngressClass (the caller decides again what the class may
// change; resync decides everything).
func (w *Writer) ingressUpsert(o *watchv1.Object) (key, bool) {
	k := key{o.GetNamespace(), o.GetName()}
	obj, err := watchstream.Decode(o)
	if err != nil {
		w.log.Error("ingress does not decode; its status is not written", "ingress", k.String(), "error", err)
		delete(w.ingresses, k)
		return k, true
	}
	if c, ok := obj.(*networkingv1.IngressClass); ok {
		w.classes = maps.Clone(w.classes)
		w.classes[c.Name] = contract.IngressClassInfo{Controller: c.Spec.Controller, Default: c.Annotations[contract.AnnotationDefaultClass] == "true"}
		return k, false
	}
	ing, ok := obj.(*networkingv1.Ingress)
	if !ok {
		return k, false
	}
	v := statusView(ing)
	// The identity's strings are the stored object's, not the decoded copy's: held for
	// every Ingress, a second copy was most of what the decode left behind (docs/design.md,
	// "Cold start": the watcher keeps each object once).
	v.namespace, v.name, v.uid, v.resourceVersion = o.GetNamespace(), o.GetName(), types.UID(o.GetUid()), o.GetResourceVersion()
	w.ingresses[k] = v
	return k, true
}

func (w *Writer) ingressStoreEvent(ev store.Event) {
	isClass := ev.Object.GetKind().GetKind() == "IngressClass"
	switch ev.Type {
	case store.EventUpsert:
		if k, ok := w.ingressUpsert(ev.Object); ok {
			w.evaluate(ingressKey(k), false)
		} else if isClass {
			w.classesChanged()
		}
	case store.EventDelete:
		if isClass {
			w.classes = maps.Clone(w.classes)
			delete(w.classes, ev.Object.GetName())
			w.classesChanged()
			return
		}
		k := key{ev.Object.GetNamespace(), ev.Object.GetName()}
		delete(w.ingresses, k)
		w.forget(ingressKey(k))
		w.evaluate(ingressKey(k), false)
	}
}

// classesChanged decides every Ingress again: which reports may act on it can change.
func (w *Writer) classesChanged() {
	if w.term == nil {
		return
	}
	for k := range w.ingresses {
		w.evaluate(ingressKey(k), false)
	}
}

// checkClass logs, once per source and Ingress, a report about an Ingress of another class:
// it is kept (the Ingress may change class) but never acted on while it is not of the
// reporter's class.
func (w *Writer) checkClass(src string, k objKey) {
	ing := w.ingresses[k.key]
	if ing == nil || mayAct(w.origins[src], ing, w.cfg.ControllerName, w.classes) {
		return
	}
	if w.countRefused(src, k) {
		w.log.Warn("status report refused: the ingress is not of the reporter's class", "source", src, "class", w.origins[src].Class, "ingress", k.key.String())
	}
}

// ingressInputOf is what decides an Ingress now (decideIngress).
func (w *Writer) ingressInputOf(k objKey) ingressInput {
	in := ingressInput{obj: w.ingresses[k.key], classes: w.classes, controller: w.cfg.ControllerName, told: w.said[k], reports: w.reports(k)}
	if r := w.released[k]; r != nil {
		in.released = contract.LoadBalancerOf(r.GetAddresses())
	}
	return in
}

// evaluateIngress decides an Ingress (decideIngress), records its Events, and returns the
// write it needs (nil: none) and whether a report that manages its addresses found it right.
func (w *Writer) evaluateIngress(k objKey) (pendingWrite, bool) {
	in := w.ingressInputOf(k)
	dec := decideIngress(in)
	if w.log.IsTrace() { // every object is decided at a cold start: no key string built for nothing
		w.log.Trace("ingress status decided", "ingress", k.key.String(), "write", dec.write, "why", dec.why)
	}
	if dec.forgetReleased {
		delete(w.released, k)
	}
	if dec.told != nil {
		w.tell(k, *dec.told)
	}
	w.record(dec.events)
	if dec.write {
		return ingressWrite{in: in, lb: dec.lb}, false
	}
	return nil, in.obj != nil && dec.report != nil && dec.report.GetManageAddresses()
}

// ingressWrite sets an Ingress's status.loadBalancer.ingress to lb, as decided on in (whose
// obj is the version the decision was made on).
type ingressWrite struct {
	in ingressInput
	lb []*watchv1.LoadBalancerIngress
}

func (p ingressWrite) patch(ctx context.Context, w *Writer, k objKey) error {
	body, err := statusPatch(p.in.obj.resourceVersion, p.lb)
	if err != nil {
		return err
	}
	_, err = w.cfg.Client.NetworkingV1().Ingresses(k.ns).Patch(ctx, k.name, types.MergePatchType, body,
		metav1.PatchOptions{FieldManager: FieldManager}, "status")
	return err
}

func (p ingressWrite) again(ctx context.Context, w *Writer, k objKey) (pendingWrite, string, error) {
	fresh, err := w.cfg.Client.NetworkingV1().Ingresses(k.ns).Get(ctx, k.name, metav1.GetOptions{})
	if err != nil {
		return nil, "", err
	}
	if fresh.UID != p.in.obj.uid {
		return nil, "gone", nil
	}
	next := p.in
	next.obj = statusView(fresh)
	dec := decideIngress(next)
	if !dec.write {
		return nil, "skipped", nil
	}
	return ingressWrite{in: next, lb: dec.lb}, "", nil
}

// statusPatch is the merge patch of an Ingress's status.loadBalancer.ingress: it names the
// resourceVersion the decision was made on, so that a concurrent change is a conflict.
func statusPatch(resourceVersion string, lb []*watchv1.LoadBalancerIngress) ([]byte, error) {
	type lbIngress struct {
		IP       string `json:"ip,omitempty"`
		Hostname string `json:"hostname,omitempty"`
	}
	var list any // null removes the field
	if len(lb) > 0 {
		l := make([]lbIngress, 0, len(lb))
		for _, a := range lb {
			l = append(l, lbIngress{IP: a.GetIp(), Hostname: a.GetHostname()})
		}
		list = l
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": resourceVersion},
		"status":   map[string]any{"loadBalancer": map[string]any{"ingress": list}},
	})
}
