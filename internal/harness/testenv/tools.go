package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// ToolPath returns the path of a pinned tool (kube-apiserver, kubectl, etcd, caddy), or an
// error that says what to run.
func ToolPath(name string) (string, error) {
	dirs := []string{}
	if d := os.Getenv("SLUICE_TOOLS_BIN"); d != "" {
		dirs = append(dirs, d)
	}
	if root, err := ModuleRoot(); err == nil {
		dirs = append(dirs, filepath.Join(root, ".tools", "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("testenv: tool %q not found in %s; run 'make tools' (or 'make test', which builds them)", name, strings.Join(dirs, ", "))
}

// ModuleRoot returns the directory of Sluice's go.mod, searching up from the working directory.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("module github.com/sluice-io/sluice\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("testenv: no Sluice go.mod above the working directory")
		}
		dir = parent
	}
}

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// Binaries builds the Sluice binaries (watcher, translator, pusher, sluicectl) and the test
// backend the pod runner runs (backend) once per test binary and returns the directory
// that holds them.
func Binaries() (string, error) {
	binOnce.Do(func() {
		root, err := ModuleRoot()
		if err != nil {
			binErr = err
			return
		}
		dir, err := os.MkdirTemp("", "sluice-bin-")
		if err != nil {
			binErr = err
			return
		}
		registerCleanup(func() { os.RemoveAll(dir) })
		cmd := exec.Command("go", "build", "-o", dir+"/", "./watcher", "./translator", "./pusher", "./cmd/sluicectl", "./cmd/backend")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("testenv: build sluice binaries: %v\n%s", err, out)
			return
		}
		binDir = dir
	})
	return binDir, binErr
}

// Binary returns the path of one Sluice binary.
func Binary(name string) (string, error) {
	dir, err := Binaries()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago, for processes that
// must be told their port up front.
func FreePort() (int, error) {
	handed.Lock()
	defer handed.Unlock()
	// The kernel may give a port it gave before once that listener closed; this process
	// never hands out one port twice (two parts of one test would both bind it).
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !handed.ports[port] {
			handed.ports[port] = true
			return port, nil
		}
	}
	return 0, errors.New("testenv: no loopback port that was not handed out already")
}

// handed is every port FreePort returned in this process.
var handed = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreeAddr returns "127.0.0.1:PORT" with a free port.
func FreeAddr() (string, error) {
	p, err := FreePort()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", p), nil
}

var (
	cleanupMu sync.Mutex
	cleanups  []func()
)

func registerCleanup(f func()) {
	cleanupMu.Lock()
	cleanups = append(cleanups, f)
	cleanupMu.Unlock()
}

// Doc reads docs/name of the module, failing t when it cannot: the tests that hold the
// documentation to the code read it this way.
func Doc(t testing.TB, name string) string {
	t.Helper()
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
