package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// Caddy is a real Caddy process with its admin API on a loopback port. HTTPPort and HTTPSPort
// are free ports reserved for the configs a test loads.
type Caddy struct {
	Dir       string
	AdminURL  string // http://127.0.0.1:PORT
	HTTPPort  int
	HTTPSPort int

	proc *Process
}

// StartCaddy starts Caddy (with Sluice's module) with an admin-only config and waits until
// the admin API answers.
func StartCaddy(ctx context.Context) (*Caddy, error) { return startCaddy(ctx, "caddy") }

// StartStockCaddy is StartCaddy with stock Caddy (no Sluice module), for the pusher's
// POST /load target.
func StartStockCaddy(ctx context.Context) (*Caddy, error) { return startCaddy(ctx, "caddy-stock") }

// StartCaddyTool is StartCaddy with another Caddy of .tools/bin, such as "caddy-sluicetest"
// (the module with its test-only rule, which refuses routes whose path starts with
// /refused-by-test).
func StartCaddyTool(ctx context.Context, tool string) (*Caddy, error) { return startCaddy(ctx, tool) }

func startCaddy(ctx context.Context, tool string) (*Caddy, error) {
	bin, err := ToolPath(tool)
	if err != nil {
		return nil, err
	}
	dir, err := TempDir("sluice-caddy-")
	if err != nil {
		return nil, err
	}
	c := &Caddy{Dir: dir}
	ports := make([]int, 3)
	for i := range ports {
		if ports[i], err = FreePort(); err != nil {
			return nil, err
		}
	}
	c.AdminURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	c.HTTPPort, c.HTTPSPort = ports[1], ports[2]
	initial := fmt.Sprintf(`{"admin":{"listen":"127.0.0.1:%d"}}`, ports[0])
	if err := os.WriteFile(filepath.Join(dir, "initial.json"), []byte(initial), 0o644); err != nil {
		return nil, err
	}
	c.proc, err = StartProcess(ProcessConfig{Name: "caddy", Path: bin, Dir: dir,
		Args: []string{"run", "--config", filepath.Join(dir, "initial.json")},
		// Caddy keeps its storage and autosaved config under these; keep them per instance.
		Env: []string{"HOME=" + dir, "XDG_DATA_HOME=" + filepath.Join(dir, "data"), "XDG_CONFIG_HOME=" + filepath.Join(dir, "config")},
	})
	if err != nil {
		return nil, err
	}
	if err := c.waitAdmin(ctx); err != nil {
		c.Kill()
		return nil, err
	}
	return c, nil
}

func (c *Caddy) waitAdmin(ctx context.Context) error {
	if err := waitHTTP(ctx, c.proc, c.AdminURL+"/config/", nil); err != nil {
		return fmt.Errorf("testenv: caddy admin API did not answer: %w\n%s", err, c.proc.LogTail(20))
	}
	return nil
}

// Load replaces Caddy's whole config (POST /load). A non-2xx answer is an error with Caddy's
// message.
func (c *Caddy) Load(ctx context.Context, config []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.AdminURL+"/load", bytes.NewReader(config))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("caddy /load: %s: %s", resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// Config returns Caddy's current config (GET /config/).
func (c *Caddy) Config(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.AdminURL+"/config/", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("caddy /config/: %s: %s", resp.Status, body)
	}
	return body, nil
}

// Process is Caddy's process.
func (c *Caddy) Process() *Process { return c.proc }

// Stop stops Caddy gracefully.
func (c *Caddy) Stop() { c.proc.Stop(10 * time.Second) }

// Kill kills Caddy at once.
func (c *Caddy) Kill() { c.proc.Kill() }

// Restart starts a stopped or killed Caddy again with its initial, admin-only config: the
// routes it had are gone, as after a real crash.
func (c *Caddy) Restart(ctx context.Context) error {
	if !c.proc.Exited() {
		c.Kill()
	}
	p, err := c.proc.Restart()
	if err != nil {
		return err
	}
	c.proc = p
	return c.waitAdmin(ctx)
}
