package app

import (
	"testing"

	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/internal/promtext"
	"github.com/sluice-io/sluice/translator/engine"
)

// Every translator metric is on /metrics from the start, each restart reason, build outcome
// and status report kind at zero, as docs/operations.md ("Metrics") lists them; the
// per-pusher series appear with their pusher.
func TestMetricsAreExportedFromTheStart(t *testing.T) {
	rec := promtext.NewRecorder()
	newMetrics(rec)
	for _, p := range promtext.CheckExported(rec, testenv.Doc(t, "operations.md"),
		map[string][]string{"sluice_translator_watch_restarts_total": engine.RestartReasons,
			"sluice_translator_build_seconds":        {"true", "false"},
			"sluice_translator_status_reports_total": {"full", "delta"}},
		[]string{"sluice_translator_acks_total", "sluice_translator_nacks_total", "sluice_translator_pusher_applied_version"}) {
		t.Error(p)
	}
}
