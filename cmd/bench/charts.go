package main

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// chart is one SVG the report embeds: its file name in the charts directory (fixed, so
// that each run replaces the last one's) and its title.
type chart struct {
	file, title string
}

// The charts, in the order of the report's sections.
var (
	chartColdStart = chart{"cold-start.svg", "Cold start: stages, as a multiple of the limit"}
	chartChangeCDF = chart{"change-to-served-cdf.svg", "Change to served: CDF, idle and under churn"}
	chartMemory    = chart{"memory.svg", "Memory: resident set size per process"}
	chartBytes     = chart{"bytes-per-change.svg", "Bytes per change"}
	chartRouting   = chart{"request-routing.svg", "Request routing: successful requests per second"}
)

// The plot's size; the legend gets its own column right of it, so the SVG is wider by the
// legend's width.
const (
	plotWidth  = 18 * vg.Centimeter
	plotHeight = 11 * vg.Centimeter
	legendGap  = 8 // points between the plot and the legend, and right of the legend
)

// charts are the charts writeCharts writes, each with the function that draws it.
var charts = []struct {
	chart
	build func([]Result) (*plot.Plot, error)
}{{chartColdStart, coldStartPlot}, {chartChangeCDF, changeCDFPlot}, {chartMemory, memoryPlot}, {chartBytes, bytesPlot}, {chartRouting, routingPlot}}

// chartsDir is where the charts go, relative to the report: next to it, in a directory
// named after it (docs/benchmarks/ for docs/benchmarks.md).
const chartsDir = "benchmarks"

// writeCharts renders the results as SVG files in dir (created if missing).
func writeCharts(dir string, rs []Result) error {
	if len(rs) == 0 {
		return fmt.Errorf("no results to chart")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("charts directory: %w", err)
	}
	for _, c := range charts {
		p, err := c.build(rs)
		if err != nil {
			return fmt.Errorf("chart %s: %w", c.file, err)
		}
		p.Title.Text = c.title
		cv, _ := render(p)
		var buf bytes.Buffer
		if _, err := cv.WriteTo(&buf); err != nil {
			return fmt.Errorf("chart %s: %w", c.file, err)
		}
		if err := os.WriteFile(filepath.Join(dir, c.file), svgFonts(buf.Bytes()), 0o644); err != nil {
			return fmt.Errorf("chart %s: %w", c.file, err)
		}
	}
	return nil
}

// layout is where render put a chart's parts, in the SVG's coordinates (points, origin at
// the bottom left): the whole canvas, the plot with its axes, its data area, and the legend.
type layout struct {
	canvas, plot, data, legend vg.Rectangle
}

// render draws p with its legend outside the plot, in a column to the right of it: a legend
// inside the data area covers bars or lines whatever corner it is put in. The column is
// legendSlack times as wide as the legend measures in the font gonum lays it out with, since
// a reader's renderer draws it in whatever serif face it has (Times is narrower, DejaVu
// Serif as much as a fifth wider), so that no entry runs off the edge.
func render(p *plot.Plot) (*vgsvg.Canvas, layout) {
	leg := p.Legend
	p.Legend = plot.NewLegend() // the plot draws no legend of its own
	leg.TextStyle.Font.Size = vg.Points(9)
	leg.Top, leg.Left = true, true
	leg.Padding = vg.Points(1.5) // between entries, for faces taller than the measured one
	legW := leg.Rectangle(draw.Canvas{}).Size().X * legendSlack
	if legW > 0 {
		legW += 2 * legendGap
	}
	cv := vgsvg.New(plotWidth+legW, plotHeight)
	dc := draw.New(cv)
	var l layout
	l.canvas = dc.Rectangle
	plotC := draw.Crop(dc, 0, -legW, 0, 0)
	l.plot = plotC.Rectangle
	p.Draw(plotC)
	l.data = p.DataCanvas(plotC).Rectangle
	if legW > 0 {
		// The legend's top at the data area's top, below the title.
		legC := draw.Crop(dc, plotWidth+legendGap, -legendGap, 0, l.data.Max.Y-dc.Max.Y)
		leg.Draw(legC)
		r := leg.Rectangle(legC)
		// Rectangle places a Left legend at the right edge; Draw puts it at the left one.
		// What the layout reports is the widest the legend may be drawn.
		l.legend = vg.Rectangle{Min: vg.Point{X: legC.Min.X, Y: r.Min.Y}, Max: vg.Point{X: legC.Min.X + r.Size().X*legendSlack, Y: r.Max.Y}}
	}
	p.Legend = leg
	return cv, l
}

// legendSlack is how much wider than measured the legend's column is (see render).
const legendSlack = 1.3

