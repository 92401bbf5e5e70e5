// Package backend is what Sluice's test and demo backends answer: an HTTP handler that says who
// answered and what it was asked, served in-process by the test helpers' backends and, as
// cmd/backend, by the compose setup and the Pods of the cluster in a box.
package backend

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Answer is the JSON body a backend answers with.
type Answer struct {
	Backend string `json:"backend"`
	// Pod is the answering Pod's name, when a Pod answers.
	Pod  string `json:"pod,omitempty"`
	Host string `json:"host"`
	Path string `json:"path"`
	TLS  bool   `json:"tls"`
	// Client is the Common Name of the client certificate the caller presented, if any.
	Client string `json:"client,omitempty"`
	// Method and Header are the request's, so that tests see what a proxy forwarded.
	Method string      `json:"method,omitempty"`
	Header http.Header `json:"header,omitempty"`
}

// StatusOf is the status Handler answers a request for path with: NNN for /status/NNN or
// /status/NNN/anything (200 to 599), 200 otherwise. Tests that stand in for a proxy's calls to a backend (an
// authentication service) answer by it too.
func StatusOf(path string) int {
	path, _, _ = strings.Cut(path, "?")
	if rest, ok := strings.CutPrefix(path, "/status/"); ok {
		rest, _, _ = strings.Cut(rest, "/")
		if n, err := strconv.Atoi(rest); err == nil && n >= 200 && n <= 599 {
			return n
		}
	}
	return http.StatusOK
}

// Handler answers as backend name (and pod, when not empty). A request for /status/NNN is
// answered with status NNN, so that a readiness probe or a test can ask for a failure; one
// for /delay/D (a Go duration, at most a minute) is answered after D, so that a test can ask
// for a slow endpoint.
func Handler(name, pod string, count func()) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if count != nil {
			count()
		}
		code := http.StatusOK
		if rest, ok := strings.CutPrefix(r.URL.Path, "/delay/"); ok {
			if d, err := time.ParseDuration(rest); err == nil && d > 0 && d <= time.Minute {
				select {
				case <-time.After(d):
				case <-r.Context().Done():
					return
				}
			}
		}
		code = StatusOf(r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Sluice-Backend", name)
		w.WriteHeader(code)
		a := Answer{Backend: name, Pod: pod, Host: r.Host, Path: r.URL.Path, TLS: r.TLS != nil, Method: r.Method, Header: r.Header}
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			a.Client = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		_ = json.NewEncoder(w).Encode(a)
	})
}
