package main

import (
	"fmt"
	"sort"
	"strings"
)

// report renders the results as docs/benchmarks.md.
func report(rs []Result, runs, changes int) string {
	m := machine()
	var b strings.Builder
	fmt.Fprintf(&b, `# Benchmarks

Measured by `+"`make bench`"+` (`+"`go run ./internal/bench`"+`) on %s CPUs (%s), %s, kube-apiserver %s,
etcd %s, Caddy %s, on %s. Every figure is the median of %d runs (cold start) or over %d
changes, and stands next to its physical limit measured in the same run. The machine is
shared and noisy: compare ratios, not absolute times, across runs (`+"`docs/benchmarks.json`"+`
has every figure for scripts).

Objects per size: N Ingresses, each with its Service and EndpointSlice (one ready endpoint,
a backend in a network namespace), and a TLS Secret for every tenth Ingress.

## Cold start

From starting the three processes (and Caddy) to the first request served by the complete
config, against (a) a bare client-go informer listing the same objects and (b) one Caddy
`+"`/load`"+` of the final config, prebuilt.

| Ingresses | objects | Sluice (ms) | (a) informer list (ms) | (b) Caddy load (ms) | Sluice / (a + b) |
|---|---|---|---|---|---|
`, m["cpus"], m["cpu"], m["go"], m["kube-apiserver"], m["etcd"], m["caddy"], m["date"][:10], runs, changes)
	for _, r := range rs {
		fmt.Fprintf(&b, "| %d | %d | %.0f | %.0f | %.0f | **%.2f** |\n", r.Ingresses, r.Objects, r.ColdStartMs, r.InformerListMs, r.CaddyLoadMs, r.ColdRatio)
	}
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
			fmt.Fprintf(&b, " %.0f |", r.Stages[s])
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, `
## Change to served

An Ingress created until requests through Caddy get the new answer, %d changes one after
the other; idle, and under a steady churn of unrelated EndpointSlice updates (each adds or
removes not-ready endpoints, so each changes the config). Holdoff %.0f ms, maximum delay
500 ms (the translator's defaults). The limit is one Caddy `+"`/load`"+` of a config of that size.

| Ingresses | idle p50 | idle p99 | churn p50 | churn p99 | churn (updates/s) | limit: Caddy load |
|---|---|---|---|---|---|---|
`, changes, rs[0].HoldoffMs)
	for _, r := range rs {
		fmt.Fprintf(&b, "| %d | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %.1f | %.0f ms |\n", r.Ingresses, r.IdleP50Ms, r.IdleP99Ms, r.ChurnP50Ms, r.ChurnP99Ms, r.ChurnRate, r.ChangeCaddyMs)
	}
	b.WriteString("\n## Memory\n\nResident set size per process after the change measures (steady) and its peak, MiB.\n\n| Ingresses | watcher | translator | pusher | Caddy |\n|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %d |", r.Ingresses)
		for _, p := range []string{"watcher", "translator", "pusher", "caddy"} {
			fmt.Fprintf(&b, " %.0f (peak %.0f) |", r.RSS[p]["steady"], r.RSS[p]["peak"])
		}
		b.WriteString("\n")
	}
	b.WriteString("\n## Bytes on the wire per change\n\nFor one Ingress created (idle measure): serialized bytes on the watch stream (watcher to\ntranslator) and on the config stream (translator to pusher), against the size of the\nchanged object (protobuf, managedFields stripped).\n\n| Ingresses | changed object | watch stream | config stream | config stream / object |\n|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %d | %.0f B | %.0f B | %.0f B | %.0fx |\n", r.Ingresses, r.ObjectBytes, r.WatchBytesPerChange, r.ConfigBytesPerChange, r.ConfigBytesPerChange/r.ObjectBytes)
	}
	b.WriteString("\n## Profiles\n\nCPU profile of the translator during the churn measure (the files are in `.bench/`, not in\ngit); the top of the largest size:\n\n```\n")
	last := rs[len(rs)-1]
	b.WriteString(strings.TrimSpace(last.Profile))
	b.WriteString("\n```\n")
	return b.String()
}
