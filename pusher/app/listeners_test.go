package app

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/sluice-io/sluice/pusher/caddy"
)

func settings(t *testing.T, args ...string) *Settings {
	t.Helper()
	var s Settings
	fs := pflag.NewFlagSet("pusher", pflag.ContinueOnError)
	s.Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &s
}

// The further listeners (docs/design.md, "Gateway addresses and ports"): each named as the
// translator names routes, bound once; a flag that could never serve is refused at start,
// naming it.
func TestProxyListeners(t *testing.T) {
	s := settings(t, "--proxy-listener", "http:8080=:18080", "--proxy-listener", "https:192.0.2.21:443=127.0.0.1:18443")
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	got, _ := s.listeners()
	want := []caddy.Listener{{Name: "8080", Listen: ":18080"}, {Name: "192.0.2.21:443", HTTPS: true, Listen: "127.0.0.1:18443"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("listeners %+v, want %+v", got, want)
	}
	for _, bad := range [][]string{
		{"8080=:18080"},                          // no scheme
		{"tcp:8080=:18080"},                      // not http or https
		{"http:8080"},                            // no address
		{"http:web=:18080"},                      // not a port or address and port
		{"http:192.0.2.21=:18080"},               // an address without port
		{"http:8080=:18080", "http:8080=:18081"}, // a name twice
		{"http:8080=:18080", "http:8081=:18080"}, // an address twice
		{"http:8080=:8443"},                      // the main HTTPS listener's address
		{"http:8080=nowhere"},                    // not host:port
	} {
		var args []string
		for _, b := range bad {
			args = append(args, "--proxy-listener", b)
		}
		if err := settings(t, args...).Validate(); err == nil || !strings.Contains(err.Error(), "proxy-listener") {
			t.Errorf("%v: error %v, want one naming --proxy-listener", bad, err)
		}
	}
}
