package app

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/internal/promtext"
	"github.com/sluice-io/sluice/pusher/gate"
)

// operationsDoc is docs/operations.md.
func operationsDoc(t *testing.T) string {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every pusher metric is on /metrics from the start, each drop reason at zero, as
// docs/operations.md ("Metrics") lists them; only the last apply's timestamp waits for it.
func TestMetricsAreExportedFromTheStart(t *testing.T) {
	rec := promtext.NewRecorder()
	newMetrics(rec)
	for _, p := range promtext.CheckExported(rec, operationsDoc(t),
		map[string][]string{"sluice_pusher_configs_dropped_total": gate.DropReasons},
		[]string{"sluice_pusher_last_apply_timestamp_seconds"}) {
		t.Error(p)
	}
}
