// Package stack runs the whole of Sluice on this machine: the three binaries as separate
// processes against a test cluster, with a real Caddy. `make demo` and the end-to-end tests
// both use it, so the demo shows exactly what the tests prove.
package stack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluice-io/sluice/internal/harness/testenv"
)

// Config configures a Stack.
type Config struct {
	Cluster *testenv.Cluster
	// BinDir holds watcher, translator and pusher.
	BinDir string
	// Dir is where processes write their logs.
	Dir string
	// WatcherKubeconfig defaults to the cluster's admin kubeconfig.
	WatcherKubeconfig string
	// Namespaces restricts the watcher (empty: all).
	Namespaces []string
	// IngressClass is the translator's class (default "sluice").
	IngressClass string
	// HTTPAddr and HTTPSAddr are Caddy's listeners (default: free loopback ports).
	HTTPAddr, HTTPSAddr string
	// LogLevel of the three processes (default info).
	LogLevel string
	// Extra flags per process.
	WatcherArgs, TranslatorArgs, PusherArgs []string
	// CaddyTool is the Caddy binary of .tools/bin to run (default "caddy").
	CaddyTool string
	// MemoryLimits are container memory limits in bytes, by process name ("watcher",
	// "translator", "pusher"): each such process runs in a memory cgroup of its own.
	MemoryLimits map[string]uint64
}

// Stack is the running system.
type Stack struct {
	cfg   Config
	Caddy *testenv.Caddy

	Watcher, Translator, Pusher *testenv.Process
	replicas                    []*testenv.Process

	WatcherAddr, WatcherHTTP       string
	TranslatorAddr, TranslatorHTTP string
	PusherAddr, PusherHTTP         string
}

// Start starts Caddy and the three processes, and waits until Caddy runs a config.
func Start(ctx context.Context, cfg Config) (*Stack, error) {
	if cfg.Cluster == nil || cfg.BinDir == "" {
		return nil, errors.New("stack: Cluster and BinDir are required")
	}
	if cfg.WatcherKubeconfig == "" {
		cfg.WatcherKubeconfig = cfg.Cluster.AdminKubeconfig
	}
	if cfg.IngressClass == "" {
		cfg.IngressClass = "sluice"
	}
	if cfg.LogLevel == "" {
		cfg.LogLevel = "info"
	}
	if cfg.Dir == "" {
		d, err := os.MkdirTemp("", "sluice-stack-")
		if err != nil {
			return nil, err
		}
		cfg.Dir = d
	}
	s := &Stack{cfg: cfg}
	var err error
	if cfg.CaddyTool == "" {
		cfg.CaddyTool = "caddy"
	}
	if s.Caddy, err = testenv.StartCaddyTool(ctx, cfg.CaddyTool); err != nil {
		return nil, err
	}
	if cfg.HTTPAddr == "" {
		s.cfg.HTTPAddr = fmt.Sprintf("127.0.0.1:%d", s.Caddy.HTTPPort)
	}
	if cfg.HTTPSAddr == "" {
		s.cfg.HTTPSAddr = fmt.Sprintf("127.0.0.1:%d", s.Caddy.HTTPSPort)
	}
	addrs := make([]string, 6)
	for i := range addrs {
		if addrs[i], err = testenv.FreeAddr(); err != nil {
			return nil, err
		}
	}
	s.WatcherAddr, s.WatcherHTTP = addrs[0], addrs[1]
	s.TranslatorAddr, s.TranslatorHTTP = addrs[2], addrs[3]
	s.PusherAddr, s.PusherHTTP = addrs[4], addrs[5]
	if err := s.StartWatcher(); err != nil {
		return nil, err
	}
	if err := s.StartTranslator(); err != nil {
		return nil, err
	}
	if err := s.StartPusher(); err != nil {
		return nil, err
	}
	return s, nil
}

// HTTPAddr and HTTPSAddr are where Caddy serves.
func (s *Stack) HTTPAddr() string  { return s.cfg.HTTPAddr }
func (s *Stack) HTTPSAddr() string { return s.cfg.HTTPSAddr }

