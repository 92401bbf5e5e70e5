package engine

import (
	"crypto/sha256"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	"github.com/sluice-io/sluice/translator/translate"
)

// quarantine decides which objects are left out because a data plane rejected them: a NACK
// names the objects at fault (the sources of the routes and certificates the data plane
// refused), and each one that is still as it was in the rejected version is left out until
// it changes. It is a pure state machine: the engine feeds it every change of an object that
// can be quarantined and every NACK, and carries out its answers on the translator.
//
// An object is named by its kind, namespace and name (its findings key is "Ingress/ns/name");
// its stamp says what it is (its UID and generation and annotations, or its resourceVersion
// when it has no generation), so that a status write, which changes neither, does not lift
// the quarantine, and an edit does.
//
// The quarantine sees every Ingress, HTTPRoute and Secret of the cluster, so what it keeps of
// each is small (docs/design.md, "Cold start": one copy of each object): the name's strings
// are the stream's, shared with the mirror's key, and the stamp is a digest of fixed size.
type quarantine struct {
	// held are the objects left out: the stamp they were rejected at, and the data plane's
	// error.
	held map[objectName]heldObject
	// seen are the objects that can be quarantined, as the current epoch's versions carry them:
	// their stamp and the first version that can carry it.
	seen map[objectName]seenObject
}

// objectName names a quarantinable object by its short kind ("Ingress").
type objectName struct{ kind, namespace, name string }

// String is the object's findings key, "Ingress/ns/name".
func (n objectName) String() string { return n.kind + "/" + n.namespace + "/" + n.name }

// stamp is a digest of what an object is (stampOf): only ever compared for equality.
type stamp [16]byte

type heldObject struct {
	stamp    stamp
	uid, why string
}

type seenObject struct {
	stamp      stamp
	uid, epoch string
	since      uint64
}

func newQuarantine() *quarantine {
	return &quarantine{held: map[objectName]heldObject{}, seen: map[objectName]seenObject{}}
}

// changed records that the object key is now st (uid), in epoch, first carried by version
// next. It returns true when that lifts its quarantine: the object changed.
func (q *quarantine) changed(key objectName, st stamp, uid, epoch string, next uint64) (lifted bool) {
	if s, ok := q.seen[key]; !ok || s.stamp != st || s.epoch != epoch {
		since := next
		if ok && s.stamp == st {
			since = 0 // the same object, seen again in a new epoch: every version carries it
		}
		q.seen[key] = seenObject{stamp: st, uid: uid, epoch: epoch, since: since}
	}
	if h, ok := q.held[key]; ok && h.stamp != st {
		delete(q.held, key)
		return true
	}
	return false
}

// removed records that the object key is gone; it returns true when it was held.
func (q *quarantine) removed(key objectName) (lifted bool) {
	delete(q.seen, key)
	if _, ok := q.held[key]; ok {
		delete(q.held, key)
		return true
	}
	return false
}

// restart forgets what was seen: a new snapshot follows, and changed is called for every
// object in it (an object held and seen again as it was stays held).
func (q *quarantine) restart() { q.seen = map[objectName]seenObject{} }

// prune lifts the quarantine of the objects the snapshot no longer holds.
func (q *quarantine) prune() {
	for key := range q.held {
		if _, ok := q.seen[key]; !ok {
			delete(q.held, key)
		}
	}
}

// nack takes a NACK of version (in epoch, the current one) with the data plane's error why,
// naming objs: it quarantines each object that can be, that exists as the rejected version
// carried it (not changed since, not replaced by another of the same name) and is not held
// yet, and returns them, sorted by findings key.
func (q *quarantine) nack(epoch string, version uint64, why string, objs []*configv1.ObjectRef) []objectName {
	var out []objectName
	for _, o := range objs {
		if !translate.Quarantinable(o.GetKind()) {
			continue
		}
		key := objectName{o.GetKind(), o.GetNamespace(), o.GetName()}
		s, ok := q.seen[key]
		switch {
		case !ok: // gone
		case s.epoch == epoch && s.since > version: // changed since: the new form is tried
		case o.GetUid() != "" && s.uid != "" && o.GetUid() != s.uid: // another object now
		default:
			if _, held := q.held[key]; held {
				continue
			}
			q.held[key] = heldObject{stamp: s.stamp, uid: s.uid, why: why}
			out = append(out, key)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// why is the data plane's error for a held object, "" when it is not held.
func (q *quarantine) why(key objectName) string { return q.held[key].why }

// stampOf is what an object is, for the quarantine: UID, generation and annotations when the
// apiserver keeps a generation (so that status writes do not count), else its
// resourceVersion.
func stampOf(obj runtime.Object, rv string) (st stamp, uid string) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return stampSum("rv:" + rv), ""
	}
	uid = string(m.GetUID())
	if m.GetGeneration() == 0 {
		return stampSum(uid + "/rv:" + rv), uid
	}
	ann := m.GetAnnotations()
	keys := make([]string, 0, len(ann))
	for k := range ann {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s/gen:%d", uid, m.GetGeneration())
	for _, k := range keys {
		fmt.Fprintf(&b, "\x00%s=%s", k, ann[k])
	}
	return stampSum(b.String()), uid
}

// stampSum is the stamp of what an object is, written out: 128 bits of its SHA-256, so
// that two different objects share a stamp (and an edit leaves a quarantine in place) with
// a chance of 2^-128.
func stampSum(what string) stamp {
	sum := sha256.Sum256([]byte(what))
	return stamp(sum[:16])
}
