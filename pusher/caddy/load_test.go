package caddy

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// adminThatRestarts is a Caddy admin API as it behaves on a /load of a config with an admin
// section: it answers on a kept-alive connection, then answers nothing more on that
// connection (Caddy replaces its admin server) and closes it. Every other request is
// answered, and connections are served one request at a time.
func adminThatRestarts(t *testing.T, config func() string) (string, func() []string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	var mu sync.Mutex
	var seen []string
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(r)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					mu.Lock()
					seen = append(seen, req.Method+" "+req.URL.Path)
					mu.Unlock()
					out := ""
					if req.Method == http.MethodGet && req.URL.Path == "/config/" {
						out = config()
					}
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(len(out))+"\r\n\r\n"+out)
					if req.URL.Path == "/load" {
						// Replaced: a request that still comes on this connection is read and
						// dropped unanswered, as by a server that is going away.
						_, _ = http.ReadRequest(r)
						return
					}
				}
			}(c)
		}
	}()
	return "http://" + lis.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// docs/design.md, reliability scenario 6 (proxy restarted): the module's first apply to a
// Caddy that does not run its constant config loads it, and Caddy then replaces its admin
// server, dropping the connection it answered on. The complete state that follows is sent
// on a new connection and arrives, not reset with the old one.
func TestModuleStateAfterALoadGoesOnANewConnection(t *testing.T) {
	admin, seen := adminThatRestarts(t, func() string { return "null" })
	m, err := NewModule(Config{Admin: admin, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &configv1.Config{Epoch: "e", Version: 1, Hash: "h", Resources: &configv1.Resources{}}
	if err := m.Apply(context.Background(), cfg); err != nil {
		t.Fatalf("apply after the base config's load: %v (requests: %s)", err, strings.Join(seen(), ", "))
	}
	if got := strings.Join(seen(), ", "); got != "GET /config/, POST /load, PUT /sluice/state" {
		t.Errorf("requests %s, want the base config's check and load, then the state", got)
	}
}
