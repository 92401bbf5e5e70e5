package podrunner

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probeClient is the runner's HTTP client for probes: like a kubelet's, it does not verify
// certificates and does not follow redirects to other hosts.
var probeClient = &http.Client{
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}, //nolint:gosec // as a kubelet's probes
	CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) > 0 && req.URL.Host != via[0].URL.Host {
			return http.ErrUseLastResponse
		}
		return nil
	},
}

func port(p intstr.IntOrString, named map[string]int32) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	if n, ok := named[p.StrVal]; ok {
		return int(n), nil
	}
	return 0, fmt.Errorf("no container port named %q", p.StrVal)
}

// probeOnce runs one probe against the Pod's IP from this host, as a kubelet does from its
// node: HTTP GET (2xx and 3xx succeed) or a TCP connect.
func probeOnce(ctx context.Context, p *corev1.Probe, podIP string, named map[string]int32) error {
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case p.HTTPGet != nil:
		g := p.HTTPGet
		n, err := port(g.Port, named)
		if err != nil {
			return err
		}
		host := g.Host
		if host == "" {
			host = podIP
		}
		scheme := "http"
		if g.Scheme == corev1.URISchemeHTTPS {
			scheme = "https"
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+net.JoinHostPort(host, strconv.Itoa(n))+g.Path, nil)
		if err != nil {
			return err
		}
		req.Header.Set("User-Agent", "kube-probe/sluice-podrunner")
		for _, h := range g.HTTPHeaders {
			if h.Name == "Host" {
				req.Host = h.Value
				continue
			}
			req.Header.Add(h.Name, h.Value)
		}
		resp, err := probeClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
		}
		return nil
	case p.TCPSocket != nil:
		n, err := port(p.TCPSocket.Port, named)
		if err != nil {
			return err
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = podIP
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(n)))
		if err != nil {
			return err
		}
		return conn.Close()
	default:
		return fmt.Errorf("only httpGet and tcpSocket probes are supported by the pod runner")
	}
}

// prober counts a probe's results against its thresholds.
type prober struct {
	success, failure int32 // thresholds
	ok               bool  // the current result
	streak           int32 // consecutive results that differ from ok
}

func newProber(p *corev1.Probe, initial bool) *prober {
	pr := &prober{success: p.SuccessThreshold, failure: p.FailureThreshold, ok: initial}
	if pr.success < 1 {
		pr.success = 1
	}
	if pr.failure < 1 {
		pr.failure = 3
	}
	return pr
}

// observe records one result and returns the probe's current outcome.
func (pr *prober) observe(passed bool) bool {
	if passed == pr.ok {
		pr.streak = 0
		return pr.ok
	}
	pr.streak++
	need := pr.failure
	if passed {
		need = pr.success
	}
	if pr.streak >= need {
		pr.ok, pr.streak = passed, 0
	}
	return pr.ok
}

func period(p *corev1.Probe) time.Duration {
	if p.PeriodSeconds <= 0 {
		return 10 * time.Second
	}
	return time.Duration(p.PeriodSeconds) * time.Second
}
