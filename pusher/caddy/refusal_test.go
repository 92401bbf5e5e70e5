package caddy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// What stock Caddy cannot be given is refused by the renderer, naming each route once (a
// route served on both schemes is rendered twice), with the error of each.
func TestRenderRefusalNamesTheRoutes(t *testing.T) {
	bad := func(name string) *configv1.Route {
		return &configv1.Route{Name: name, Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"},
			Query: []*configv1.QueryMatch{{Name: "{q}", Value: "x"}}}
	}
	ok := &configv1.Route{Name: "ok", Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"}}
	res := &configv1.Resources{VirtualHosts: []*configv1.VirtualHost{
		{Hostname: "a.example.com", Routes: []*configv1.Route{ok, bad("ns/a/r1")}},
		{Hostname: "b.example.com", Routes: []*configv1.Route{bad("ns/b/r0")}},
	}}
	target, err := New(Config{Admin: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = target.Fingerprint(&configv1.Config{Resources: res})
	var rej *RejectedError
	if !errors.As(err, &rej) {
		t.Fatalf("an unrenderable config: %v, want a RejectedError", err)
	}
	want := []contract.Refusal{{Host: "a.example.com", Route: "ns/a/r1"}, {Host: "b.example.com", Route: "ns/b/r0"}}
	if !reflect.DeepEqual(rej.Refusals(), want) || !strings.Contains(err.Error(), "route ns/b/r0: query parameter") {
		t.Fatalf("refused %+v (%v), want %+v with each route's error", rej.Refusals(), err, want)
	}
}

// The module's 422 names what it refused in contract.RefusedHeader; the target's error
// carries it for the gate. A 422 naming nothing names nothing.
func TestModuleRefusalIsRead(t *testing.T) {
	want := []contract.Refusal{{Host: "a.example.com", Route: "ns/a/r0"}, {Certificate: "ns/tls"}}
	var unnamed atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !unnamed.Load() {
			b, _ := json.Marshal(want)
			w.Header().Set(contract.RefusedHeader, string(b))
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = w.Write([]byte(`{"error":"config rejected: route ns/a/r0: bad"}`))
	}))
	defer srv.Close()
	m, err := NewModule(Config{Admin: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	err = m.ApplyDelta(context.Background(), &configv1.ConfigDelta{})
	var rej *RejectedError
	if !errors.As(err, &rej) || !reflect.DeepEqual(rej.Refusals(), want) || !strings.Contains(err.Error(), "route ns/a/r0: bad") {
		t.Fatalf("the module's refusal: %v naming %+v, want a RejectedError naming %+v", err, rej, want)
	}
	unnamed.Store(true)
	if err := m.ApplyDelta(context.Background(), &configv1.ConfigDelta{}); !errors.As(err, &rej) || rej.Refusals() != nil {
		t.Fatalf("a refusal naming nothing: %v", err)
	}
}

// One reverse_proxy speaks one protocol: a route whose backends speak h2c and HTTP/1.1 is
// refused, whether or not they have ready endpoints; one whose backends all speak h2c gets
// a transport that does.
func TestRenderRefusesBackendsOfDifferentProtocols(t *testing.T) {
	mk := func(backends ...string) *configv1.Route {
		rt := &configv1.Route{Name: "r", Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"}}
		for _, b := range backends {
			rt.Backends = append(rt.Backends, &configv1.WeightedBackend{Backend: b, Weight: 1})
		}
		return rt
	}
	backends := map[string]*configv1.Backend{
		"h2c":   {Name: "h2c", Protocol: configv1.BackendProtocol_BACKEND_PROTOCOL_H2C, Endpoints: []*configv1.Endpoint{{Address: "10.0.0.1", Port: 3001, Ready: true}}},
		"h2c-2": {Name: "h2c-2", Protocol: configv1.BackendProtocol_BACKEND_PROTOCOL_H2C, Endpoints: []*configv1.Endpoint{{Address: "10.0.0.2", Port: 3001, Ready: true}}},
		"http":  {Name: "http"}, // no ready endpoint
	}
	if _, err := route(mk("h2c", "http"), backends, "http"); err == nil || !strings.Contains(err.Error(), "different protocols") {
		t.Errorf("h2c beside HTTP/1.1: %v, want a refusal naming the protocols", err)
	}
	r, err := route(mk("h2c", "h2c-2"), backends, "http")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r)
	if !strings.Contains(string(b), `"transport":{"protocol":"http","versions":["h2c"]}`) {
		t.Errorf("h2c backends rendered as %s, want a transport speaking h2c", b)
	}
}