// svgFonts names, after the face the charts are laid out with, the faces of the same
// metrics a reader is likely to have, so that a renderer without Liberation Serif draws the
// text about as wide as it was measured.
func svgFonts(svg []byte) []byte {
	return bytes.ReplaceAll(svg, []byte("font-family:Liberation Serif"), []byte("font-family:'Liberation Serif','Times New Roman',Times,serif"))
}

func sizeNames(rs []Result) []string {
	var names []string
	for _, r := range rs {
		names = append(names, fmt.Sprintf("%d Ingresses", r.Ingresses))
	}
	return names
}

// coldStartPlot stacks, per size, Sluice's cold-start stages (and the rest: process start-up
// and the first request) in one bar, and the two parts of the limit (informer list, module
// apply) in the bar beside it, each in units of that size's limit: sizes a hundred times
// apart are then equally readable, the Sluice bar's height is the ratio the report gives,
// and a dashed line marks the target.
func coldStartPlot(rs []Result) (*plot.Plot, error) {
	p := plot.New()
	p.Y.Label.Text = "multiple of the limit (list + apply = 1)"
	p.NominalX(sizeNames(rs)...)
	p.X.Min, p.X.Max = -0.6, float64(len(rs)-1)+0.6
	w := vg.Points(40)
	var stages []string
	for k := range rs[0].Stages {
		stages = append(stages, k)
	}
	sort.Strings(stages)
	type segment struct {
		name  string
		value func(Result) float64 // ms
	}
	var sluice []segment
	for _, s := range stages {
		sluice = append(sluice, segment{"Sluice: " + s[2:], func(r Result) float64 { return math.Max(0, r.Stages[s]) }})
	}
	sluice = append(sluice, segment{"Sluice: start-up, first request", func(r Result) float64 {
		rest := r.ColdStartMs
		for _, s := range stages {
			rest -= math.Max(0, r.Stages[s])
		}
		return math.Max(0, rest)
	}})
	limits := []segment{
		{"limit: informer list", func(r Result) float64 { return r.InformerListMs }},
		{"limit: module complete state", func(r Result) float64 { return r.ModuleApplyMs }},
	}
	limit := func(r Result) float64 { return math.Max(1, r.InformerListMs+r.ModuleApplyMs) }
	top := 0.0
	for _, r := range rs {
		top = math.Max(top, r.ColdStartMs/limit(r))
	}
	next := 0
	for i, stack := range [][]segment{sluice, limits} {
		var below *plotter.BarChart
		for _, seg := range stack {
			vs := make(plotter.Values, len(rs))
			for j, r := range rs {
				vs[j] = seg.value(r) / limit(r)
			}
			b, err := plotter.NewBarChart(vs, w)
			if err != nil {
				return nil, err
			}
			b.LineStyle.Width = vg.Length(0)
			if i == 0 {
				b.Color = plotutil.Color(next)
				next++
			} else {
				b.Color = color.Gray{Y: uint8(0x60 + 0x40*next)} // the limits in greys
				next++
			}
			if below == nil {
				b.Offset = w * vg.Length(2*i-1) / 2 // Sluice left, the limits right
			} else {
				b.StackOn(below)
			}
			below = b
			p.Add(b)
			p.Legend.Add(seg.name, b)
		}
		next = 0
	}
	target, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: coldStartTarget}, {X: p.X.Max, Y: coldStartTarget}})
	if err != nil {
		return nil, err
	}
	target.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	target.Width = vg.Points(1)
	p.Add(target)
	p.Legend.Add(fmt.Sprintf("target: %.1f x the limit", coldStartTarget), target)
	p.Y.Min, p.Y.Max = 0, 1.05*math.Max(top, coldStartTarget)
	return p, nil
}

// coldStartTarget is the cold start Sluice aims at, as a multiple of its limit.
const coldStartTarget = 1.3

// changeCDFPlot draws the share of changes served within a time, idle and under churn, one
// line per size.
func changeCDFPlot(rs []Result) (*plot.Plot, error) {
	p := plot.New()
	p.X.Label.Text = "change to served (ms, log scale)"
	p.Y.Label.Text = "share of changes"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 1
	p.Add(plotter.NewGrid())
	i := 0
	for _, r := range rs {
		for _, m := range []struct {
			name    string
			samples []float64
			dashed  bool
		}{{"idle", r.IdleSamplesMs, false}, {"churn", r.ChurnSamplesMs, true}} {
			if len(m.samples) == 0 {
				continue
			}
			l, err := plotter.NewLine(cdf(m.samples))
			if err != nil {
				return nil, err
			}
			l.Color = plotutil.Color(i / 2)
			l.Width = vg.Points(1.5)
			if m.dashed {
				l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			}
			p.Add(l)
			p.Legend.Add(fmt.Sprintf("%d Ingresses, %s", r.Ingresses, m.name), l)
			i++
		}
	}
	if i == 0 {
		return nil, fmt.Errorf("no change-to-served samples")
	}
	// The axis runs from decade to decade, so that both ends carry a label.
	lo, hi := math.Inf(1), 0.0
	for _, r := range rs {
		for _, x := range append(append([]float64(nil), r.IdleSamplesMs...), r.ChurnSamplesMs...) {
			x = math.Max(x, 0.1)
			lo, hi = math.Min(lo, x), math.Max(hi, x)
		}
	}
	p.X.Min, p.X.Max = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
	return p, nil
}

