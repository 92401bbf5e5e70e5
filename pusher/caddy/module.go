package caddy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"google.golang.org/protobuf/proto"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// The Sluice module's admin API (pusher/caddymod, a Go module of its own: the pusher only
// speaks to it over HTTP).
const (
	modulePathState = "/sluice/state"
	modulePathDelta = "/sluice/delta"
)

// ModuleTarget is a Caddy built with Sluice's module: Caddy's own config is small and
// constant (the listeners and the module) and loaded once; versions go to the module's
// admin endpoint, the complete state or a delta, and change routes in place, without a
// reload.
type ModuleTarget struct {
	t    *Target
	base []byte // Caddy's config, constant
}

// NewModule returns a target for a Caddy with the module.
func NewModule(cfg Config) (*ModuleTarget, error) {
	t, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return &ModuleTarget{t: t, base: ModuleConfig(t.cfg.Render)}, nil
}

// The request variable through which the module's router says which reverse_proxy speaks
// the backend it picked (caddymod's protocolVar, protocolH2C and protocolTLS): ModuleH2C
// selects the one that speaks HTTP/2 over cleartext, ModuleTLS the one that speaks TLS
// without verifying the endpoint (BACKEND_PROTOCOL_TLS), anything else the default one.
const (
	ModuleProtocolVar = "sluice.protocol"
	ModuleH2C         = "h2c"
	ModuleTLS         = "tls"
	// ModuleHostVar holds the Host a TLS backend is sent (caddymod's hostVar): Caddy's
	// transport would otherwise set the endpoint's address, where ingress-nginx keeps the
	// request's (or upstream-vhost's) Host.
	ModuleHostVar = "sluice.host"
)

// ModuleConfig is Caddy's whole config with the module: the admin endpoint, an HTTP and an
// HTTPS server and one per further listener, whose routes are the module's router (told its
// server's listener) followed by reverse_proxy with the module's upstreams, and
// certificates from the module at handshake time. There are three reverse_proxy handlers, as
// a transport's HTTP versions and TLS are fixed in its config: one whose transport speaks
// HTTP/2 over cleartext with prior knowledge (Caddy's "h2c" version) for the backends whose
// Service port says kubernetes.io/h2c, one that speaks TLS without verifying the endpoint
// (BACKEND_PROTOCOL_TLS), each chosen by the router's ModuleProtocolVar, and the default one
// for every other backend.
func ModuleConfig(o RenderOptions) []byte {
	servers := obj{}
	for _, sv := range o.servers() {
		router := obj{"handler": "sluice"}
		if sv.listener != "" {
			router["listener"] = sv.listener
		}
		// Each reverse_proxy's transport is the module's, which builds Caddy's http transport
		// (as "http" says) once per set of route timeouts (Route.backend_timeouts).
		transport := func(http obj) obj { return obj{"protocol": "sluice", "http": http} }
		routes := []any{
			obj{"handle": []any{router}},
			obj{"match": []any{obj{"vars": obj{ModuleProtocolVar: []string{ModuleH2C}}}}, "terminal": true,
				"handle": []any{obj{"handler": "reverse_proxy", "dynamic_upstreams": obj{"source": "sluice"},
					"transport": transport(obj{"versions": []string{"h2c"}})}}},
			obj{"match": []any{obj{"vars": obj{ModuleProtocolVar: []string{ModuleTLS}}}}, "terminal": true,
				"handle": []any{obj{"handler": "reverse_proxy", "dynamic_upstreams": obj{"source": "sluice"},
					"transport": transport(obj{"tls": obj{"insecure_skip_verify": true}}),
					"headers":   obj{"request": obj{"set": obj{"Host": []string{"{http.vars." + ModuleHostVar + "}"}}}}}}},
			obj{"handle": []any{obj{"handler": "reverse_proxy", "dynamic_upstreams": obj{"source": "sluice"},
				"transport": transport(obj{})}}},
		}
		srv := obj{"listen": []string{sv.listen}, "routes": routes, "automatic_https": obj{"disable": true}}
		if sv.scheme == "https" {
			srv["tls_connection_policies"] = []any{obj{}}
		}
		servers[sv.key] = srv
	}
	httpApp := obj{"servers": servers}
	logs := obj{}
	observe(o, httpApp, servers, logs)
	doc := obj{
		"admin": obj{"listen": o.AdminListen, "config": obj{"persist": false}},
		"apps": obj{
			"http": httpApp,
			// Certificates come from the module at handshake time; nothing is ever issued (the
			// module's permission refuses on-demand issuance for names it has no certificate for).
			"tls": obj{"automation": obj{
				"on_demand": obj{"permission": obj{"module": "sluice"}},
				"policies":  []any{obj{"get_certificate": []any{obj{"via": "sluice"}}}},
			}},
		},
	}
	if len(logs) > 0 {
		doc["logging"] = obj{"logs": logs}
	}
	b, _ := json.Marshal(doc) // cannot fail: plain maps and strings
	return b
}

