package testenv

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// TCPProxy forwards connections from a loopback port to a target. Cut closes every open
// connection and refuses new ones until Restore, which stands in for a network partition.
type TCPProxy struct {
	target string
	lis    net.Listener

	mu      sync.Mutex
	cut     bool
	refused int // connections refused while cut
	conns   map[net.Conn]struct{}
}

// NewTCPProxy listens on 127.0.0.1:0 and forwards to target.
func NewTCPProxy(target string) (*TCPProxy, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &TCPProxy{target: target, lis: lis, conns: map[net.Conn]struct{}{}}
	go p.accept()
	return p, nil
}

// Addr is the proxy's address (127.0.0.1:PORT).
func (p *TCPProxy) Addr() string { return p.lis.Addr().String() }

func (p *TCPProxy) accept() {
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.refused++
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		go p.forward(c)
	}
}

func (p *TCPProxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		p.drop(c)
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		up.Close()
		p.drop(c)
		return
	}
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	p.drop(c)
	p.drop(up)
}

func (p *TCPProxy) drop(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// Cut closes every connection and refuses new ones.
func (p *TCPProxy) Cut() {
	p.mu.Lock()
	p.cut = true
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// Refused is the number of connections refused while cut: evidence that a client tried to
// get through the partition.
func (p *TCPProxy) Refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

// WaitRefused waits until a client has been refused since the count was before, or d passed.
func (p *TCPProxy) WaitRefused(before int, d time.Duration) bool {
	return Poll(PollInterval, d, func() (bool, error) { return p.Refused() > before, nil }) == nil
}

// Restore accepts connections again.
func (p *TCPProxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Close stops the proxy.
func (p *TCPProxy) Close() {
	p.lis.Close()
	p.Cut()
}

// ProxiedKubeconfig starts a TCPProxy in front of the apiserver and writes an admin
// kubeconfig that goes through it, so that a test can cut one process off the apiserver.
// The proxy is closed when the test ends.
func (c *Cluster) ProxiedKubeconfig(t testing.TB, name string) (*TCPProxy, string) {
	t.Helper()
	p, err := NewTCPProxy(strings.TrimPrefix(c.Host, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	cfg := c.AdminConfig()
	// The serving certificate names localhost and 127.0.0.1, not the proxy's port.
	cfg.Host, cfg.ServerName = "https://"+p.Addr(), "localhost"
	kc, err := c.WriteKubeconfig(cfg, name+"-"+RandSuffix())
	if err != nil {
		t.Fatal(err)
	}
	return p, kc
}
