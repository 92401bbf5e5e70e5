package testenv_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/harness/testenv"
)

// A process given a MemoryLimit runs under it as under a container's: one that outgrows it
// is killed by the kernel's OOM killer and the cgroup says so; one within it runs to its end
// with its peak counted. Either way the cgroup is removed after (MemoryStats says when it
// could not be), even when the OOM killer left the process's children behind in it. The
// bench's cold start under memory limits reads these figures.
func TestMemoryLimitHoldsTheProcessAsAContainerWould(t *testing.T) {
	// The shell holds 64 MiB in a variable.
	grow := []string{"-c", `x=$(head -c 67108864 /dev/zero | tr '\0' x); echo "held ${#x}"`}
	cases := []struct {
		name   string
		limit  uint64
		killed bool
	}{
		{"within the limit", 512 << 20, false},
		{"over the limit", 32 << 20, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := testenv.StartProcess(testenv.ProcessConfig{Name: "grow", Path: "/bin/sh", Args: grow, Dir: t.TempDir(), MemoryLimit: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Kill()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			code, err := p.Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			st, err := p.MemoryStats()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("exit %d, %+v\n%s", code, st, p.Logs())
			if tc.killed {
				if code != -1 || st.OOMKills == 0 {
					t.Fatalf("over its limit: exit %d, %+v; want killed by the OOM killer", code, st)
				}
				if st.Peak > tc.limit {
					t.Fatalf("peak %d above the limit %d", st.Peak, tc.limit)
				}
				return
			}
			if code != 0 || st.OOMKills != 0 || !strings.Contains(p.Logs(), "held 67108864") {
				t.Fatalf("within its limit: exit %d, %+v; want it to run to its end", code, st)
			}
			if st.Peak < 64<<20 {
				t.Fatalf("peak %d: the 64 MiB held were not counted", st.Peak)
			}
		})
	}
}
