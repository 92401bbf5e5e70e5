package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ProcessConfig describes a process to start.
type ProcessConfig struct {
	Name string // for logs and errors
	Path string
	Args []string
	Env  []string // added to the test's environment
	Dir  string   // working directory and where the log file goes; a temp dir when empty
	// MemoryLimit, when not zero, runs the process in a memory cgroup of its own with that
	// limit in bytes, as a container's memory limit would: made for each start, removed once
	// the process has exited.
	MemoryLimit uint64
}

// Process is a child process whose output goes to a log file.
type Process struct {
	cfg     ProcessConfig
	cmd     *exec.Cmd
	logPath string
	logFrom int64 // where this run's output starts in the (appended) log file
	done    chan struct{}
	err     error // set before done is closed

	cgroup    *MemoryCgroup // nil without a MemoryLimit
	lastStats MemoryStats   // the cgroup's, read when the process exited
	statsErr  error
}

var (
	liveMu sync.Mutex
	live   = map[*Process]struct{}{}
)

// StartProcess starts cfg. The process gets its own process group and is killed if the test
// binary dies (Pdeathsig), so nothing outlives the tests.
func StartProcess(cfg ProcessConfig) (*Process, error) {
	if cfg.Dir == "" {
		d, err := os.MkdirTemp("", "sluice-"+cfg.Name+"-")
		if err != nil {
			return nil, err
		}
		cfg.Dir = d
	}
	logPath := filepath.Join(cfg.Dir, cfg.Name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	var logFrom int64
	if fi, err := logf.Stat(); err == nil {
		logFrom = fi.Size()
	}
	var cg *MemoryCgroup
	cmd := exec.Command(cfg.Path, cfg.Args...)
	if cfg.MemoryLimit > 0 {
		if cg, err = NewMemoryCgroup(cfg.Name, cfg.MemoryLimit); err != nil {
			logf.Close()
			return nil, err
		}
		// The shell moves itself into the cgroup and then becomes the process (same pid), so
		// the process reads its limit from its first instruction on.
		cmd = exec.Command("/bin/sh", append([]string{"-c", `echo $$ > "$0" && exec "$@"`, cg.Procs(), cfg.Path}, cfg.Args...)...)
	}
	cmd.Dir = cfg.Dir
	cmd.Env = append(os.Environ(), cfg.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(logf, "=== %s %s %s\n", time.Now().Format(time.RFC3339Nano), cfg.Path, strings.Join(cfg.Args, " "))
	if err := cmd.Start(); err != nil {
		logf.Close()
		if cg != nil {
			_ = cg.Remove()
		}
		return nil, fmt.Errorf("start %s (%s): %w", cfg.Name, cfg.Path, err)
	}
	p := &Process{cfg: cfg, cmd: cmd, logPath: logPath, logFrom: logFrom, done: make(chan struct{}), cgroup: cg}
	liveMu.Lock()
	live[p] = struct{}{}
	liveMu.Unlock()
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		if cg != nil {
			p.lastStats, p.statsErr = cg.Stats()
			if err := cg.Remove(); err != nil && p.statsErr == nil {
				p.statsErr = fmt.Errorf("remove the memory cgroup of %s: %w", cfg.Name, err)
			}
		}
		liveMu.Lock()
		delete(live, p)
		liveMu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// MemoryStats is what the kernel counted in the process's memory cgroup (ProcessConfig's
// MemoryLimit): now while it runs, and as it was at the exit afterwards.
func (p *Process) MemoryStats() (MemoryStats, error) {
	if p.cgroup == nil {
		return MemoryStats{}, fmt.Errorf("%s runs without a memory limit", p.cfg.Name)
	}
	if p.Exited() {
		return p.lastStats, p.statsErr
	}
	return p.cgroup.Stats()
}

// Name is the process's name.
func (p *Process) Name() string { return p.cfg.Name }

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitCode is the exit code after Done (-1 when killed by a signal).
func (p *Process) ExitCode() int {
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return nil
	}
	return p.cmd.Process.Signal(sig)
}

// Wait waits until the process exits or ctx is done, and returns the exit code.
func (p *Process) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode(), nil
	case <-ctx.Done():
		return 0, fmt.Errorf("%s did not exit: %w", p.cfg.Name, ctx.Err())
	}
}

// Stop sends SIGTERM, waits up to grace, then kills the whole process group.
func (p *Process) Stop(grace time.Duration) {
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
	}
}

// Kill kills the process group at once and waits for the process.
func (p *Process) Kill() {
	if !p.Exited() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-p.done
}

// LogPath is the file the process's output goes to.
func (p *Process) LogPath() string { return p.logPath }

// Logs returns this run's output so far (a restarted process appends to the same file).
func (p *Process) Logs() string {
	b, _ := os.ReadFile(p.logPath)
	if int64(len(b)) < p.logFrom {
		return ""
	}
	return string(b[p.logFrom:])
}

// LogTail returns the last n lines of the output.
func (p *Process) LogTail(n int) string {
	lines := strings.Split(strings.TrimRight(p.Logs(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Restart starts the same command again after the process exited.
func (p *Process) Restart() (*Process, error) {
	if !p.Exited() {
		return nil, errors.New(p.cfg.Name + " is still running")
	}
	return StartProcess(p.cfg)
}

// killAll kills every process still running; RunMain calls it.
func killAll() {
	liveMu.Lock()
	ps := make([]*Process, 0, len(live))
	for p := range live {
		ps = append(ps, p)
	}
	liveMu.Unlock()
	for _, p := range ps {
		p.Kill()
	}
}

// WaitLog waits until this run's output contains s, and fails the test when the process
// exits or a minute passes first.
func (p *Process) WaitLog(t testing.TB, s string) {
	t.Helper()
	p.WaitLogSince(t, 0, s)
}

// LogMark is how much this run has written so far: WaitLogSince(mark, s) waits for s written
// after that point.
func (p *Process) LogMark() int { return len(p.Logs()) }

// WaitLogSince is WaitLog for output written after mark (a LogMark).
func (p *Process) WaitLogSince(t testing.TB, mark int, s string) {
	t.Helper()
	Eventually(t, time.Minute, fmt.Sprintf("%s to log %q", p.Name(), s), func() (bool, error) {
		exited := p.Exited() // before reading, so that a line written just before the exit counts
		if logs := p.Logs(); len(logs) >= mark && strings.Contains(logs[mark:], s) {
			return true, nil
		}
		err := fmt.Errorf("last lines:\n%s", p.LogTail(20))
		if exited {
			return false, Permanent(fmt.Errorf("%s exited with code %d; %w", p.Name(), p.ExitCode(), err))
		}
		return false, err
	})
}

// RSS returns a memory figure of the process from /proc (field "VmRSS" for the resident set,
// "VmHWM" for its peak), in KiB; 0 when it cannot be read.
func (p *Process) RSS(field string) float64 { return RSS(p.Pid(), field) }

// RSS returns a /proc/PID/status memory field in KiB.
func RSS(pid int, field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return v
		}
	}
	return 0
}

// CPU returns the CPU time (user and system) the process has used so far; 0 when it
// cannot be read.
func (p *Process) CPU() time.Duration { return CPU(p.Pid()) }

// CPU returns the CPU time (user and system) process pid has used so far, from
// /proc/PID/stat, whose tick is USER_HZ: 100 per second on every Linux ABI.
func CPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; the fields after its closing paren do not.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * (time.Second / 100)
}

// WaitExit waits up to d for the process to exit and returns its exit code; it fails the
// test if the process is still running then.
func (p *Process) WaitExit(t testing.TB, d time.Duration) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	code, err := p.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return code
}
