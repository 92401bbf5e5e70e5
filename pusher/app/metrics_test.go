package app

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The last apply is a timestamp that is absent until the first apply (docs/operations.md, "Metrics": a
// `_timestamp_seconds` gauge instead of a "-1 means never" value).
func TestLastApplyTimestampIsAbsentUntilTheFirstApply(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	if v, ok := gauge(t, reg, "sluice_pusher_last_apply_timestamp_seconds"); ok {
		t.Fatalf("before any apply the series exists with %v, want it absent", v)
	}
	before := float64(time.Now().Unix())
	m.Applied(7, time.Millisecond)
	m.Applied(8, time.Millisecond)
	v, ok := gauge(t, reg, "sluice_pusher_last_apply_timestamp_seconds")
	if !ok || v < before {
		t.Fatalf("after an apply: %v (present %v), want a Unix time >= %v", v, ok, before)
	}
	if v, _ := gauge(t, reg, "sluice_pusher_applied_version"); v != 8 {
		t.Errorf("applied version %v, want 8", v)
	}
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue(), true
		}
	}
	return 0, false
}
