package testenv

import (
	"github.com/sluice-io/sluice/internal/backend"
	"github.com/sluice-io/sluice/internal/harness/hostnet"
	"github.com/sluice-io/sluice/internal/pki"

	"context"
	"crypto/tls"
	"crypto/x509"
	_ "embed" // the upstream CA
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Net is a network namespace joined to this host by a veth pair, for test backends: the
// apiserver refuses EndpointSlice addresses in 127.0.0.0/8 and 169.254.0.0/16, so backends
// listen on private addresses (10.251.N.0/24) that exist only on this machine. The host side
// is 10.251.N.1; backends get 10.251.N.2 and up, inside the namespace.
type Net struct {
	Name   string
	HostIP string

	prefix string
	index  int // N of 10.251.N.0/24, also in the veth names
	mu     sync.Mutex
	next   int
	closed bool
	srvs   []*Backend
}

const netPrefix = "10.251."

// NewNet makes a network namespace with a veth pair. It needs root (CAP_NET_ADMIN) and
// iproute2's ip; without them it says so.
func NewNet() (*Net, error) {
	if err := hostnet.Check("testenv: test backends"); err != nil {
		return nil, err
	}
	unlock, err := hostnet.Lock("/tmp/sluice-testenv-netns.lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	sweepStaleNets()
	used, err := usedSubnets()
	if err != nil {
		return nil, err
	}
	for n := 1; n < 255; n++ {
		if used[n] {
			continue
		}
		net := &Net{Name: fmt.Sprintf("sluice-%d-%d", os.Getpid(), n), prefix: fmt.Sprintf("%s%d.", netPrefix, n), index: n, next: 2}
		net.HostIP = net.prefix + "1"
		if err := net.create(); err != nil {
			net.destroy()
			return nil, err
		}
		registerCleanup(net.Close)
		return net, nil
	}
	return nil, errors.New("testenv: no free 10.251.N.0/24 subnet for a test network namespace")
}

func (n *Net) create() error {
	host, peer := fmt.Sprintf("slc%dh", n.index), fmt.Sprintf("slc%dn", n.index)
	steps := [][]string{
		{"netns", "add", n.Name},
		{"link", "add", host, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", n.Name},
		{"addr", "add", n.HostIP + "/24", "dev", host},
		{"link", "set", host, "up"},
		{"-n", n.Name, "link", "set", "lo", "up"},
		{"-n", n.Name, "link", "set", peer, "up"},
	}
	if err := hostnet.IP(steps...); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	return nil
}

// NewAddress adds the next address to the namespace's side of the veth and returns it.
func (n *Net) NewAddress() (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.next > 254 {
		return "", errors.New("testenv: namespace has no free address left")
	}
	addr := n.prefix + strconv.Itoa(n.next)
	n.next++
	if out, err := exec.Command("ip", "-n", n.Name, "addr", "add", addr+"/24", "dev", fmt.Sprintf("slc%dn", n.index)).CombinedOutput(); err != nil {
		return "", fmt.Errorf("testenv: add address %s: %v: %s", addr, err, out)
	}
	return addr, nil
}

// Listen opens a TCP listener inside the namespace. The socket stays in the namespace it was
// made in, so the rest of the process can serve on it as usual.
func (n *Net) Listen(addr string) (net.Listener, error) {
	runtime.LockOSThread()
	orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer orig.Close()
	target, err := os.Open("/var/run/netns/" + n.Name)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("testenv: enter namespace %s: %w", n.Name, err)
	}
	lis, lerr := net.Listen("tcp", addr)
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread is stuck in the namespace: leave it locked so that it dies with this
		// goroutine instead of running other goroutines there.
		if lis != nil {
			lis.Close()
		}
		return nil, fmt.Errorf("testenv: leave namespace %s: %w", n.Name, err)
	}
	runtime.UnlockOSThread()
	return lis, lerr
}

// Backend is an HTTP (or HTTPS) server in a Net that answers every request with its name.
type Backend struct {
	Name    string
	Address string // IP inside the namespace
	Port    int
	TLS     bool

	srv      *http.Server
	requests atomic.Int64
}

// BackendAnswer is the JSON body a backend answers with.
type BackendAnswer = backend.Answer

// StartBackend starts an HTTP backend named name on a new address, port 8080.
func (n *Net) StartBackend(name string) (*Backend, error) { return n.startBackend(name, false) }

// StartTLSBackend starts an HTTPS backend named name on a new address, port 8443. Its
// certificate is issued by UpstreamCA for its address and the names UpstreamNames; a client
// certificate is checked against UpstreamCA when one is presented.
func (n *Net) StartTLSBackend(name string) (*Backend, error) {
	return n.startBackend(name, true, tls.VerifyClientCertIfGiven)
}

// StartMTLSBackend starts an HTTPS backend as StartTLSBackend does that refuses a client
// without a certificate UpstreamCA issued.
func (n *Net) StartMTLSBackend(name string) (*Backend, error) {
	return n.startBackend(name, true, tls.RequireAndVerifyClientCert)
}

// UpstreamCA is the test CA that issues the TLS backends' certificates (StartTLSBackend):
// fixed, so that golden files can trust it (a Secret's ca.crt) and hold a client certificate
// it issued. Its key is test material only.
func UpstreamCA() (*pki.CA, error) { return pki.LoadCA(upstreamCACert, upstreamCAKey) }

//go:embed testdata/upstream-ca.crt
var upstreamCACert []byte

//go:embed testdata/upstream-ca.key
var upstreamCAKey []byte

// UpstreamNames are the DNS names of a TLS backend's certificate: NAME.backend.test, and
// the DNS name of a Service named as the backend in the namespace app (the goldens').
func UpstreamNames(name string) []string { return []string{name + ".backend.test", name + ".app.svc"} }

func (n *Net) startBackend(name string, useTLS bool, clientAuth ...tls.ClientAuthType) (*Backend, error) {
	addr, err := n.NewAddress()
	if err != nil {
		return nil, err
	}
	port := 8080
	if useTLS {
		port = 8443
	}
	lis, err := n.Listen(net.JoinHostPort(addr, strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	b := &Backend{Name: name, Address: addr, Port: port, TLS: useTLS}
	b.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: backend.Handler(name, "", func() { b.requests.Add(1) })}
	// HTTP/1.1 and HTTP/2 with prior knowledge over cleartext too, as a Service port with
	// appProtocol kubernetes.io/h2c speaks: a golden case's h2c backend is one of these.
	b.srv.Protocols = new(http.Protocols)
	b.srv.Protocols.SetHTTP1(true)
	b.srv.Protocols.SetHTTP2(true)
	b.srv.Protocols.SetUnencryptedHTTP2(true)
	if useTLS {
		cfg, err := upstreamServerTLS(name, addr, clientAuth[0])
		if err != nil {
			lis.Close()
			return nil, err
		}
		lis = tls.NewListener(lis, cfg)
	}
	go func() { _ = b.srv.Serve(lis) }()
	n.mu.Lock()
	n.srvs = append(n.srvs, b)
	n.mu.Unlock()
	return b, nil
}

// upstreamServerTLS is a TLS backend's server config: a certificate UpstreamCA issues for
// addr and UpstreamNames(name), client certificates checked as auth says.
func upstreamServerTLS(name, addr string, auth tls.ClientAuthType) (*tls.Config, error) {
	ca, err := UpstreamCA()
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := ca.Issue(pki.CertOptions{CommonName: name, DNSNames: UpstreamNames(name), IPs: []net.IP{net.ParseIP(addr)}, Server: true})
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: auth, ClientCAs: pool}, nil
}

// URL is the backend's base URL, reachable from the host.
func (b *Backend) URL() string {
	scheme := "http"
	if b.TLS {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s", scheme, net.JoinHostPort(b.Address, strconv.Itoa(b.Port)))
}

// Requests is the number of requests the backend answered.
func (b *Backend) Requests() int64 { return b.requests.Load() }

// Stop stops the backend.
func (b *Backend) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = b.srv.Shutdown(ctx)
}

// Close stops the backends and removes the namespace and its veth pair.
func (n *Net) Close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	srvs := n.srvs
	n.mu.Unlock()
	for _, b := range srvs {
		b.Stop()
	}
	n.destroy()
}

