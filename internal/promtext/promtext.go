// Package promtext reads a process's /metrics with Prometheus' own text parser (expfmt),
// for the tests and the bench, which each had a line scanner of their own.
package promtext

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

// Recorder is a Registry that remembers the name of every metric registered with it, so
// that a test can tell which of them /metrics does not show yet (a vector none of whose
// label sets was created).
type Recorder struct {
	*prometheus.Registry
	names []string
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{Registry: prometheus.NewRegistry()} }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// Register records c's metric names and registers it.
func (r *Recorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.names = append(r.names, m[1])
		}
	}
	return r.Registry.Register(c)
}

// MustRegister registers cs, panicking on an error as prometheus.Registry does.
func (r *Recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// CheckExported compares what rec exports before any event with the metrics table of doc
// (docs/operations.md): each metric in late is absent and its row says when it appears
// ("appears" or "absent"); every other registered metric is exported; each label value of
// fixed (metric to values) is exported and named in the metric's row. It returns the
// problems found.
func CheckExported(rec *Recorder, doc string, fixed map[string][]string, late []string) []string {
	var problems []string
	row := func(name string) string {
		for _, l := range strings.Split(doc, "\n") {
			if strings.HasPrefix(l, "| `"+name+"`") || strings.HasPrefix(l, "| `"+name+"{") || strings.Contains(l, ", `"+name) {
				return l
			}
		}
		problems = append(problems, fmt.Sprintf("%s has no row in the metrics table", name))
		return ""
	}
	mfs, err := rec.Gather()
	if err != nil {
		return []string{err.Error()}
	}
	shown := func(name string) bool {
		return slices.ContainsFunc(mfs, func(mf *dto.MetricFamily) bool { return mf.GetName() == name })
	}
	for _, n := range rec.names {
		if !shown(n) && !slices.Contains(late, n) {
			problems = append(problems, fmt.Sprintf("%s is not exported until its first event", n))
		}
	}
	for _, n := range late {
		if shown(n) {
			problems = append(problems, fmt.Sprintf("%s is said to appear later but is exported from the start", n))
		}
		if r := row(n); r != "" && !strings.Contains(r, "appear") && !strings.Contains(r, "absent") {
			problems = append(problems, fmt.Sprintf("the row of %s does not say when it appears", n))
		}
	}
	for name, values := range fixed {
		r := row(name)
		for _, v := range values {
			found := false
			for _, mf := range mfs {
				if mf.GetName() == name || mf.GetName() == name+"_bucket" {
					for _, m := range mf.GetMetric() {
						for _, l := range m.GetLabel() {
							found = found || l.GetValue() == v
						}
					}
				}
			}
			if !found {
				problems = append(problems, fmt.Sprintf("%s{%s} is not exported from the start", name, v))
			}
			if r != "" && !strings.Contains(r, v) {
				problems = append(problems, fmt.Sprintf("the row of %s does not name %s", name, v))
			}
		}
	}
	return problems
}
