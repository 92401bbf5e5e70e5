package app

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-io/sluice/pusher/gate"
)

// metrics are the pusher's Prometheus metrics.
type metrics struct {
	received  prometheus.Counter
	dropped   *prometheus.CounterVec
	applied   prometheus.Counter
	rejected  prometheus.Counter
	held      prometheus.Counter
	latency   prometheus.Histogram
	version   prometheus.Gauge
	lastApply prometheus.Gauge
	// lastApply is registered at the first apply, so that it is absent until then.
	firstApply sync.Once
	reg        prometheus.Registerer
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		received: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_pusher_configs_received_total", Help: "Configs received from the translator."}),
		dropped:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_pusher_configs_dropped_total", Help: "Configs dropped by the gate, by reason (before-marker, older-than-marker, other-epoch, out-of-order)."}, []string{"reason"}),
		applied:  prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_pusher_configs_applied_total", Help: "Configs applied to the data plane (re-pushes included)."}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_pusher_configs_rejected_total", Help: "Configs the data plane rejected."}),
		held:     prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_pusher_configs_held_total", Help: "Configs held back by the deletion guard."}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_pusher_apply_seconds", Help: "Time to apply a config to the data plane.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		version: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_pusher_applied_version", Help: "Version of the config the data plane runs."}),
		// A timestamp, not an age: `time() - sluice_pusher_last_apply_timestamp_seconds` is the
		// age, and an absent series (not -1) means "never applied".
		lastApply: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_pusher_last_apply_timestamp_seconds", Help: "Unix time of the last successful apply; absent before the first."}),
	}
	// The drop reasons exist from the start, at zero (docs/operations.md, "Metrics").
	for _, r := range gate.DropReasons {
		m.dropped.WithLabelValues(r)
	}
	reg.MustRegister(m.received, m.dropped, m.applied, m.rejected, m.held, m.latency, m.version)
	m.reg = reg
	return m
}

func (m *metrics) Received()             { m.received.Inc() }
func (m *metrics) Dropped(reason string) { m.dropped.WithLabelValues(reason).Inc() }
func (m *metrics) Rejected()             { m.rejected.Inc() }
func (m *metrics) Held()                 { m.held.Inc() }
func (m *metrics) Applied(v uint64, took time.Duration) {
	m.applied.Inc()
	m.latency.Observe(took.Seconds())
	m.version.Set(float64(v))
	m.firstApply.Do(func() { m.reg.MustRegister(m.lastApply) })
	m.lastApply.SetToCurrentTime()
}
