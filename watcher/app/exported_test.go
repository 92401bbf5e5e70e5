package app

import (
	"testing"

	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/internal/promtext"
	"github.com/sluice-io/sluice/watcher/status"
)

// Every watcher metric is on /metrics from the start, each status write result and Event
// outcome at zero, as docs/operations.md ("Metrics") lists them; the per-kind series appear
// with their kind's first sync or failure.
func TestMetricsAreExportedFromTheStart(t *testing.T) {
	rec := promtext.NewRecorder()
	newMetrics(rec)
	for _, p := range promtext.CheckExported(rec, testenv.Doc(t, "operations.md"),
		map[string][]string{"sluice_watcher_status_writes_total": status.WriteResults,
			"sluice_watcher_events_total": {"Warning", "Normal", "sent", "failed"}},
		[]string{"sluice_watcher_objects", "sluice_watcher_sync_failures_total"}) {
		t.Error(p)
	}
}
