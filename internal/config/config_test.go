package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

type settings struct {
	addr    string
	timeout time.Duration
	list    []string
}

func flags(s *settings) *pflag.FlagSet {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.String("config", "", "")
	fs.StringVar(&s.addr, "listen", "127.0.0.1:1", "")
	fs.DurationVar(&s.timeout, "sync-timeout", time.Minute, "")
	fs.StringSliceVar(&s.list, "namespaces", nil, "")
	return fs
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A flag wins over the environment, which wins over the file, which wins over the default.
func TestPrecedence(t *testing.T) {
	file := writeFile(t, "listen: 127.0.0.1:3\nsync-timeout: 3s\nnamespaces: [a, b]\n")
	var s settings
	err := Load(flags(&s), []string{"--config", file, "--listen", "127.0.0.1:9"}, env(map[string]string{"SLUICE_SYNC_TIMEOUT": "7s", "SLUICE_LISTEN": "127.0.0.1:8"}))
	if err != nil {
		t.Fatal(err)
	}
	if s.addr != "127.0.0.1:9" || s.timeout != 7*time.Second || strings.Join(s.list, ",") != "a,b" {
		t.Fatalf("got %+v", s)
	}
}

// A bad value names the setting and its environment variable, whatever its source.
func TestBadValuesNameTheSetting(t *testing.T) {
	cases := []struct {
		args []string
		env  map[string]string
		file string
		want string
	}{
		{env: map[string]string{"SLUICE_SYNC_TIMEOUT": "soon"}, want: `invalid setting --sync-timeout (SLUICE_SYNC_TIMEOUT) "soon" from the environment: `},
		{file: "sync-timeout: later\n", want: `invalid setting --sync-timeout (SLUICE_SYNC_TIMEOUT) "later" in config file /`},
		{file: "no-such-setting: 1\n", want: `unknown setting "no-such-setting" in file`},
		{file: "sync-timout: 1s\n", want: `unknown setting "sync-timout" in file (did you mean "sync-timeout"?)`},
		{args: []string{"--nope"}, want: "unknown flag: --nope"},
		{args: []string{"--lsten", "x"}, want: "unknown flag: --lsten (did you mean --listen? see --help)"},
		{args: []string{"extra"}, want: `unexpected argument "extra"`},
	}
	for _, c := range cases {
		var s settings
		args := c.args
		if c.file != "" {
			args = append(args, "--config", writeFile(t, c.file))
		}
		err := Load(flags(&s), args, env(c.env))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: got %v, want one line containing %q", c, err, c.want)
		}
	}
	var cfgErr *Error
	var s settings
	if err := Load(flags(&s), nil, env(map[string]string{"SLUICE_SYNC_TIMEOUT": "x"})); !errors.As(err, &cfgErr) || cfgErr.Setting != "sync-timeout" {
		t.Fatalf("not a *config.Error for the setting: %v", err)
	}
}

func TestChecks(t *testing.T) {
	for _, bad := range []string{"localhost", "a:b:c", "host:port", "with space:80"} {
		if CheckHostPort("listen", bad, false) == nil {
			t.Errorf("CheckHostPort accepted %q", bad)
		}
	}
	for _, good := range []string{"127.0.0.1:0", ":8080", "[::1]:80", "example.com:443"} {
		if err := CheckHostPort("listen", good, false); err != nil {
			t.Errorf("CheckHostPort refused %q: %v", good, err)
		}
	}
	if CheckURL("caddy-admin", "unix:///run/caddy.sock") != nil || CheckURL("caddy-admin", "ftp://x") == nil || CheckURL("caddy-admin", "http://") == nil {
		t.Error("CheckURL")
	}
	if CheckReadable("tls-cert", "/nonexistent/file") == nil {
		t.Error("CheckReadable accepted a missing file")
	}
}

// A SLUICE_* variable that names no setting is listed with the closest one (docs/operations.md,
// "Settings"): ignored, since one environment may serve several processes, but never unseen.
func TestUnknownEnvironmentVariablesAreNamed(t *testing.T) {
	var s settings
	got := UnknownEnv(flags(&s), []string{"PATH=/bin", "SLUICE_LISTEN=127.0.0.1:1", "SLUICE_SYNC_TIMOUT=3s", "SLUICE_WATCHER_ADDR=x", "SLUICELIKE=1"})
	want := []UnknownVar{{Name: "SLUICE_SYNC_TIMOUT", Suggestion: "SLUICE_SYNC_TIMEOUT"}, {Name: "SLUICE_WATCHER_ADDR"}}
	if !slices.Equal(got, want) {
		t.Fatalf("UnknownEnv = %+v, want %+v", got, want)
	}
}
