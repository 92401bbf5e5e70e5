package app

import (
	"testing"

	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/internal/promtext"
	"github.com/sluice-io/sluice/pusher/gate"
)

// Every pusher metric is on /metrics from the start, each drop reason at zero, as
// docs/operations.md ("Metrics") lists them; only the last apply's timestamp waits for it.
func TestMetricsAreExportedFromTheStart(t *testing.T) {
	rec := promtext.NewRecorder()
	newMetrics(rec)
	for _, p := range promtext.CheckExported(rec, testenv.Doc(t, "operations.md"),
		map[string][]string{"sluice_pusher_configs_dropped_total": gate.DropReasons},
		[]string{"sluice_pusher_last_apply_timestamp_seconds"}) {
		t.Error(p)
	}
}
