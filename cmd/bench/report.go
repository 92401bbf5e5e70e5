package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sluice-io/sluice/internal/cli"
)

// report renders the results as docs/benchmarks.md.
func report(rs []Result, base map[int]Result, runs, changes int, failed ...Failure) string {
	// was prints a figure beside the one it replaces, when the baseline has it.
	was := func(size int, now float64, get func(Result) float64, format string) string {
		cur := fmt.Sprintf(format, now)
		if old, ok := base[size]; ok && get(old) > 0 {
			return fmt.Sprintf("%s (was "+format+")", cur, get(old))
		}
		return cur
	}
	baseDate := ""
	for _, r := range base {
		if r.Date != "" {
			baseDate = r.Date[:10]
		}
	}
	m := machine()
	var b strings.Builder
	fmt.Fprintf(&b, `# Benchmarks

Measured by `+"`make bench`"+` (`+"`go run ./cmd/bench`"+`) on %s CPUs (%s), %s, kube-apiserver %s,
etcd %s, Caddy %s, on %s (load average %s when it finished). Every figure is the median of %d runs (cold start) or over %d
changes, and stands next to its physical limit measured in the same run. The machine is
shared and noisy: compare ratios, not absolute times, across runs (`+"`docs/benchmarks.json`"+`
has every figure for scripts).

Objects per size: N Ingresses, each with its Service and EndpointSlice (one ready endpoint,
a backend in a network namespace), and a TLS Secret for every tenth Ingress.
`+"`(was …)`"+` is the figure this run replaces, from the report of %s.

%s
## Cold start

From starting the three processes (and Caddy) to the first request served by the complete
config, against the limit: (a) a bare client-go informer listing the same objects (over the
watcher's transport: protobuf, uncompressed) plus (b)
the pusher's first apply of the final config, prebuilt, to a Caddy with Sluice's module (its
small constant Caddy config, then the complete state into the module), which is what the
pusher drives. For reference only, the last column is one stock Caddy `+"`/load`"+` of the
same config (not part of the limit). A `+"`(was …)`"+` ratio is recomputed with this limit from
the baseline's own figures.

| Ingresses | objects | Sluice (ms) | (a) informer list (ms) | (b) module: complete state (ms) | Sluice / (a + b) | reference: stock Caddy /load (ms) |
|---|---|---|---|---|---|---|
`, m["cpus"], m["cpu"], m["go"], m["kube-apiserver"], m["etcd"], m["caddy"], m["date"][:10], m["loadavg"], runs, changes, baseDate, failures(failed))
	otherList := "" // how the baseline measured the list, when not as this run does
	for _, r := range rs {
		ratio := fmt.Sprintf("%.2f", coldRatio(r))
		if old, ok := base[r.Ingresses]; ok && old.ListMethod != r.ListMethod {
			otherList = old.ListMethod
			if otherList == "" {
				otherList = "client-go's defaults: JSON, gzip, polled every 100 ms"
			}
		} else {
			ratio = was(r.Ingresses, coldRatio(r), coldRatio, "%.2f")
		}
		fmt.Fprintf(&b, "| %d | %d | %s | %.0f | %.0f | **%s** | %.0f |\n", r.Ingresses, r.Objects, was(r.Ingresses, r.ColdStartMs, func(o Result) float64 { return o.ColdStartMs }, "%.0f"),
			r.InformerListMs, r.ModuleApplyMs, ratio, r.CaddyLoadMs)
	}
	if otherList != "" {
		fmt.Fprintf(&b, "\nThe baseline measured the informer list another way (%s; this run: %s):\nits ratios are not comparable with these and are left out; its times are.\n", otherList, listMethod)
	}
	b.WriteString(image(chartColdStart))
	b.WriteString("\nWhere the time goes (medians, ms; the rest is process start-up and the first request):\n\n| stage |")
	var stages []string
	for k := range rs[0].Stages {
		stages = append(stages, k)
	}
	sort.Strings(stages)
	for _, r := range rs {
		fmt.Fprintf(&b, " %d |", r.Ingresses)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(rs)) + "\n")
	for _, s := range stages {
		fmt.Fprintf(&b, "| %s |", s[2:])
		for _, r := range rs {
			fmt.Fprintf(&b, " %s |", was(r.Ingresses, r.Stages[s], func(o Result) float64 { return o.Stages[s] }, "%.0f"))
		}
		b.WriteString("\n")
	}
	b.WriteString(cpuTable(rs))
	fmt.Fprintf(&b, `
## Change to config

An Ingress created until the config stream carries it (what a pusher receives: a client of
the stream that follows the chain, checking every state hash), %d changes one after the
other, 100 ms apart; idle, and under a steady churn of unrelated EndpointSlice updates (each adds or removes
not-ready endpoints, so each changes the config). Translation is the translator's mean build
time per published config during the idle measure: the cost of one change, which must not
grow with the number of Ingresses.

| Ingresses | translation per change | idle p50 | idle p99 | churn p50 | churn p99 |
|---|---|---|---|---|---|
`, changes)
	for _, r := range rs {
		fmt.Fprintf(&b, "| %d | %.2f ms | %.0f ms | %.0f ms | %.0f ms | %.0f ms |\n", r.Ingresses, r.TranslateMsPerChange, r.IdleConfigP50Ms, r.IdleConfigP99Ms, r.ChurnConfigP50Ms, r.ChurnConfigP99Ms)
	}
	if len(rs) > 1 && rs[0].TranslateMsPerChange > 0 {
		first, last := rs[0], rs[len(rs)-1]
		fmt.Fprintf(&b, "\nTranslation per change at %d Ingresses is **%.2fx** that at %d.\n", last.Ingresses, last.TranslateMsPerChange/first.TranslateMsPerChange, first.Ingresses)
	}
	fmt.Fprintf(&b, `
## Change to served

The same changes until requests through Caddy (with Sluice's module, which changes routes in
place) get the new answer. Holdoff %.0f ms, maximum delay 500 ms (the translator's
defaults); a change after a quiet holdoff is built at once. The last column is one stock
Caddy `+"`/load`"+` of a config of that size: what every change cost before the module.

| Ingresses | idle p50 | idle p99 | churn p50 | churn p99 | churn (updates/s) | limit: Caddy load |
|---|---|---|---|---|---|---|
`, rs[0].HoldoffMs)
	for _, r := range rs {
		n := r.Ingresses
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %.1f | %.0f ms |\n", n,
			was(n, r.IdleP50Ms, func(o Result) float64 { return o.IdleP50Ms }, "%.0f ms"), was(n, r.IdleP99Ms, func(o Result) float64 { return o.IdleP99Ms }, "%.0f ms"),
			was(n, r.ChurnP50Ms, func(o Result) float64 { return o.ChurnP50Ms }, "%.0f ms"), was(n, r.ChurnP99Ms, func(o Result) float64 { return o.ChurnP99Ms }, "%.0f ms"),
			r.ChurnRate, r.ChangeCaddyMs)
	}
	b.WriteString(image(chartChangeCDF))
	b.WriteString(routingSection(rs))
	b.WriteString("\n## Memory\n\nResident set size per process after the change measures (steady) and its peak, MiB.\n\n| Ingresses | watcher | translator | pusher | the three | Caddy |\n|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %d |", r.Ingresses)
		three := func(o Result) float64 {
			return o.RSS["watcher"]["steady"] + o.RSS["translator"]["steady"] + o.RSS["pusher"]["steady"]
		}
		for _, p := range []string{"watcher", "translator", "pusher", "", "caddy"} {
			if p == "" {
				fmt.Fprintf(&b, " **%s** |", was(r.Ingresses, three(r), three, "%.0f"))
				continue
			}
			fmt.Fprintf(&b, " %s, peak %.0f |", was(r.Ingresses, r.RSS[p]["steady"], func(o Result) float64 { return o.RSS[p]["steady"] }, "%.0f"), r.RSS[p]["peak"])
		}
		b.WriteString("\n")
	}
	b.WriteString(image(chartMemory))
	b.WriteString(`
What the steady resident size is made of, MiB: anonymous memory (of it, the Go heap's spans
in use), and the pages of the process's own binary it has mapped (file: clean, shared with
the page cache, and reclaimed by the kernel before anything else; at start every package's
initialisation touches its part of the binary, and the kernel maps the pages around each one
it reads).

| Ingresses | watcher anon (heap) + file | translator anon (heap) + file | pusher anon (heap) + file | the three: anon + file |
|---|---|---|---|---|
`)
	for _, r := range rs {
		if r.RSS["watcher"]["file"] == 0 {
			continue // a baseline from before the split
		}
		fmt.Fprintf(&b, "| %d |", r.Ingresses)
		var anon, file float64
		for _, p := range []string{"watcher", "translator", "pusher"} {
			m := r.RSS[p]
			fmt.Fprintf(&b, " %.0f (%.0f) + %.0f |", m["anon"], m["heap_inuse"], m["file"])
			anon, file = anon+m["anon"], file+m["file"]
		}
		fmt.Fprintf(&b, " %.0f + %.0f |\n", anon, file)
	}
	writeLimited(&b, rs)
	last := rs[len(rs)-1]
	fmt.Fprintf(&b, "\nWhere the bytes go at %d Ingresses: the in-use heap of each process after the change measures\n(`go tool pprof -top -sample_index=inuse_space`; once ready, each process collects at GOGC=%d, so its heap peaks at about %.2f times what is live).\n", last.Ingresses,
		cli.SteadyGCPercent, 1+float64(cli.SteadyGCPercent)/100)
	for _, p := range []string{"watcher", "translator", "pusher"} {
		if h := last.Heap[p]; h != "" {
			fmt.Fprintf(&b, "\n%s:\n\n```\n%s\n```\n", p, heapTop(h))
		}
	}
	b.WriteString("\n## Bytes on the wire per change\n\nFor one Ingress created (idle measure): serialized bytes on the watch stream (watcher to\ntranslator) and on one config stream (translator to a pusher), against the size of the\nchanged object (protobuf, managedFields stripped).\n\n| Ingresses | changed object | watch stream | config stream | config stream / object |\n|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %d | %.0f B | %.0f B | %s | %.1fx |\n", r.Ingresses, r.ObjectBytes, r.WatchBytesPerChange,
			was(r.Ingresses, r.ConfigBytesPerChange, func(o Result) float64 { return o.ConfigBytesPerChange }, "%.0f B"), r.ConfigBytesPerChange/r.ObjectBytes)
	}
	b.WriteString(image(chartBytes))
	b.WriteString("\n## Profiles\n\nThe files are in `.bench/`, not in git.\n")
	if last.ColdProfile != "" {
		b.WriteString("\nCPU profile of the translator during the first cold start of the largest size, from its\nstart for three times the informer list (the watcher's is beside it):\n\n```\n")
		b.WriteString(strings.TrimSpace(last.ColdProfile))
		b.WriteString("\n```\n")
	}
	b.WriteString("\nCPU profile of the translator during the churn measure, the top of the largest size:\n\n```\n")
	b.WriteString(strings.TrimSpace(last.Profile))
	b.WriteString("\n```\n")
	return b.String()
}

