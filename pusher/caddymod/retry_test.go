package caddymod

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// retriedConfig routes a.example.com/ to backend web (h2c when h2c is set) with the retry
// policy given and the route's timeout.
func retriedConfig(retry *configv1.Retry, timeout time.Duration, h2c bool) *configv1.Config {
	rt := &configv1.Route{Name: "r", Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"},
		Backends: []*configv1.WeightedBackend{{Backend: "web", Weight: 1}}, Retry: retry,
		ResponseHeaders: &configv1.HeaderModifier{Set: []*configv1.HeaderValue{{Name: "X-Route", Value: "r"}}}}
	if timeout > 0 {
		rt.Timeout = durationpb.New(timeout)
	}
	be := &configv1.Backend{Name: "web", Endpoints: []*configv1.Endpoint{{Address: "192.0.2.1", Port: 80, Ready: true}}}
	if h2c {
		be.Protocol = configv1.BackendProtocol_BACKEND_PROTOCOL_H2C
	}
	res := &configv1.Resources{
		VirtualHosts: []*configv1.VirtualHost{{Hostname: "a.example.com", Routes: []*configv1.Route{rt}}},
		Backends:     []*configv1.Backend{be},
	}
	return &configv1.Config{Epoch: "e", Version: 1, Hash: contract.Hash(res), Resources: res}
}

// try is what the stand-in for reverse_proxy saw of one try.
type try struct {
	body     string
	protocol any
}

// serveTries sends a POST with body (of unknown length when chunked) through the Router;
// the next handler answers the tries with statuses in turn (the last one again when more
// come; a negative status returns Caddy's error of that status without answering, as
// reverse_proxy does when it cannot reach the backend), each with a header and body naming
// the try.
func serveTries(t *testing.T, body string, chunked bool, statuses ...int) (*httptest.ResponseRecorder, []try) {
	t.Helper()
	var rd io.Reader = strings.NewReader(body)
	if chunked {
		rd = io.MultiReader(rd) // not a type httptest knows the length of
	}
	r := httptest.NewRequest(http.MethodPost, "http://a.example.com/x", rd)
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
	w := httptest.NewRecorder()
	var tries []try
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return err
		}
		tries = append(tries, try{string(b), caddyhttp.GetVar(r.Context(), protocolVar)})
		status := statuses[min(len(tries), len(statuses))-1]
		if status < 0 {
			return caddyhttp.Error(-status, errors.New("no answer"))
		}
		n := strconv.Itoa(len(tries))
		w.Header().Set("X-Try", n)
		w.WriteHeader(status)
		_, err = io.WriteString(w, "try "+n)
		return err
	})
	if err := (&Router{}).ServeHTTP(w, r, next); err != nil {
		var he caddyhttp.HandlerError
		if !errors.As(err, &he) {
			t.Fatal(err)
		}
		w.Code = he.StatusCode // what Caddy answers
	}
	return w, tries
}

