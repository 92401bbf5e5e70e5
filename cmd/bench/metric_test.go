package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestMetric proves that the harness reads the figures it reports from /metrics: counters,
// and a histogram's _sum and _count for one label value (the translator's build time per
// published config, which read as 0 once /metrics went through Prometheus' parser).
func TestMetric(t *testing.T) {
	const page = `# TYPE sluice_translator_build_seconds histogram
sluice_translator_build_seconds_bucket{published="false",le="+Inf"} 4
sluice_translator_build_seconds_sum{published="false"} 9
sluice_translator_build_seconds_count{published="false"} 4
sluice_translator_build_seconds_bucket{published="true",le="+Inf"} 3
sluice_translator_build_seconds_sum{published="true"} 0.75
sluice_translator_build_seconds_count{published="true"} 3
# TYPE sluice_watcher_stream_bytes_total counter
sluice_watcher_stream_bytes_total 1234
`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, page) }))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	for sample, want := range map[string]float64{
		`sluice_translator_build_seconds_sum{published="true"}`:   0.75,
		`sluice_translator_build_seconds_count{published="true"}`: 3,
		`sluice_translator_build_seconds_count`:                   7,
		"sluice_watcher_stream_bytes_total":                       1234,
		"sluice_absent_total":                                     0,
	} {
		if got := metric(addr, sample); got != want {
			t.Errorf("metric(%s) = %v, want %v", sample, got, want)
		}
	}
}
