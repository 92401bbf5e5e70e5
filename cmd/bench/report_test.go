package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReportColdLimit proves the cold-start ratio is against the informer list plus the
// module's complete-state apply, with the stock /load only as a reference column, and that
// a baseline from before that limit (no cold_start_limit_ms, its ratio against the stock
// /load) is shown with its ratio recomputed from its own figures, not its stored one.
func TestReportColdLimit(t *testing.T) {
	old := `{"machine": {"date": "2026-11-01T00:00:00Z"}, "results": [{"ingresses": 1000, "cold_start_ms": 600,
		"limit_informer_list_ms": 200, "limit_caddy_load_ms": 170, "module_apply_complete_ms": 100, "cold_start_ratio": 1.62}]}`
	path := filepath.Join(t.TempDir(), "b.json")
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	base := baseline(path)
	r := fixedResults()[0] // 400 / (200 + 40)
	r.ColdLimitMs = r.InformerListMs + r.ModuleApplyMs
	r.ColdRatio = r.ColdStartMs / r.ColdLimitMs
	md := report([]Result{r}, base, 3, 6)
	if !strings.Contains(md, "| 1000 | 0 | 400 (was 600) | 200 | 40 | **1.67 (was 2.00)** | 170 |") {
		t.Errorf("cold start row wrong:\n%s", md)
	}
	if strings.Contains(md, "1.62") {
		t.Error("the report shows the baseline's ratio of the old definition")
	}
	js, _ := json.Marshal(r)
	for _, f := range []string{`"cold_start_limit_ms":240`, `"cold_start_ratio":1.666`, `"limit_caddy_load_ms":170`, `"module_apply_complete_ms":40`} {
		if !strings.Contains(string(js), f) {
			t.Errorf("JSON lacks %s: %s", f, js)
		}
	}
}

// TestReportRoutingAndFailures proves the report has the request-routing table for every
// size, and names a size that failed while still reporting the ones before it.
func TestReportRoutingAndFailures(t *testing.T) {
	rs := fixedResults()[:2]
	md := report(rs, nil, 3, 6, Failure{Ingresses: 100000, Error: "creating objects: etcdserver: mvcc: database space exceeded"})
	for _, s := range []string{"## Request routing", "16 concurrent keep-alive clients", "| 1000 | 9000 | 1.50 ms | 6.00 ms | 8000 |",
		"| 10000 | 9000 |", "100000 Ingresses: creating objects: etcdserver: mvcc: database space exceeded", "share the machine's "} {
		if !strings.Contains(md, s) {
			t.Errorf("the report lacks %q", s)
		}
	}
}

// TestReportLeavesOutRatiosOfAnotherListMethod proves a baseline whose informer list was
// measured another way (before the method was recorded: client-go's defaults) has no ratio
// beside this run's, and the report says why, while one measured the same way has.
func TestReportLeavesOutRatiosOfAnotherListMethod(t *testing.T) {
	r := fixedResults()[0] // 400 / (200 + 40)
	r.ListMethod = listMethod
	old := r
	old.ColdStartMs = 600
	for _, tc := range []struct {
		name, method, row string
		note              bool
	}{
		{"unrecorded", "", "| 1000 | 0 | 400 (was 600) | 200 | 40 | **1.67** | 170 |", true},
		{"same", listMethod, "| 1000 | 0 | 400 (was 600) | 200 | 40 | **1.67 (was 2.50)** | 170 |", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old.ListMethod = tc.method
			md := report([]Result{r}, map[int]Result{1000: old}, 3, 6)
			if !strings.Contains(md, tc.row) {
				t.Errorf("cold start row wrong, want %q:\n%s", tc.row, md)
			}
			if got := strings.Contains(md, "its ratios are not comparable"); got != tc.note {
				t.Errorf("note that the ratios are not comparable: %t, want %t", got, tc.note)
			}
		})
	}
}
