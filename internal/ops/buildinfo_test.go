package ops

import (
	"testing"

	"github.com/sluice-io/sluice/internal/version"
)

// Every process's registry carries sluice_build_info{version,revision,go_version} = 1.
func TestRegistryHasBuildInfo(t *testing.T) {
	mfs, err := NewRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_build_info" {
			continue
		}
		m := mf.GetMetric()[0]
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		want := map[string]string{"version": version.Version, "revision": version.Rev(), "go_version": version.GoVersion()}
		for k, v := range want {
			if labels[k] != v {
				t.Errorf("sluice_build_info label %s = %q, want %q", k, labels[k], v)
			}
		}
		if m.GetGauge().GetValue() != 1 {
			t.Errorf("sluice_build_info = %v, want 1", m.GetGauge().GetValue())
		}
		return
	}
	t.Fatal("no sluice_build_info in the registry")
}
