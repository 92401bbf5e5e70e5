// Package promtext reads a process's /metrics with Prometheus' own text parser (expfmt),
// for the tests and the bench, which each had a line scanner of their own.
package promtext

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape reads http://addr/metrics.
func Scrape(addr string) (map[string]*dto.MetricFamily, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", addr, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// Sum adds up the samples of the counter, gauge or untyped metric name whose labels include
// every one of labels; 0 when there is none.
func Sum(families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	sum := 0.0
	for _, m := range families[name].GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		case m.GetUntyped() != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == k && l.GetValue() == v {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Value scrapes addr and sums sample, written as in the text format: "name" or
// `name{label="v",other="w"}`. It is -1 when /metrics cannot be read.
func Value(addr, sample string) float64 {
	name, labels, err := ParseSample(sample)
	if err != nil {
		panic(err) // a test's own literal
	}
	fams, err := Scrape(addr)
	if err != nil {
		return -1
	}
	return Sum(fams, name, labels)
}

// ParseSample splits `name{label="v",...}` into the name and the labels.
func ParseSample(sample string) (string, map[string]string, error) {
	name, rest, ok := strings.Cut(sample, "{")
	labels := map[string]string{}
	if !ok {
		return name, labels, nil
	}
	rest, ok = strings.CutSuffix(rest, "}")
	if !ok {
		return "", nil, fmt.Errorf("sample %q: no closing brace", sample)
	}
	for _, kv := range strings.Split(rest, ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
			return "", nil, fmt.Errorf("sample %q: label %q is not name=\"value\"", sample, kv)
		}
		labels[k] = v[1 : len(v)-1]
	}
	return name, labels, nil
}
