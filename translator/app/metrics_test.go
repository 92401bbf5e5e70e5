package app

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// seriesOf counts the series labelled pusher=id across the registry.
func seriesOf(t *testing.T, reg *prometheus.Registry, id string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "pusher" && l.GetValue() == id {
					n++
				}
			}
		}
	}
	return n
}

// A forgotten pusher's series (ACKs, NACKs, applied version) are gone from /metrics; the
// other pushers' stay.
func TestForgottenPusherHasNoSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	for _, id := range []string{"gone", "here"} {
		m.Ack(id, 3)
		m.Nack(id)
	}
	if n := seriesOf(t, reg, "gone"); n != 3 {
		t.Fatalf("before Forget: %d series of the pusher, want 3", n)
	}
	m.Forget("gone")
	if n := seriesOf(t, reg, "gone"); n != 0 {
		t.Fatalf("after Forget: %d series of the forgotten pusher, want 0", n)
	}
	if n := seriesOf(t, reg, "here"); n != 3 {
		t.Fatalf("after Forget: %d series of another pusher, want 3", n)
	}
}