// A try answered with a code the route retries is held back while tries remain; the client
// gets the answer of the try that is not tried again (header, status, body, with the
// route's response header modifier), exactly as contract.RetriedAnswer says, and every try
// gets the whole body.
func TestRetriesFollowTheReference(t *testing.T) {
	for _, c := range []struct {
		name     string
		retry    *configv1.Retry
		statuses []int
	}{
		{"succeeds after 2 retries of 3", &configv1.Retry{Codes: []uint32{500}, Attempts: 3}, []int{500, 500, 200}},
		{"3 retries are not enough", &configv1.Retry{Codes: []uint32{500}, Attempts: 3}, []int{500, 500, 500, 500, 200}},
		{"a code not retried", &configv1.Retry{Codes: []uint32{500}, Attempts: 3}, []int{503, 200}},
		{"the last try's answer, whatever it is", &configv1.Retry{Codes: []uint32{500, 502, 503, 504}, Attempts: 2}, []int{502, 503, 504, 200}},
		{"no answer counts as Caddy's status", &configv1.Retry{Codes: []uint32{502}, Attempts: 2}, []int{-502, 200}},
		{"no answer on the last try", &configv1.Retry{Codes: []uint32{502}, Attempts: 1}, []int{-502, -502, 200}},
		{"no policy", nil, []int{500, 200}},
	} {
		t.Run(c.name, func(t *testing.T) {
			useConfig(t, retriedConfig(c.retry, 0, false), 4)
			w, tries := serveTries(t, "hello", false, c.statuses...)
			var statuses []int
			for _, s := range c.statuses {
				statuses = append(statuses, max(s, -s))
			}
			wantStatus, wantTries := contract.RetriedAnswer(&configv1.Route{Retry: c.retry}, statuses)
			if w.Code != wantStatus || len(tries) != wantTries {
				t.Fatalf("%d after %d tries, want %d after %d", w.Code, len(tries), wantStatus, wantTries)
			}
			for i, tr := range tries {
				if tr.body != "hello" {
					t.Errorf("try %d got body %q, want the whole body", i+1, tr.body)
				}
			}
			if c.statuses[wantTries-1] < 0 {
				return // Caddy answers the error
			}
			n := strconv.Itoa(wantTries)
			if w.Header().Get("X-Try") != n || w.Body.String() != "try "+n || w.Header().Get("X-Route") != "r" {
				t.Errorf("answer %v %q, want only try %s's, with the route's header", w.Header(), w.Body.String(), n)
			}
		})
	}
}

// A body the router cannot hold (over contract.MaxRetryBodyBytes, or of unknown length) is
// sent once: the first try's answer is the client's.
func TestABodyTooLargeToHoldIsTriedOnce(t *testing.T) {
	useConfig(t, retriedConfig(&configv1.Retry{Codes: []uint32{500}, Attempts: 3}, 0, false), 4)
	for name, c := range map[string]struct {
		body    string
		chunked bool
	}{
		"large":   {strings.Repeat("x", contract.MaxRetryBodyBytes+1), false},
		"chunked": {"small", true},
	} {
		w, tries := serveTries(t, c.body, c.chunked, 500, 200)
		if w.Code != http.StatusInternalServerError || len(tries) != 1 || tries[0].body != c.body {
			t.Errorf("%s: %d after %d tries, want the first try's 500 with the whole body", name, w.Code, len(tries))
		}
	}
}

// Tries wait the backoff between them, and the route's timeout bounds them all: when it
// runs out during a backoff, Caddy answers 504 and the try held back is never seen.
func TestRetryBackoffAndTheRoutesTimeout(t *testing.T) {
	useConfig(t, retriedConfig(&configv1.Retry{Codes: []uint32{503}, Attempts: 2, Backoff: durationpb.New(100 * time.Millisecond)}, 0, false), 4)
	start := time.Now()
	w, tries := serveTries(t, "", false, 503, 503, 200)
	if took := time.Since(start); w.Code != http.StatusOK || len(tries) != 3 || took < 200*time.Millisecond {
		t.Errorf("%d after %d tries in %s, want 200 after 3 tries and two backoffs of 100ms", w.Code, len(tries), took)
	}
	useConfig(t, retriedConfig(&configv1.Retry{Codes: []uint32{503}, Attempts: 2, Backoff: durationpb.New(time.Second)}, 150*time.Millisecond, false), 4)
	w, tries = serveTries(t, "", false, 503, 200)
	if w.Code != http.StatusGatewayTimeout || len(tries) != 1 || w.Body.Len() != 0 {
		t.Errorf("%d %q after %d tries, want Caddy's 504 after the first try", w.Code, w.Body.String(), len(tries))
	}
}

// The router tells Caddy's config which reverse_proxy speaks the picked backend's protocol:
// h2c for a backend whose Service port says kubernetes.io/h2c, nothing otherwise.
func TestRouterNamesTheBackendsProtocol(t *testing.T) {
	for _, h2c := range []bool{false, true} {
		useConfig(t, retriedConfig(nil, 0, h2c), 4)
		_, tries := serveTries(t, "", false, 200)
		want := map[bool]string{false: "", true: protocolH2C}[h2c]
		if len(tries) != 1 || tries[0].protocol != want {
			t.Errorf("h2c %v: %s is %v, want %q", h2c, protocolVar, tries[0].protocol, want)
		}
	}
}