// destroy deletes the namespace; its veth end goes with it, and the host end with its peer.
func (n *Net) destroy() { _ = exec.Command("ip", "netns", "del", n.Name).Run() }

var netNameRE = regexp.MustCompile(`^sluice-(\d+)-(\d+)`)

// sweepStaleNets deletes namespaces left by test processes that died without cleaning up.
func sweepStaleNets() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		m := netNameRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		if !hostnet.Alive(pid) {
			_ = exec.Command("ip", "netns", "del", strings.Fields(line)[0]).Run()
		}
	}
}

// usedSubnets returns the N of every 10.251.N.0/24 this host already uses.
func usedSubnets() (map[int]bool, error) {
	used := map[int]bool{}
	out, err := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("testenv: ip addr show: %w", err)
	}
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, netPrefix) {
			if n, err := strconv.Atoi(strings.Split(f, ".")[2]); err == nil {
				used[n] = true
			}
		}
	}
	out, _ = exec.Command("ip", "netns", "list").Output()
	for _, m := range netNameRE.FindAllStringSubmatch(string(out), -1) {
		n, _ := strconv.Atoi(m[2])
		used[n] = true
	}
	out, _ = exec.Command("ip", "-o", "link", "show").Output()
	for _, m := range regexp.MustCompile(`slc(\d+)[hn]`).FindAllStringSubmatch(string(out), -1) {
		n, _ := strconv.Atoi(m[1])
		used[n] = true
	}
	return used, nil
}

var sharedNet struct {
	sync.Mutex
	net *Net
	err error
}

// SharedNet returns the test package's network namespace, making it on first use. A failure
// fails the test with the reason (never a silent pass).
func SharedNet(t testing.TB) *Net {
	t.Helper()
	sharedNet.Lock()
	defer sharedNet.Unlock()
	if sharedNet.net == nil && sharedNet.err == nil {
		sharedNet.net, sharedNet.err = NewNet()
	}
	if sharedNet.err != nil {
		t.Fatalf("%v", sharedNet.err)
	}
	return sharedNet.net
}