// cdf is the empirical distribution of samples as steps: x the sorted samples (at least
// 0.1 ms, for the log scale), y the share at or below x.
func cdf(samples []float64) plotter.XYs {
	s := append([]float64(nil), samples...)
	sort.Float64s(s)
	xys := make(plotter.XYs, 0, 2*len(s))
	prev := 0.0
	for i, x := range s {
		x = math.Max(x, 0.1)
		xys = append(xys, plotter.XY{X: x, Y: prev})
		prev = float64(i+1) / float64(len(s))
		xys = append(xys, plotter.XY{X: x, Y: prev})
	}
	return xys
}

// groupedBars draws one bar per category and size, the sizes side by side.
func groupedBars(rs []Result, categories []string, value func(Result, string) float64) (*plot.Plot, error) {
	p := plot.New()
	p.NominalX(categories...)
	p.X.Min, p.X.Max = -0.6, float64(len(categories)-1)+0.6
	// As wide as fits: every size's bar side by side within one category's slot.
	w := vg.Points(math.Min(24, 60/float64(len(rs))))
	top := 0.0
	for i, r := range rs {
		vs := make(plotter.Values, len(categories))
		for j, c := range categories {
			vs[j] = value(r, c)
			top = math.Max(top, vs[j])
		}
		if err := addBars(p, vs, w, i, len(rs), fmt.Sprintf("%d Ingresses", r.Ingresses)); err != nil {
			return nil, err
		}
	}
	p.Y.Min, p.Y.Max = 0, 1.05*top
	return p, nil
}

// routingPlot draws the successful requests per second, module against stock Caddy, per
// size (sizes without a routing measure are drawn as 0, so that every size has its slot).
func routingPlot(rs []Result) (*plot.Plot, error) {
	p := plot.New()
	p.NominalX(sizeNames(rs)...)
	p.X.Min, p.X.Max = -0.6, float64(len(rs)-1)+0.6
	p.Y.Label.Text = "requests per second (200s)"
	w := vg.Points(30)
	top := 0.0
	for i, m := range []struct {
		name string
		get  func(*Routing) RouteStats
	}{{"Sluice module", func(rt *Routing) RouteStats { return rt.Module }}, {"stock Caddy, same config", func(rt *Routing) RouteStats { return rt.Stock }}} {
		vs := make(plotter.Values, len(rs))
		for j, r := range rs {
			if r.Routing != nil {
				vs[j] = m.get(r.Routing).RPS
				top = math.Max(top, vs[j])
			}
		}
		if err := addBars(p, vs, w, i, 2, m.name); err != nil {
			return nil, err
		}
	}
	p.Y.Min, p.Y.Max = 0, math.Max(1, 1.05*top)
	return p, nil
}

// memoryPlot draws each process's resident set after the change measures, per size.
func memoryPlot(rs []Result) (*plot.Plot, error) {
	p, err := groupedBars(rs, []string{"watcher", "translator", "pusher", "caddy"}, func(r Result, proc string) float64 { return r.RSS[proc]["steady"] })
	if err != nil {
		return nil, err
	}
	p.Y.Label.Text = "RSS (MiB)"
	return p, nil
}

// bytesPlot draws the bytes one change costs on each stream against the changed object.
func bytesPlot(rs []Result) (*plot.Plot, error) {
	p, err := groupedBars(rs, []string{"changed object", "watch stream", "config stream"}, func(r Result, c string) float64 {
		switch c {
		case "changed object":
			return r.ObjectBytes
		case "watch stream":
			return r.WatchBytesPerChange
		default:
			return r.ConfigBytesPerChange
		}
	})
	if err != nil {
		return nil, err
	}
	p.Y.Label.Text = "bytes per change"
	return p, nil
}

// addBars adds series i of n to a grouped bar chart: bars of width w, beside each other
// around each category, in the series' colour, with a legend entry.
func addBars(p *plot.Plot, vs plotter.Values, w vg.Length, i, n int, name string) error {
	b, err := plotter.NewBarChart(vs, w)
	if err != nil {
		return err
	}
	b.LineStyle.Width = vg.Length(0)
	b.Color = plotutil.Color(i)
	b.Offset = w * vg.Length(2*i-n+1) / 2
	p.Add(b)
	p.Legend.Add(name, b)
	return nil
}
