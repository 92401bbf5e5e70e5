package status

import (
	"context"
	"errors"

	"github.com/hashicorp/go-hclog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
)

// recorder records Events for one term. client-go's broadcaster aggregates repeats and
// rate-limits each object (a burst of 25, then one per five minutes), and drops rather than
// blocks when its queue is full; the sink refuses everything once the term has ended.
type recorder struct {
	b   record.EventBroadcaster
	r   record.EventRecorder
	m   Metrics
	log hclog.Logger
}

func newRecorder(ctx context.Context, cs Client, component string, m Metrics, log hclog.Logger) *recorder {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&termSink{ctx: ctx, cs: cs, m: m, log: log})
	return &recorder{b: b, r: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component}), m: m, log: log}
}

func ingressRef(ing *ingressView) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Ingress", APIVersion: "networking.k8s.io/v1", Namespace: ing.namespace, Name: ing.name,
		UID: ing.uid, ResourceVersion: ing.resourceVersion}
}

func (r *recorder) event(ref *corev1.ObjectReference, typ, reason, msg string) {
	r.log.Debug("recording event", "kind", ref.Kind, "object", ref.Namespace+"/"+ref.Name, "type", typ, "reason", reason, "message", msg)
	r.r.Event(ref, typ, reason, msg)
}

func (r *recorder) shutdown() { r.b.Shutdown() }

// termSink writes Events with the term's context: nothing is written after the lease is lost.
type termSink struct {
	ctx context.Context
	cs  Client
	m   Metrics
	log hclog.Logger
}

var errTermOver = errors.New("not the leader any more")

func (s *termSink) count(e *corev1.Event, err error) (*corev1.Event, error) {
	result := "sent"
	if err != nil {
		result = "failed"
		// client-go retries only what may succeed later; say why this one did not.
		s.log.Warn("event not recorded", "object", e.InvolvedObject.Namespace+"/"+e.InvolvedObject.Name, "reason", e.Reason, "error", err)
	}
	s.m.Event(e.Type, result)
	return e, err
}

func (s *termSink) Create(e *corev1.Event) (*corev1.Event, error) {
	if s.ctx.Err() != nil {
		return nil, errTermOver
	}
	out, err := s.cs.CoreV1().Events(e.Namespace).Create(s.ctx, e, metav1.CreateOptions{})
	_, err = s.count(e, err)
	return out, err
}

func (s *termSink) Update(e *corev1.Event) (*corev1.Event, error) {
	if s.ctx.Err() != nil {
		return nil, errTermOver
	}
	out, err := s.cs.CoreV1().Events(e.Namespace).Update(s.ctx, e, metav1.UpdateOptions{})
	_, err = s.count(e, err)
	return out, err
}

func (s *termSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	if s.ctx.Err() != nil {
		return nil, errTermOver
	}
	out, err := s.cs.CoreV1().Events(e.Namespace).Patch(s.ctx, e.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
	_, err = s.count(e, err)
	return out, err
}
