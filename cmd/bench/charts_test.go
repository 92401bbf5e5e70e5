package main

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg"
)

// fixedResults is a small result of three sizes, with every figure a chart draws.
func fixedResults() []Result {
	r := func(n int, scale float64) Result {
		return Result{
			Ingresses: n, ColdStartMs: 400 * scale, InformerListMs: 200 * scale, CaddyLoadMs: 170 * scale, ModuleApplyMs: 40 * scale,
			Stages: map[string]float64{"1 watcher sync (start to barrier)": 180 * scale, "2 snapshot to translator": 35 * scale,
				"3 translation": 50 * scale, "4 transfer to pusher": 30 * scale, "5 Caddy apply": 32 * scale},
			IdleSamplesMs:  []float64{9, 7, 12, 8, 24, 10},
			ChurnSamplesMs: []float64{16, 15, 22, 18, 0.05, 17},
			RSS: map[string]map[string]float64{"watcher": {"steady": 66 * scale}, "translator": {"steady": 59 * scale},
				"pusher": {"steady": 24 * scale}, "caddy": {"steady": 57 * scale}},
			WatchBytesPerChange: 400, ConfigBytesPerChange: 344, ObjectBytes: 217,
			Routing: &Routing{Conns: 16, DurationMs: 5000, Module: RouteStats{RPS: 9000, P50Ms: 1.5, P99Ms: 6},
				Stock: RouteStats{RPS: 8000 / scale, P50Ms: 1.8 * scale, P99Ms: 7 * scale}},
		}
	}
	return []Result{r(1000, 1), r(10000, 5), r(100000, 50)}
}

// TestWriteCharts: make bench writes the SVG charts the report embeds (cold start against
// the limits, change-to-served CDF, request routing, memory per process, bytes per change),
// each well-formed and titled, with every size, and the report links every one of them.
func TestWriteCharts(t *testing.T) {
	dir := t.TempDir()
	rs := fixedResults()
	if err := writeCharts(dir, rs); err != nil {
		t.Fatalf("writeCharts: %v", err)
	}
	want := map[chart][]string{
		chartColdStart: {"Sluice: translation", "Sluice: start-up, first request", "limit: informer list", "limit: module complete state", "target: 1.3 x the limit", "multiple of the limit"},
		chartChangeCDF: {"1000 Ingresses, idle", "10000 Ingresses, churn", "share of changes", "log scale"},
		chartMemory:    {"watcher", "translator", "pusher", "caddy", "RSS (MiB)"},
		chartBytes:     {"changed object", "watch stream", "config stream"},
		chartRouting:   {"Sluice module", "stock Caddy, same config", "requests per second (200s)"},
	}
	if len(want) != len(charts) {
		t.Fatalf("the test knows %d charts, writeCharts writes %d", len(want), len(charts))
	}
	for c, texts := range want {
		svg := readSVG(t, filepath.Join(dir, c.file))
		// Every size in the results appears in every chart (an axis label or a legend entry).
		for _, r := range rs {
			texts = append(texts, fmt.Sprintf("%d Ingresses", r.Ingresses))
		}
		for _, s := range append([]string{c.title}, texts...) {
			if !strings.Contains(svg, s) {
				t.Errorf("%s: no text %q", c.file, s)
			}
		}
	}
	md := report(rs, nil, 3, 6)
	for c := range want {
		if link := "](" + chartsDir + "/" + c.file + ")"; !strings.Contains(md, link) {
			t.Errorf("the report does not embed %s", c.file)
		}
	}
}

// TestWriteChartsNoSamples proves that a result without change-to-served samples (such as
// a report from before they were kept) is refused rather than charted as an empty CDF.
func TestWriteChartsNoSamples(t *testing.T) {
	rs := fixedResults()
	for i := range rs {
		rs[i].IdleSamplesMs, rs[i].ChurnSamplesMs = nil, nil
	}
	if err := writeCharts(t.TempDir(), rs); err == nil {
		t.Fatal("writeCharts charted results without samples")
	}
}

// readSVG returns the text of the SVG file at path (the text of its elements), failing
// the test when it is missing, not well-formed XML, or not an svg document.
func readSVG(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("chart: %v", err)
	}
	defer f.Close()
	d := xml.NewDecoder(f)
	var text strings.Builder
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", path, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
		case xml.CharData:
			text.Write(tok)
			text.WriteString("\n")
		}
	}
	if root != "svg" {
		t.Fatalf("%s: root element %q, want svg", path, root)
	}
	return text.String()
}

// TestChartLayout proves the charts' legends are readable: each is beside the plot, not
// over its bars or lines, and inside the SVG; and that the log axis has labels at decades.
func TestChartLayout(t *testing.T) {
	rs := fixedResults()
	for _, c := range charts {
		p, err := c.build(rs)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		_, l := render(p)
		if l.legend.Size().X <= 0 || l.legend.Size().Y <= 0 {
			t.Errorf("%s: no legend", c.file)
			continue
		}
		if overlaps(l.legend, l.plot) || overlaps(l.legend, l.data) {
			t.Errorf("%s: legend %v overlaps the plot %v", c.file, l.legend, l.plot)
		}
		if !inside(l.legend, l.canvas) {
			t.Errorf("%s: legend %v runs off the canvas %v", c.file, l.legend, l.canvas)
		}
		if !inside(l.data, l.canvas) {
			t.Errorf("%s: data area %v outside the canvas %v", c.file, l.data, l.canvas)
		}
	}
	p, err := changeCDFPlot(rs)
	if err != nil {
		t.Fatal(err)
	}
	p.X.Min, p.X.Max = 0.1, 10000 // as Draw computes them from the data
	var labels []string
	for _, tk := range p.X.Tick.Marker.Ticks(1, 10000) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if got := strings.Join(labels, " "); got != "1 10 100 1000 10000" {
		t.Errorf("log axis labels %q, want the decades", got)
	}
}

func overlaps(a, b vg.Rectangle) bool {
	return a.Min.X < b.Max.X && b.Min.X < a.Max.X && a.Min.Y < b.Max.Y && b.Min.Y < a.Max.Y
}

func inside(a, b vg.Rectangle) bool {
	return a.Min.X >= b.Min.X && a.Max.X <= b.Max.X && a.Min.Y >= b.Min.Y && a.Max.Y <= b.Max.Y
}