// Name is the data plane's name for logs.
func (m *ModuleTarget) Name() string { return "caddy-module" }

// Fingerprint is a version's state hash: the module runs exactly the state it holds.
func (m *ModuleTarget) Fingerprint(cfg *configv1.Config) (string, error) { return cfg.GetHash(), nil }

// Apply loads Caddy's constant config if Caddy does not run it, then replaces the module's
// state with cfg, atomically.
func (m *ModuleTarget) Apply(ctx context.Context, cfg *configv1.Config) error {
	ok, err := m.baseLoaded(ctx)
	if err != nil {
		return err
	}
	if !ok {
		if err := m.t.load(ctx, m.base); err != nil {
			return err
		}
	}
	body, err := proto.Marshal(cfg)
	if err != nil {
		return &RejectedError{Message: "cannot encode: " + err.Error()}
	}
	m.t.unbound.check(cfg.GetResources().GetVirtualHosts())
	return m.send(ctx, http.MethodPut, modulePathState, body)
}

// ApplyDelta applies d onto the version the module holds. An error with NotAtBase() true
// means the module holds another version (restarted, or replaced): send the complete state.
func (m *ModuleTarget) ApplyDelta(ctx context.Context, d *configv1.ConfigDelta) error {
	body, err := proto.Marshal(d)
	if err != nil {
		return &RejectedError{Message: "cannot encode: " + err.Error()}
	}
	m.t.unbound.check(d.GetVirtualHosts())
	return m.send(ctx, http.MethodPost, modulePathDelta, body)
}

// NotAtBaseError is the module answering that a delta is not onto the version it holds.
type NotAtBaseError struct{ Message string }

func (e *NotAtBaseError) Error() string { return "caddy module: " + e.Message }

// NotAtBase marks the error for the gate: push the complete state instead.
func (e *NotAtBaseError) NotAtBase() bool { return true }

func (m *ModuleTarget) send(ctx context.Context, method, path string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, method, m.t.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := m.t.client.Do(req)
	if err != nil {
		return fmt.Errorf("caddy module: %w", err)
	}
	defer resp.Body.Close()
	msg := errorText(resp)
	switch {
	case resp.StatusCode/100 == 2:
		return nil
	case resp.StatusCode == http.StatusConflict:
		return &NotAtBaseError{Message: msg}
	case resp.StatusCode == http.StatusNotFound:
		return errors.New("caddy has no Sluice module (404 from " + path + "); use --caddy-target=load or the Caddy from make build")
	case resp.StatusCode == http.StatusUnprocessableEntity, resp.StatusCode == http.StatusBadRequest:
		return &RejectedError{Status: resp.StatusCode, Message: msg, Refused: refusedOf(resp)}
	default:
		return fmt.Errorf("caddy module: %s: %s", resp.Status, msg)
	}
}

// Current returns the state hash the module holds, "" when it holds none or Caddy does not
// run the module's config (restarted, or replaced by someone else).
func (m *ModuleTarget) Current(ctx context.Context) (string, error) {
	ok, err := m.baseLoaded(ctx)
	if err != nil || !ok {
		return "", err
	}
	info, err := m.state(ctx)
	if err != nil {
		return "", err
	}
	return info.Hash, nil
}

// ModuleState is what the module says it holds.
type ModuleState struct {
	Epoch        string `json:"epoch"`
	Version      uint64 `json:"version"`
	Hash         string `json:"hash"`
	VirtualHosts int    `json:"virtual_hosts"`
}

func (m *ModuleTarget) state(ctx context.Context) (ModuleState, error) {
	var info ModuleState
	resp, err := m.get(ctx, modulePathState)
	if err != nil {
		return info, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return info, fmt.Errorf("caddy module: %s: %s", resp.Status, errorText(resp))
	}
	return info, json.NewDecoder(resp.Body).Decode(&info)
}

// baseLoaded reports whether Caddy runs the module's constant config.
func (m *ModuleTarget) baseLoaded(ctx context.Context) (bool, error) {
	resp, err := m.get(ctx, "/config/")
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("caddy admin: %s: %s", resp.Status, errorText(resp))
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return sameJSON(body, m.base), nil
}

// get asks Caddy's admin API; the caller closes the body.
func (m *ModuleTarget) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.t.base+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := m.t.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("caddy admin: %w", err)
	}
	return resp, nil
}

func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// HasModule reports whether the Caddy behind cfg.Admin has Sluice's module.
func HasModule(ctx context.Context, cfg Config) (bool, error) {
	m, err := NewModule(cfg)
	if err != nil {
		return false, err
	}
	resp, err := m.get(ctx, modulePathState)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	switch resp.StatusCode {
	case http.StatusOK:
		return true, nil
	case http.StatusNotFound:
		return false, nil
	default:
		return false, fmt.Errorf("caddy admin: %s", resp.Status)
	}
}

func errorText(resp *http.Response) string {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(msg, &e) == nil && e.Error != "" {
		return e.Error
	}
	return strings.TrimSpace(string(msg))
}
