package podrunner

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/sluice-io/sluice/internal/harness/hostnet"
)

// Network is the Pods' network: a bridge on this host holding 10.252.N.1/24 (the Node's
// address), and per Pod a network namespace joined to the bridge by a veth pair, with the
// next free address of the subnet. The apiserver refuses loopback endpoint addresses, and
// Pods of one Deployment all listen on the same port, so each needs an address of its own.
type Network struct {
	// HostIP is the bridge's address, the Node's InternalIP and every Pod's hostIP.
	HostIP string

	index  int
	bridge string
	prefix string

	mu     sync.Mutex
	next   int            // the next host part to try; addresses are handed out round-robin
	inUse  map[int]string // host part -> namespace
	closed bool
}

// netPrefix is 10.252.N.0/24; the test backends' single namespaces use 10.251.N.0/24.
const netPrefix = "10.252."

// NewNetwork makes the bridge. It needs root (CAP_NET_ADMIN) and iproute2's ip.
func NewNetwork() (*Network, error) {
	if err := hostnet.Check("podrunner: Pods"); err != nil {
		return nil, err
	}
	unlock, err := hostnet.Lock("/tmp/sluice-podrunner-net.lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	sweepStale()
	used := usedSubnets()
	for n := 1; n < 255; n++ {
		if used[n] {
			continue
		}
		nw := &Network{index: n, bridge: fmt.Sprintf("slcb%d-%d", n, os.Getpid()), prefix: fmt.Sprintf("%s%d.", netPrefix, n), next: 2, inUse: map[int]string{}}
		nw.HostIP = nw.prefix + "1"
		steps := [][]string{
			{"link", "add", nw.bridge, "type", "bridge"},
			{"addr", "add", nw.HostIP + "/24", "dev", nw.bridge},
			{"link", "set", nw.bridge, "up"},
		}
		if err := hostnet.IP(steps...); err != nil {
			_ = exec.Command("ip", "link", "del", nw.bridge).Run()
			return nil, err
		}
		return nw, nil
	}
	return nil, errors.New("podrunner: no free 10.252.N.0/24 subnet for the Pod network")
}

// sandbox is one Pod's network namespace.
type sandbox struct {
	ns   string // network namespace name, under /var/run/netns
	ip   string
	host int
}

// add makes a Pod's namespace and gives it the next free address.
func (nw *Network) add() (*sandbox, error) {
	nw.mu.Lock()
	if nw.closed {
		nw.mu.Unlock()
		return nil, errors.New("podrunner: the Pod network is closed")
	}
	host := 0
	for i := 0; i < 253; i++ {
		h := 2 + (nw.next-2+i)%253
		if _, taken := nw.inUse[h]; !taken {
			host = h
			break
		}
	}
	if host == 0 {
		nw.mu.Unlock()
		return nil, errors.New("podrunner: the Pod network has no free address (253 Pods run)")
	}
	nw.next = host + 1
	sb := &sandbox{ns: fmt.Sprintf("slcpod-%d-%d-%d", os.Getpid(), nw.index, host), ip: nw.prefix + strconv.Itoa(host), host: host}
	nw.inUse[host] = sb.ns
	nw.mu.Unlock()

	hostEnd, podEnd := fmt.Sprintf("slcp%dh%d", nw.index, host), fmt.Sprintf("slcp%dn%d", nw.index, host)
	steps := [][]string{
		{"netns", "add", sb.ns},
		{"link", "add", hostEnd, "type", "veth", "peer", "name", podEnd},
		{"link", "set", hostEnd, "master", nw.bridge},
		{"link", "set", hostEnd, "up"},
		{"link", "set", podEnd, "netns", sb.ns},
		{"-n", sb.ns, "link", "set", podEnd, "name", "eth0"},
		{"-n", sb.ns, "addr", "add", sb.ip + "/24", "dev", "eth0"},
		{"-n", sb.ns, "link", "set", "lo", "up"},
		{"-n", sb.ns, "link", "set", "eth0", "up"},
		{"-n", sb.ns, "route", "add", "default", "via", nw.HostIP},
	}
	if err := hostnet.IP(steps...); err != nil {
		nw.remove(sb)
		return nil, err
	}
	return sb, nil
}

// remove deletes a Pod's namespace (its veth pair goes with it) and frees its address.
func (nw *Network) remove(sb *sandbox) {
	_ = exec.Command("ip", "netns", "del", sb.ns).Run()
	nw.mu.Lock()
	delete(nw.inUse, sb.host)
	nw.mu.Unlock()
}

// Close removes every Pod namespace left and the bridge.
func (nw *Network) Close() {
	nw.mu.Lock()
	if nw.closed {
		nw.mu.Unlock()
		return
	}
	nw.closed = true
	left := make([]string, 0, len(nw.inUse))
	for _, ns := range nw.inUse {
		left = append(left, ns)
	}
	nw.mu.Unlock()
	for _, ns := range left {
		_ = exec.Command("ip", "netns", "del", ns).Run()
	}
	_ = exec.Command("ip", "link", "del", nw.bridge).Run()
}

var (
	staleNetnsRE  = regexp.MustCompile(`^slcpod-(\d+)-(\d+)-\d+`)
	staleBridgeRE = regexp.MustCompile(`slcb(\d+)-(\d+)`)
)

// sweepStale deletes Pod namespaces and bridges left by processes that died without
// cleaning up (a killed test binary).
func sweepStale() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if m := staleNetnsRE.FindStringSubmatch(line); m != nil && !alive(m[1]) {
			_ = exec.Command("ip", "netns", "del", strings.Fields(line)[0]).Run()
		}
	}
	out, _ = exec.Command("ip", "-o", "link", "show", "type", "bridge").Output()
	for _, m := range staleBridgeRE.FindAllStringSubmatch(string(out), -1) {
		// "slcb" + N (at most 3 digits) + "-" + pid (at most 7) fits the 15 bytes of a link name.
		if !alive(m[2]) {
			_ = exec.Command("ip", "link", "del", m[0]).Run()
		}
	}
}

func alive(pid string) bool {
	p, err := strconv.Atoi(pid)
	return err == nil && hostnet.Alive(p)
}

// usedSubnets returns the N of every 10.252.N.0/24 this host already uses.
func usedSubnets() map[int]bool {
	used := map[int]bool{}
	out, _ := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, netPrefix) {
			if n, err := strconv.Atoi(strings.Split(f, ".")[2]); err == nil {
				used[n] = true
			}
		}
	}
	out, _ = exec.Command("ip", "-o", "link", "show").Output()
	for _, m := range staleBridgeRE.FindAllStringSubmatch(string(out), -1) {
		n, _ := strconv.Atoi(m[1])
		used[n] = true
	}
	return used
}
