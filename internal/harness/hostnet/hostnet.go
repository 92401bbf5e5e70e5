// Package hostnet holds what the harness's network set-ups share (the test backends' namespace
// in testenv, the Pods' bridge and namespaces in podrunner): the check that they can be made,
// iproute2 commands, a lock between test processes, and whether a process that left
// namespaces behind still lives.
package hostnet

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Check says why network namespaces cannot be made here, naming what needs them: they need
// root (CAP_NET_ADMIN) and iproute2's ip.
func Check(what string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s need network namespaces, which need root (CAP_NET_ADMIN); run as root", what)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%s need iproute2's 'ip' command (apt-get install iproute2)", what)
	}
	return nil
}

// IP runs ip with each step's arguments in turn and stops at the first failure, with ip's
// own words.
func IP(steps ...[]string) error {
	for _, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(s, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// Lock takes an exclusive lock on path, shared by every test process of this machine, and
// returns its release.
func Lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}

// Alive reports whether process pid exists (what it left behind is not stale yet).
func Alive(pid int) bool { return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }
