package caddy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// RejectedError is Caddy refusing a config (a 4xx or 5xx answer to /load): the previous
// config stays in place, and sending the same config again would fail the same way.
type RejectedError struct {
	Status  int
	Message string
	// Refused are the resources named as refused, when known (Refusals).
	Refused []contract.Refusal
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("caddy rejected the config (%d): %s", e.Status, e.Message)
}

// Config configures a Target.
type Config struct {
	// Admin is the admin API: an http(s):// URL or unix:///path/to/socket.
	Admin   string
	Render  RenderOptions
	Timeout time.Duration
	// UnboundListener, when set, is told once of each listener the configs' routes name
	// that Render.Listeners does not bind: those routes are served nowhere.
	UnboundListener func(listener string)
}

// Target is Caddy behind its admin API.
type Target struct {
	cfg    Config
	base   string
	client *http.Client

	// The last rendering: the gate asks for a config's fingerprint and then applies the same
	// config, and configs are never mutated, so one rendering serves both.
	mu       sync.Mutex
	lastCfg  *configv1.Config
	lastBody []byte
	lastFP   string

	unbound *unbound
}

func (t *Target) render(cfg *configv1.Config) ([]byte, string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cfg == t.lastCfg {
		return t.lastBody, t.lastFP, nil
	}
	body, fp, err := Render(cfg, t.cfg.Render)
	if err != nil {
		return nil, "", err
	}
	t.lastCfg, t.lastBody, t.lastFP = cfg, body, fp
	return body, fp, nil
}

// New returns a target; RenderOptions.AdminListen is derived from Admin when empty.
func New(cfg Config) (*Target, error) {
	u, err := url.Parse(cfg.Admin)
	if err != nil {
		return nil, fmt.Errorf("caddy admin %q: %w", cfg.Admin, err)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	t := &Target{cfg: cfg, unbound: newUnbound(cfg.Render, cfg.UnboundListener)}
	switch u.Scheme {
	case "http", "https":
		t.base = strings.TrimRight(cfg.Admin, "/")
		t.client = &http.Client{Timeout: cfg.Timeout}
		if cfg.Render.AdminListen == "" {
			t.cfg.Render.AdminListen = u.Host
		}
	case "unix":
		sock := u.Path
		t.base = "http://localhost"
		t.client = &http.Client{Timeout: cfg.Timeout, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", sock)
			}}}
		if cfg.Render.AdminListen == "" {
			t.cfg.Render.AdminListen = "unix/" + sock
		}
	default:
		return nil, fmt.Errorf("caddy admin %q: want http://, https:// or unix://", cfg.Admin)
	}
	return t, nil
}

// Name is the data plane's name for logs.
func (t *Target) Name() string { return "caddy" }

// Fingerprint returns what Caddy would run for cfg (see Render).
func (t *Target) Fingerprint(cfg *configv1.Config) (string, error) {
	_, fp, err := t.render(cfg)
	if err != nil {
		return "", rejectedRender(err)
	}
	return fp, nil
}

// Apply renders cfg and loads it. A *RejectedError means Caddy refused it; any other error
// means it is unknown whether Caddy got it (retry).
func (t *Target) Apply(ctx context.Context, cfg *configv1.Config) error {
	body, _, err := t.render(cfg)
	if err != nil {
		return rejectedRender(err)
	}
	t.unbound.check(cfg.GetResources().GetVirtualHosts())
	return t.load(ctx, body)
}

// load replaces Caddy's whole config with body (POST /load: all or nothing).
func (t *Target) load(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+"/load", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		return fmt.Errorf("caddy /load: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		_, _ = io.Copy(io.Discard, resp.Body)
		// A config with an admin section of its own (the module's constant config) makes
		// Caddy replace its admin server once it has answered, closing the connection the
		// answer came on: the next request must not be sent on it (it would fail with a
		// reset, and a PUT is not retried).
		t.client.CloseIdleConnections()
		return nil
	}
	return &RejectedError{Status: resp.StatusCode, Message: errorText(resp)}
}

// Current returns the fingerprint of the config Caddy runs, "" when it runs none of the
// pusher's (a fresh or replaced config), or an error when Caddy cannot be asked.
func (t *Target) Current(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.base+"/id/"+MetaID+"/include/0", nil)
	if err != nil {
		return "", err
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("caddy admin: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode == http.StatusOK:
		var id string
		if err := json.Unmarshal(body, &id); err != nil {
			return "", nil
		}
		return FingerprintOfIdentity(id), nil
	case resp.StatusCode == http.StatusNotFound, resp.StatusCode == http.StatusBadRequest:
		return "", nil // no such id: not our config
	default:
		return "", errors.New("caddy admin: " + resp.Status + ": " + strings.TrimSpace(string(body)))
	}
}

// Rejected marks the error as the data plane refusing the config (see gate.Rejection).
func (e *RejectedError) Rejected() bool { return true }

// CurrentWithin is Current, asked again for up to `within` while Caddy's admin API does not
// answer: Caddy restarts its admin listener when a load changes the admin section, and a
// restarted Caddy takes a moment to listen.
func (t *Target) CurrentWithin(ctx context.Context, within time.Duration) (string, error) {
	return CurrentWithin(ctx, t, within)
}

// CurrentWithin asks a target (stock or module) what Caddy runs, again for up to `within`
// while Caddy's admin API does not answer.
func CurrentWithin(ctx context.Context, t interface {
	Current(context.Context) (string, error)
}, within time.Duration) (string, error) {
	deadline := time.Now().Add(within)
	for {
		fp, err := t.Current(ctx)
		if err == nil || time.Now().After(deadline) {
			return fp, err
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
