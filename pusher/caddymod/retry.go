package caddymod

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// A route's retries (the Gateway API's HTTPRouteRetry; contract.RetryAgain says when). The
// request is handed to reverse_proxy once per try, with its body from a copy held for the
// purpose (at most contract.MaxRetryBodyBytes); a try whose answer is to be tried again is
// held back whole (its header and body discarded, never written to the client), so the
// client only ever sees the last try's answer. That answer is streamed as any other.

// retryable reads r's body for the tries when it may be sent again: no body, or one of known
// length up to contract.MaxRetryBodyBytes. A request whose body is larger or of unknown
// length (chunked), or that upgrades its connection (a WebSocket), is tried once.
func retryable(r *http.Request) ([]byte, bool) {
	if r.Header.Get("Upgrade") != "" || strings.EqualFold(r.Header.Get("Connection"), "upgrade") {
		return nil, false
	}
	return copyBody(r, contract.MaxRetryBodyBytes)
}

// retry hands r to next (reverse_proxy) once per try: the first to b (the route's entry
// wb), each further one, after the route's backoff, to a backend picked anew (the route's
// invalid share or no ready backend then answer 500 or 503, as for a first pick). Only the
// try that is not tried again reaches w.
func retry(t *Table, rt *route, req contract.Request, b *backend, wb *configv1.WeightedBackend, body []byte, w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	for tries := 1; ; tries++ {
		if body != nil {
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		forward(rt, req, b, wb, r)
		tw := &tryWriter{w: w, rt: rt.rt, tries: tries, header: http.Header{}}
		err := next.ServeHTTP(tw, r)
		if !tw.held {
			if tw.passed || err == nil {
				return err
			}
			// reverse_proxy answered nothing and returned the error Caddy answers with:
			// the answer of this try is its status.
			var he caddyhttp.HandlerError
			if !errors.As(err, &he) || !contract.RetryAgain(rt.rt, tries, he.StatusCode) {
				return err
			}
		}
		if err := r.Context().Err(); err != nil {
			return caddyhttp.Error(statusOfDone(err), err)
		}
		if d := contract.RetryBackoff(rt.rt); d > 0 {
			timer := time.NewTimer(d)
			select {
			case <-timer.C:
			case <-r.Context().Done():
				timer.Stop()
				// The route's timeout ran out (or the client went) between two tries: the
				// answer held back is gone, so Caddy answers as for a timeout.
				return caddyhttp.Error(statusOfDone(r.Context().Err()), r.Context().Err())
			}
		}
		var invalid bool
		b, wb, invalid = t.pick(rt)
		if invalid {
			return plain(w, http.StatusInternalServerError, "invalid backend reference\n")
		}
		if b == nil {
			return plain(w, http.StatusServiceUnavailable, "no ready endpoints\n")
		}
	}
}

// statusOfDone is the status Caddy answers a request whose context ended with: 504 for the
// route's timeout, 499 (client closed the request, as reverse_proxy says) otherwise.
func statusOfDone(err error) int {
	if errors.Is(err, context.DeadlineExceeded) {
		return http.StatusGatewayTimeout
	}
	return 499
}

// tryWriter is the response writer of one try. Its header is its own until the try's final
// status is known: a status the route retries, while tries remain, holds the try back (held:
// everything written is discarded); any other passes it (passed: the header is copied to
// the client's writer and the body streams through). Informational answers (1xx) of a try
// are not passed: the client might otherwise see those of a try held back.
type tryWriter struct {
	w      http.ResponseWriter
	rt     *configv1.Route
	tries  int
	header http.Header
	status int
	held   bool
	passed bool
}

func (tw *tryWriter) Header() http.Header {
	if tw.passed {
		return tw.w.Header()
	}
	return tw.header
}

func (tw *tryWriter) WriteHeader(code int) {
	if tw.held || tw.passed || (code >= 100 && code <= 199) {
		return
	}
	tw.status = code
	if contract.RetryAgain(tw.rt, tw.tries, code) {
		tw.held = true
		return
	}
	tw.passed = true
	h := tw.w.Header()
	for k, v := range tw.header {
		h[k] = v
	}
	tw.w.WriteHeader(code)
}

func (tw *tryWriter) Write(b []byte) (int, error) {
	if !tw.held && !tw.passed {
		tw.WriteHeader(http.StatusOK)
	}
	if tw.held {
		return len(b), nil
	}
	return tw.w.Write(b)
}

// FlushError flushes a passed try's answer; a held one has nothing to flush.
func (tw *tryWriter) FlushError() error {
	if !tw.passed {
		return nil
	}
	return http.NewResponseController(tw.w).Flush()
}

// Unwrap lets http.ResponseController reach the client's connection (its deadlines);
// flushing stops at FlushError, so a held try's answer never reaches it.
func (tw *tryWriter) Unwrap() http.ResponseWriter { return tw.w }
