package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// MemoryCgroup is a memory cgroup made for one process, standing for a container's memory
// limit: the kernel counts what the process uses and kills it when it cannot reclaim below
// the limit. It is made under the test binary's own memory cgroup, in the v1 memory
// hierarchy or in the unified (v2) one where the memory controller is enabled for children.
type MemoryCgroup struct {
	dir string
	v2  bool
}

// MemoryStats are what the kernel counted for a MemoryCgroup.
type MemoryStats struct {
	// Peak is the most memory charged to the cgroup at once, in bytes (v1
	// memory.max_usage_in_bytes, v2 memory.peak).
	Peak uint64
	// OOMKills is how many of the cgroup's processes the OOM killer killed.
	OOMKills uint64
	// MajorFaults counts the pages its processes had to read back from disk (memory.stat
	// pgmajfault): beyond a start's first reads of its binary, a process short of memory
	// faulting in again the code the kernel reclaimed from it, which slows it down without
	// killing it.
	MajorFaults uint64
}

var cgroupSeq atomic.Int64

// NewMemoryCgroup makes a memory cgroup limited to limit bytes, named after name.
func NewMemoryCgroup(name string, limit uint64) (*MemoryCgroup, error) {
	parent, v2, err := ownMemoryCgroup()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(parent, fmt.Sprintf("sluice-%s-%d-%d", name, os.Getpid(), cgroupSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("memory cgroup for %s: %w", name, err)
	}
	c := &MemoryCgroup{dir: dir, v2: v2}
	file := "memory.limit_in_bytes"
	if v2 {
		file = "memory.max"
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(strconv.FormatUint(limit, 10)), 0o644); err != nil {
		_ = c.Remove()
		if v2 && errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("memory cgroup for %s: the memory controller is not enabled for the children of %s (cgroup.subtree_control)", name, parent)
		}
		return nil, fmt.Errorf("memory cgroup for %s: set its limit: %w", name, err)
	}
	if !v2 {
		// With swap, a v1 cgroup at its limit swaps rather than fails; a container's limit
		// covers both. The file exists only when the kernel accounts swap.
		if err := os.WriteFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), []byte(strconv.FormatUint(limit, 10)), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
			_ = c.Remove()
			return nil, fmt.Errorf("memory cgroup for %s: set its swap limit: %w", name, err)
		}
	}
	return c, nil
}

// Procs is the file a process writes its pid to, to move into the cgroup.
func (c *MemoryCgroup) Procs() string { return filepath.Join(c.dir, "cgroup.procs") }

// Stats reads what the kernel counted.
func (c *MemoryCgroup) Stats() (MemoryStats, error) {
	var s MemoryStats
	stat, err := c.Stat()
	if err != nil {
		return s, err
	}
	s.MajorFaults = stat["pgmajfault"]
	// The same figures under each version's names; both count OOM kills as oom_kill.
	peak, events := "memory.max_usage_in_bytes", "memory.oom_control"
	if c.v2 {
		peak, events = "memory.peak", "memory.events"
	}
	if s.Peak, err = readUint(filepath.Join(c.dir, peak)); err != nil {
		return s, err
	}
	ev, err := readKeyed(filepath.Join(c.dir, events))
	if err != nil {
		return s, err
	}
	s.OOMKills = ev["oom_kill"]
	return s, nil
}

// Stat is the cgroup's memory.stat, by key (v1: rss, cache, mapped_file, ...; v2: anon,
// file, file_mapped, ...): bytes, but for the event counts (pgfault, pgmajfault, ...).
func (c *MemoryCgroup) Stat() (map[string]uint64, error) {
	return readKeyed(filepath.Join(c.dir, "memory.stat"))
}

// Remove kills what still runs in the cgroup (the children of a process the OOM killer
// took) and removes it. The kernel lets a cgroup go only once its last task has exited, a
// moment after the kill: Remove waits for that, up to five seconds.
func (c *MemoryCgroup) Remove() error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(c.Procs())
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		err = os.Remove(c.dir)
		if err == nil || !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond) // polling the kernel's teardown: nothing to wait on
	}
}

// ownMemoryCgroup is the directory of the test binary's own memory cgroup, and whether it is
// in the unified (v2) hierarchy: the v1 memory hierarchy when mounted, else the unified one.
func ownMemoryCgroup() (string, bool, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", false, err
	}
	var v1Path, v2Path string // v2Path is never "" once seen: at least "/"
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		// hierarchy-ID:controllers:path; the unified hierarchy is "0::path".
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case f[0] == "0" && f[1] == "":
			v2Path = f[2]
		case containsField(f[1], "memory"):
			v1Path = f[2]
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", false, err
	}
	var v1Mount, v1Root, v2Mount, v2Root string
	for _, line := range strings.Split(string(mounts), "\n") {
		// ID parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 {
			continue
		}
		switch {
		case qf[0] == "cgroup" && containsField(qf[2], "memory") && v1Mount == "":
			v1Root, v1Mount = pf[3], pf[4]
		case qf[0] == "cgroup2" && v2Mount == "":
			v2Root, v2Mount = pf[3], pf[4]
		}
	}
	switch {
	case v1Path != "" && v1Mount != "":
		return filepath.Join(v1Mount, relativeTo(v1Path, v1Root)), false, nil
	case v2Path != "" && v2Mount != "":
		return filepath.Join(v2Mount, relativeTo(v2Path, v2Root)), true, nil
	}
	return "", false, errors.New("no memory cgroup hierarchy is mounted (/proc/self/mountinfo)")
}

// relativeTo is a cgroup path as seen from a mount of the hierarchy at root.
func relativeTo(path, root string) string {
	if root == "/" {
		return path
	}
	if rel, ok := strings.CutPrefix(path, root); ok {
		return rel
	}
	return path
}

func containsField(list, want string) bool {
	for _, f := range strings.Split(list, ",") {
		if f == want {
			return true
		}
	}
	return false
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// readKeyed reads a file of "key value" lines (memory.events, memory.oom_control).
func readKeyed(path string) (map[string]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, sc.Err()
}
