package engine

import (
	"strings"
	"unique"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sluice-io/sluice/internal/watchstream"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// maxRejectionText bounds the data plane's error as an object's finding carries it.
const maxRejectionText = 512

// Rejected takes a pusher's NACK; it may be called from any goroutine and never blocks. A
// NACK that names objects at fault leaves them out of every later version until they change
// (quarantine); one that names none changes nothing here (the pusher retries a later
// version, as before). When the engine is behind, the NACK is dropped: the pusher's answer
// to the next version names the objects again.
func (e *Engine) Rejected(n *configv1.Nack) {
	if len(n.GetObjectsAtFault()) == 0 {
		return
	}
	select {
	case e.nacks <- n:
	default:
		e.log.Warn("NACK not taken: the engine is behind; the next one names the objects again", "version", n.GetConfig().GetVersion())
	}
}

// takeNack quarantines what n names; it returns true when that changes the translation.
func (e *Engine) takeNack(n *configv1.Nack) bool {
	ref := n.GetConfig()
	if ref.GetEpoch() != e.epoch {
		return false // about an earlier epoch: its versions say nothing about this one's
	}
	why := n.GetError()
	if len(why) > maxRejectionText {
		why = strings.ToValidUTF8(why[:maxRejectionText], "") + "…"
	}
	keys := e.q.nack(ref.GetEpoch(), ref.GetVersion(), why, n.GetObjectsAtFault())
	for _, key := range keys {
		e.tr.SetQuarantined(key.kind, key.namespace, key.name, why)
		e.log.Warn("object rejected by the data plane; left out until it changes", "object", key.String(), "version", ref.GetVersion(), "error", why)
	}
	e.cfg.Metrics.SetQuarantined(len(e.q.held))
	return len(keys) > 0
}

// seen tells the quarantine that k (decoded as obj, at resourceVersion rv) is in the view: an
// object that changed is tried again, one that did not stays left out (a new translator
// after a snapshot learns it here).
func (e *Engine) seen(k watchstream.ObjectKey, obj runtime.Object, rv string) {
	key := quarantineKey(k)
	st, uid := stampOf(obj, rv)
	if e.q.changed(key, st, uid, e.epoch, e.version+1) {
		e.tr.SetQuarantined(key.kind, k.Namespace, k.Name, "")
		e.log.Info("object rejected by the data plane changed; trying it again", "object", key.String())
		e.cfg.Metrics.SetQuarantined(len(e.q.held))
	} else if why := e.q.why(key); why != "" {
		e.tr.SetQuarantined(key.kind, k.Namespace, k.Name, why)
	}
}

// gone tells the quarantine that k is no longer in the view (deleted, or does not decode).
func (e *Engine) gone(k watchstream.ObjectKey) {
	key := quarantineKey(k)
	if e.q.removed(key) {
		e.tr.SetQuarantined(key.kind, k.Namespace, k.Name, "")
		e.cfg.Metrics.SetQuarantined(len(e.q.held))
	}
}

// quarantineKey names k for the quarantine: one string per kind and per namespace, as the
// mirror keeps them (a part of k.Kind would keep the whole of it alive, and each message has
// its own namespace).
func quarantineKey(k watchstream.ObjectKey) objectName {
	kind := k.Kind[strings.LastIndexByte(k.Kind, '/')+1:]
	return objectName{unique.Make(kind).Value(), unique.Make(k.Namespace).Value(), k.Name}
}
