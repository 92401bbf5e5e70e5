package grpcx

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// gRPC between components on a non-loopback address without TLS is logged as a warning, on
// both the server and the client side; loopback and TLS are not.
func TestPlaintextOffLoopbackWarns(t *testing.T) {
	cases := []struct {
		addr string
		warn bool
	}{{"0.0.0.0:18000", true}, {"10.1.2.3:18000", true}, {"sluice-watcher:18000", true}, {"127.0.0.1:18000", false}, {"localhost:1", false}, {"[::1]:1", false}}
	for _, c := range cases {
		var buf bytes.Buffer
		log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Warn})
		if _, err := NewServer(ServerConfig{Logger: log, Address: c.addr}); err != nil {
			t.Fatal(err)
		}
		conn, err := Dial(c.addr, ClientConfig{Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		conn.Close()
		warned := strings.Count(buf.String(), "without TLS")
		if c.warn && warned != 2 || !c.warn && warned != 0 {
			t.Errorf("%s: %d warnings, want %v:\n%s", c.addr, warned, c.warn, buf.String())
		}
	}
}