// coldRatio is Sluice's cold start over the limit (informer list plus the module's
// complete-state apply). A baseline written before that limit has no cold_start_limit_ms
// and a ratio against the stock /load: its ratio is recomputed from its own figures, so that
// `(was …)` never compares two definitions. 0 when the figures are missing.
func coldRatio(r Result) float64 {
	limit := r.ColdLimitMs
	if limit <= 0 {
		limit = r.InformerListMs + r.ModuleApplyMs
	}
	if limit <= 0 || r.InformerListMs <= 0 || r.ModuleApplyMs <= 0 {
		return 0
	}
	return r.ColdStartMs / limit
}

// failures says which sizes could not be measured (none: nothing).
func failures(fs []Failure) string {
	if len(fs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n**Incomplete run.** These sizes could not be measured, and are missing below:\n\n")
	for _, f := range fs {
		fmt.Fprintf(&b, "- %d Ingresses: %s\n", f.Ingresses, strings.ReplaceAll(f.Error, "\n", " / "))
	}
	return b.String()
}

// routingSection is the request-routing table: the same load through the module's Caddy
// and a stock Caddy holding the same config.
func routingSection(rs []Result) string {
	var with []Result
	for _, r := range rs {
		if r.Routing != nil {
			with = append(with, r)
		}
	}
	if len(with) == 0 {
		return ""
	}
	rt := with[0].Routing
	var b strings.Builder
	fmt.Fprintf(&b, `
## Request routing

Requests through Caddy once the change measures are done: %d concurrent keep-alive clients
for %.0f s, each sending `+"`GET /`"+` with the Host of a random one of the size's Ingresses; only
200 responses count as successes (rps), every request's latency counts. First through the
Sluice stack's Caddy (the module), then through a stock Caddy loaded by `+"`/load`"+` with the
same config, the same load one after the other in the same run. The load generator, Caddy
and the backend share the machine's %s CPUs, so rps is a bound of the whole loop, not of
Caddy alone; what matters is that the cost does not grow with the number of Ingresses.

| Ingresses | module rps | module p50 | module p99 | stock rps | stock p50 | stock p99 | errors (module / stock) |
|---|---|---|---|---|---|---|---|
`, rt.Conns, rt.DurationMs/1000, machine()["cpus"])
	for _, r := range with {
		m, s := r.Routing.Module, r.Routing.Stock
		fmt.Fprintf(&b, "| %d | %.0f | %.2f ms | %.2f ms | %.0f | %.2f ms | %.2f ms | %d / %d |\n", r.Ingresses, m.RPS, m.P50Ms, m.P99Ms, s.RPS, s.P50Ms, s.P99Ms, m.Errors, s.Errors)
	}
	for _, r := range with {
		for _, x := range []struct {
			name string
			s    RouteStats
		}{{"module", r.Routing.Module}, {"stock", r.Routing.Stock}} {
			if x.s.FirstError != "" {
				fmt.Fprintf(&b, "\nAt %d Ingresses (%s), %d of %d requests failed; the first: `%s`.\n", r.Ingresses, x.name, x.s.Errors, x.s.Requests, x.s.FirstError)
			}
		}
	}
	b.WriteString(image(chartRouting))
	return b.String()
}

// image embeds a chart written by writeCharts, linked relative to the report.
func image(c chart) string {
	return fmt.Sprintf("\n![%s](%s/%s)\n", c.title, chartsDir, c.file)
}

// heapTop keeps the summary and the table of a pprof -top output, without its header of
// file names and build ids.
func heapTop(out string) string {
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, "File:") || strings.HasPrefix(l, "Build ID:") || strings.HasPrefix(l, "Type:") || strings.HasPrefix(l, "Time:") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// cpuTable is the CPU time each process spent in the cold start, against its wall time: on
// a machine of few cores the processes compete for them, so a stage can wait for CPU that
// another process holds.
func cpuTable(rs []Result) string {
	if len(rs[0].ColdCPUMs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nCPU time spent from start to the first request served (medians, ms; the control plane is\netcd and kube-apiserver together over the same span):\n\n| process |")
	for _, r := range rs {
		fmt.Fprintf(&b, " %d |", r.Ingresses)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(rs)) + "\n")
	for _, p := range []string{"control plane", "watcher", "translator", "pusher"} {
		fmt.Fprintf(&b, "| %s |", p)
		for _, r := range rs {
			fmt.Fprintf(&b, " %.0f |", r.ColdCPUMs[p])
		}
		b.WriteString("\n")
	}
	b.WriteString("| cold start (wall time) |")
	for _, r := range rs {
		fmt.Fprintf(&b, " %.0f |", r.ColdStartMs)
	}
	b.WriteString("\n")
	return b.String()
}

// writeLimited is the table of the cold starts under memory limits.
func writeLimited(b *strings.Builder, rs []Result) {
	var factor float64
	for _, r := range rs {
		if r.Limited != nil {
			factor = r.Limited.Factor
		}
	}
	if factor == 0 {
		return
	}
	fmt.Fprintf(b, `
Cold start under memory limits: as many cold starts again at each size, alternately without
and with limits, each process then in a memory cgroup of its own (a container's memory limit) of %.2f times its peak resident size
above, the size docs/operations.md advises ("Memory limits"). Each process reads the limit and
sets the Go runtime's soft limit to 90%% of what it leaves beside the pages of the binary it
has mapped. The binaries run from fresh copies out of the page cache, so that, as in a
container started afresh, the cgroup is charged for the pages of its binary (the starts
without limits too, so that the two differ only in the limits). Peak is the most
the kernel charged to the cgroup at once (anonymous memory, kernel memory and page cache,
which fills up to the limit before the kernel reclaims it), the highest of the runs; major
faults are the pages read back from disk, the binary's first reads and then any of its code
the kernel took back from a process short of memory, the sign of a limit too small.

| Ingresses | cold start under limits, ms, median (without limits) | watcher: limit / peak MiB, major faults, OOM kills | translator | pusher |
|---|---|---|---|---|
`, factor)
	for _, r := range rs {
		l := r.Limited
		if l == nil {
			continue
		}
		cold := fmt.Sprintf("%.0f (%.0f)", l.ColdStartMs, l.FreshColdStartMs)
		if l.Error != "" {
			cold = "did not complete: " + l.Error
		}
		fmt.Fprintf(b, "| %d | %s |", r.Ingresses, cold)
		for _, p := range []string{"watcher", "translator", "pusher"} {
			lp := l.Processes[p]
			fmt.Fprintf(b, " %.0f / %.0f, %d, %d |", lp.LimitMiB, lp.PeakMiB, lp.MajorFaults, lp.OOMKills)
		}
		b.WriteString("\n")
	}
}
