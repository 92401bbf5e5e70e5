package app

import (
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-io/sluice/watcher/status"
)

// metrics are the watcher's Prometheus metrics; they implement the controller's and the
// server's Metrics interfaces.
type metrics struct {
	objects      *prometheus.GaugeVec
	revision     prometheus.Gauge
	streams      prometheus.Gauge
	syncSeconds  prometheus.Gauge
	syncFailures *prometheus.CounterVec
	dropped      prometheus.Counter
	synced       prometheus.Gauge
	sentBytes    prometheus.Counter

	statusPending prometheus.Gauge
	statusWrites  *prometheus.CounterVec
	events        *prometheus.CounterVec
	leader        prometheus.Gauge
	leaderTerms   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		objects:       prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_watcher_objects", Help: "Objects in the store, per kind."}, []string{"kind"}),
		revision:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_watcher_revision", Help: "Revision of the store's last change."}),
		streams:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_watcher_streams", Help: "Connected Watch streams."}),
		syncSeconds:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_watcher_sync_seconds", Help: "Seconds from process start to the barrier opening."}),
		syncFailures:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_watcher_sync_failures_total", Help: "List or watch failures, per kind and cause."}, []string{"kind", "cause"}),
		dropped:       prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_watcher_dropped_clients_total", Help: "Streams dropped because the client fell behind."}),
		synced:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_watcher_synced", Help: "1 once the barrier opened."}),
		sentBytes:     prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_watcher_stream_bytes_total", Help: "Serialized bytes sent on Watch streams."}),
		statusPending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_watcher_status_writes_pending", Help: "Ingresses whose status waits to be written."}),
		statusWrites: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_watcher_status_writes_total",
			Help: "Ingress status writes, by result: done, conflict (retried), failed (retried with backoff), skipped (already right), gone (object deleted)."}, []string{"result"}),
		events:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_watcher_events_total", Help: "Kubernetes Events written for findings, by type and result (sent, failed)."}, []string{"type", "result"}),
		leader:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_watcher_leader", Help: "1 while this replica holds the lease and writes statuses."}),
		leaderTerms: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_watcher_leader_terms_total", Help: "Times this replica acquired the lease."}),
	}
	// Series of fixed label sets exist from the start, at zero (docs/operations.md, "Metrics").
	for _, r := range status.WriteResults {
		m.statusWrites.WithLabelValues(r)
	}
	for _, typ := range []string{corev1.EventTypeWarning, corev1.EventTypeNormal} {
		for _, r := range []string{"sent", "failed"} {
			m.events.WithLabelValues(typ, r)
		}
	}
	reg.MustRegister(m.statusPending, m.statusWrites, m.events, m.leader, m.leaderTerms)
	reg.MustRegister(m.objects, m.revision, m.streams, m.syncSeconds, m.syncFailures, m.dropped, m.synced, m.sentBytes)
	return m
}

func (m *metrics) SetObjects(kind string, n int)  { m.objects.WithLabelValues(kind).Set(float64(n)) }
func (m *metrics) SetRevision(rev uint64)         { m.revision.Set(float64(rev)) }
func (m *metrics) SetSyncSeconds(s float64)       { m.syncSeconds.Set(s); m.synced.Set(1) }
func (m *metrics) SyncFailure(kind, cause string) { m.syncFailures.WithLabelValues(kind, cause).Inc() }
func (m *metrics) StreamOpened()                  { m.streams.Inc() }
func (m *metrics) StreamClosed()                  { m.streams.Dec() }
func (m *metrics) ClientDropped()                 { m.dropped.Inc() }
func (m *metrics) SetStatusPending(n int)         { m.statusPending.Set(float64(n)) }
func (m *metrics) StatusWrite(result string)      { m.statusWrites.WithLabelValues(result).Inc() }
func (m *metrics) Event(typ, result string)       { m.events.WithLabelValues(typ, result).Inc() }
func (m *metrics) LeaderTransition()              { m.leaderTerms.Inc() }
func (m *metrics) SetLeader(on bool) {
	v := 0.0
	if on {
		v = 1
	}
	m.leader.Set(v)
}
