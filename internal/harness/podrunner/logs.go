package podrunner

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-io/sluice/internal/pki"
)

// serveLogs serves the kubelet's containerLogs endpoint on the Node's address, so that the
// apiserver's pods/log (kubectl logs, the conformance suite reading a backend's output) reaches
// what the runner's containers wrote. The apiserver dials the Node's InternalIP and the port in
// its status.daemonEndpoints; with no kubelet certificate authority configured it does not
// verify the serving certificate, which is self-signed here.
func (r *Runner) serveLogs(ctx context.Context) (int32, error) {
	certPEM, keyPEM, err := pki.SelfSigned(r.cfg.Node, r.cfg.Network.HostIP)
	if err != nil {
		return 0, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return 0, err
	}
	lis, err := net.Listen("tcp", net.JoinHostPort(r.cfg.Network.HostIP, "0"))
	if err != nil {
		return 0, fmt.Errorf("podrunner: listen for pods/log on %s: %w", r.cfg.Network.HostIP, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", r.containerLogs)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() { _ = srv.Serve(tls.NewListener(lis, &tls.Config{Certificates: []tls.Certificate{cert}})) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return int32(lis.Addr().(*net.TCPAddr).Port), nil
}

// containerLogs answers as a kubelet does: the container's output, its last tailLines lines,
// at most limitBytes, and with follow the lines written after, until the Pod stops or the
// caller goes away.
func (r *Runner) containerLogs(w http.ResponseWriter, req *http.Request) {
	ns, pod, container := req.PathValue("namespace"), req.PathValue("pod"), req.PathValue("container")
	r.mu.Lock()
	st := r.state[ns+"/"+pod]
	r.mu.Unlock()
	if st == nil {
		http.Error(w, fmt.Sprintf("pod %s/%s does not run on node %s", ns, pod, r.cfg.Node), http.StatusNotFound)
		return
	}
	f, err := os.Open(st.logPath(container))
	if errors.Is(err, os.ErrNotExist) {
		http.Error(w, fmt.Sprintf("container %q in pod %s/%s has not started", container, ns, pod), http.StatusBadRequest)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer f.Close()
	q := req.URL.Query()
	var out io.Writer = w
	if n, err := strconv.ParseInt(q.Get("limitBytes"), 10, 64); err == nil && n > 0 {
		out = &limitWriter{w: w, left: n}
	}
	w.Header().Set("Content-Type", "text/plain")
	if n, err := strconv.Atoi(q.Get("tailLines")); err == nil && n >= 0 {
		lines, err := lastLines(f, n)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(out, lines)
	} else if _, err := io.Copy(out, f); err != nil {
		return
	}
	if q.Get("follow") != "true" {
		return
	}
	flusher, _ := w.(http.Flusher)
	stop := st.stopping()
	for {
		if flusher != nil {
			flusher.Flush()
		}
		select {
		case <-req.Context().Done():
			return
		case <-stop:
			_, _ = io.Copy(out, f)
			return
		case <-time.After(100 * time.Millisecond):
		}
		if _, err := io.Copy(out, f); err != nil {
			return
		}
	}
}

// lastLines returns the last n lines of f and leaves f at its end.
func lastLines(f *os.File, n int) (string, error) {
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	if len(lines) == 0 {
		return "", nil
	}
	return strings.Join(lines, "\n") + "\n", nil
}

// limitWriter writes at most left bytes and then refuses.
type limitWriter struct {
	w    io.Writer
	left int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.w.Write(p)
	l.left -= int64(n)
	return n, err
}