func (s *Stack) start(name string, args []string) (*testenv.Process, error) {
	args = append([]string{"--log-level", s.cfg.LogLevel}, args...)
	return testenv.StartProcess(testenv.ProcessConfig{Name: name, Path: filepath.Join(s.cfg.BinDir, name), Dir: s.cfg.Dir, Args: args,
		MemoryLimit: s.cfg.MemoryLimits[name]})
}

// StartWatcher starts (or restarts, after it exited) the watcher, with extra flags.
func (s *Stack) StartWatcher(extra ...string) error {
	args := []string{"--kubeconfig", s.cfg.WatcherKubeconfig, "--listen", s.WatcherAddr, "--http-listen", s.WatcherHTTP}
	if len(s.cfg.Namespaces) > 0 {
		args = append(args, "--namespaces", joinComma(s.cfg.Namespaces))
	}
	p, err := s.start("watcher", append(append(args, s.cfg.WatcherArgs...), extra...))
	s.Watcher = p
	return err
}

// Replica is a watcher replica started apart from the stack's own watcher.
type Replica struct {
	*testenv.Process
	Addr, HTTP string
}

// StartWatcherReplica starts one more watcher, named name, on addresses of its own, with the
// stack's watcher flags and extra; it is stopped with the stack.
func (s *Stack) StartWatcherReplica(name string, extra ...string) (*Replica, error) {
	a, err := testenv.FreeAddr()
	if err != nil {
		return nil, err
	}
	h, err := testenv.FreeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"--log-level", s.cfg.LogLevel, "--kubeconfig", s.cfg.WatcherKubeconfig, "--listen", a, "--http-listen", h}
	if len(s.cfg.Namespaces) > 0 {
		args = append(args, "--namespaces", joinComma(s.cfg.Namespaces))
	}
	p, err := testenv.StartProcess(testenv.ProcessConfig{Name: name, Path: filepath.Join(s.cfg.BinDir, "watcher"), Dir: s.cfg.Dir,
		Args: append(append(args, s.cfg.WatcherArgs...), extra...)})
	if err != nil {
		return nil, err
	}
	s.replicas = append(s.replicas, p)
	return &Replica{Process: p, Addr: a, HTTP: h}, nil
}

// StartTranslator starts (or restarts) the translator.
func (s *Stack) StartTranslator(extra ...string) error {
	args := []string{"--watcher-addr", s.WatcherAddr, "--listen", s.TranslatorAddr, "--http-listen", s.TranslatorHTTP, "--ingress-class", s.cfg.IngressClass}
	p, err := s.start("translator", append(append(args, s.cfg.TranslatorArgs...), extra...))
	s.Translator = p
	return err
}

// StartPusher starts (or restarts) the pusher.
func (s *Stack) StartPusher(extra ...string) error {
	args := []string{"--translator-addr", s.TranslatorAddr, "--caddy-admin", s.Caddy.AdminURL, "--id", "stack-pusher",
		"--proxy-http-listen", s.cfg.HTTPAddr, "--proxy-https-listen", s.cfg.HTTPSAddr, "--listen", s.PusherAddr, "--http-listen", s.PusherHTTP}
	p, err := s.start("pusher", append(append(args, s.cfg.PusherArgs...), extra...))
	s.Pusher = p
	return err
}

// Stop stops everything, processes first, then Caddy.
func (s *Stack) Stop() {
	for _, p := range append([]*testenv.Process{s.Pusher, s.Translator, s.Watcher}, s.replicas...) {
		if p != nil {
			p.Stop(5 * time.Second)
		}
	}
	if s.Caddy != nil {
		s.Caddy.Stop()
	}
}

// Logs returns the tail of every process's log, for failure messages.
func (s *Stack) Logs(n int) string {
	out := ""
	for _, p := range append([]*testenv.Process{s.Watcher, s.Translator, s.Pusher}, s.replicas...) {
		if p != nil {
			out += "--- " + p.Name() + "\n" + p.LogTail(n) + "\n"
		}
	}
	return out
}

func joinComma(ss []string) string { return strings.Join(ss, ",") }
