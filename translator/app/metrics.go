package app

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-io/sluice/translator/engine"
)

// metrics are the translator's Prometheus metrics.
type metrics struct {
	restarts  *prometheus.CounterVec
	builds    *prometheus.HistogramVec
	objects   prometheus.Gauge
	version   prometheus.Gauge
	pushers   prometheus.Gauge
	acks      *prometheus.CounterVec
	nacks     *prometheus.CounterVec
	applied   *prometheus.GaugeVec
	published prometheus.Counter
	sentBytes prometheus.Counter
	slow      prometheus.Counter
	tooLarge  prometheus.Counter
	// quarantined are the objects left out because a data plane rejected them.
	quarantined prometheus.Gauge

	statusReports   *prometheus.CounterVec
	statusEntries   prometheus.Counter
	statusConnected prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_translator_watch_restarts_total", Help: "Upstream watch streams restarted, by reason."}, []string{"reason"}),
		builds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_translator_build_seconds", Help: "Time to translate and hash a config.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"published"}),
		objects:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_translator_objects", Help: "Objects held from the watch stream."}),
		version:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_translator_config_version", Help: "Version of the newest published config."}),
		pushers:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_translator_pushers", Help: "Connected pushers."}),
		acks:            prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_translator_acks_total", Help: "Configs acknowledged, per pusher."}, []string{"pusher"}),
		nacks:           prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_translator_nacks_total", Help: "Configs rejected, per pusher."}, []string{"pusher"}),
		applied:         prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_translator_pusher_applied_version", Help: "Newest config version each pusher acknowledged."}, []string{"pusher"}),
		published:       prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_translator_configs_published_total", Help: "Configs published."}),
		sentBytes:       prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_translator_config_bytes_total", Help: "Serialized bytes sent on Config streams (configs, markers, heartbeats)."}),
		slow:            prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_translator_slow_pushers_dropped_total", Help: "Config streams ended because the pusher stopped reading (a send exceeded --send-timeout)."}),
		tooLarge:        prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_translator_configs_too_large_total", Help: "Config versions not sent because they exceed the gRPC message limit."}),
		quarantined:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_translator_quarantined_objects", Help: "Objects (Ingresses, HTTPRoutes, Secrets) left out because a data plane rejected them; each is tried again when it changes."}),
		statusReports:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_translator_status_reports_total", Help: "Status reports sent to the watcher, by kind (full or delta)."}, []string{"kind"}),
		statusEntries:   prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_translator_status_entries_total", Help: "Ingress statuses (and removals) sent to the watcher."}),
		statusConnected: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_translator_status_connected", Help: "1 while a status stream to the watcher is accepted."}),
	}
	// Series of fixed label sets exist from the start, at zero, so that a rate or an alert over
	// them does not wait for the first event (docs/operations.md, "Metrics").
	for _, r := range engine.RestartReasons {
		m.restarts.WithLabelValues(r)
	}
	for _, p := range []string{"true", "false"} {
		m.builds.WithLabelValues(p)
	}
	for _, k := range []string{"full", "delta"} {
		m.statusReports.WithLabelValues(k)
	}
	reg.MustRegister(m.statusReports, m.statusEntries, m.statusConnected)
	reg.MustRegister(m.restarts, m.builds, m.objects, m.version, m.pushers, m.acks, m.nacks, m.applied, m.published, m.sentBytes, m.slow, m.tooLarge, m.quarantined)
	return m
}

func (m *metrics) StreamRestarted(reason string) { m.restarts.WithLabelValues(reason).Inc() }
func (m *metrics) SetQuarantined(n int)          { m.quarantined.Set(float64(n)) }
func (m *metrics) ConfigBuilt(d time.Duration, published bool) {
	label := "false"
	if published {
		label = "true"
	}
	m.builds.WithLabelValues(label).Observe(d.Seconds())
}
func (m *metrics) SetObjects(n int)   { m.objects.Set(float64(n)) }
func (m *metrics) SetPushers(n int)   { m.pushers.Set(float64(n)) }
func (m *metrics) Nack(pusher string) { m.nacks.WithLabelValues(pusher).Inc() }
func (m *metrics) Ack(pusher string, v uint64) {
	m.acks.WithLabelValues(pusher).Inc()
	m.applied.WithLabelValues(pusher).Set(float64(v))
}
func (m *metrics) Published(v uint64) { m.published.Inc(); m.version.Set(float64(v)) }
func (m *metrics) SlowPusherDropped() { m.slow.Inc() }
func (m *metrics) TooLarge()          { m.tooLarge.Inc() }

// Forget deletes a gone pusher's series, which would otherwise stay forever.
func (m *metrics) Forget(pusher string) {
	m.acks.DeleteLabelValues(pusher)
	m.nacks.DeleteLabelValues(pusher)
	m.applied.DeleteLabelValues(pusher)
}

func (m *metrics) StatusReported(full bool, n int) {
	kind := "delta"
	if full {
		kind = "full"
	}
	m.statusReports.WithLabelValues(kind).Inc()
	m.statusEntries.Add(float64(n))
}

func (m *metrics) SetStatusConnected(ok bool) {
	v := 0.0
	if ok {
		v = 1
	}
	m.statusConnected.Set(v)
}
