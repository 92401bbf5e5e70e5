package promtext

import (
	"net"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Value reads what a real Prometheus registry serves: a plain counter, a sum over label sets,
// one label set, a gauge, a metric that is not there (0), and an endpoint that is not there
// (-1).
func TestValueReadsWhatARegistryServes(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "applied_total", Help: "h"})
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "writes_total", Help: "h"}, []string{"result", "kind"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "pending", Help: "h"})
	reg.MustRegister(c, v, g)
	c.Add(3)
	v.WithLabelValues("done", "a").Add(2)
	v.WithLabelValues("done", "b").Add(5)
	v.WithLabelValues("failed", "a").Add(7)
	g.Set(-2.5)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	go srv.Serve(lis)
	defer srv.Close()
	addr := lis.Addr().String()
	for sample, want := range map[string]float64{
		"applied_total":                        3,
		"writes_total":                         14,
		`writes_total{result="done"}`:          7,
		`writes_total{result="done",kind="b"}`: 5,
		`writes_total{result="nope"}`:          0,
		"pending":                              -2.5,
		"absent_total":                         0,
	} {
		if got := Value(addr, sample); got != want {
			t.Errorf("%s = %v, want %v", sample, got, want)
		}
	}
	if got := Value("127.0.0.1:1", "applied_total"); got != -1 {
		t.Errorf("an endpoint that is not there gave %v, want -1", got)
	}
	if _, _, err := ParseSample(`x{a=b}`); err == nil {
		t.Error(`x{a=b} parsed; want an error (the value is not quoted)`)
	}
}
