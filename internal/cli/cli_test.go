package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"

	"github.com/sluice-io/sluice/internal/version"
)

type noSettings struct{ validated bool }

func (s *noSettings) Register(*pflag.FlagSet) {}
func (s *noSettings) Validate() error         { s.validated = true; return nil }

// Every process answers --version with its name, version, revision and Go release, exits 0,
// and starts nothing (every process has --version).
func TestVersionPrintsTheBuildAndStartsNothing(t *testing.T) {
	ran := false
	var s noSettings
	var out, errOut bytes.Buffer
	code := Main(Spec{Name: "watcher", Settings: &s, Stdout: &out,
		Run: func(context.Context, hclog.Logger) error { ran = true; return nil }},
		[]string{"--log-level", "nonsense", "--version"}, &errOut)
	if code != ExitOK {
		t.Fatalf("exit code %d, want %d (stderr %q)", code, ExitOK, errOut.String())
	}
	if ran || s.validated {
		t.Error("--version ran or validated the process")
	}
	if got := strings.TrimSpace(out.String()); got != version.String("watcher") {
		t.Errorf("--version printed %q, want %q", got, version.String("watcher"))
	}
}

// A bad flag is a usage error (exit 2) in one line naming it on stderr; --help lists every
// flag, --version included, on stdout.
func TestUsageErrorsAndHelp(t *testing.T) {
	var s noSettings
	var errOut bytes.Buffer
	run := func(context.Context, hclog.Logger) error { return nil }
	if code := Main(Spec{Name: "pusher", Settings: &s, Run: run}, []string{"--no-such-flag"}, &errOut); code != ExitUsage {
		t.Errorf("unknown flag: exit %d, want %d", code, ExitUsage)
	}
	if !strings.Contains(errOut.String(), "no-such-flag") {
		t.Errorf("unknown flag: stderr %q does not name it", errOut.String())
	}
	errOut.Reset()
	var out bytes.Buffer
	if code := Main(Spec{Name: "pusher", Settings: &s, Run: run, Stdout: &out}, []string{"--help"}, &errOut); code != ExitOK {
		t.Errorf("--help: exit %d, want 0", code)
	}
	if !strings.Contains(out.String(), "--version") || !strings.Contains(out.String(), "--log-level") || errOut.Len() > 0 {
		t.Errorf("--help on stdout:\n%s\nstderr:\n%s\nwant every flag on stdout, nothing on stderr", out.String(), errOut.String())
	}
}
