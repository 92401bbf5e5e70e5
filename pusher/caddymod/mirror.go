package caddymod

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// Bounds on request mirroring (a route's mirrors: the Gateway API's RequestMirror). A copy
// is sent on its own goroutine and its answer discarded, so that a mirror never delays or
// changes the client's answer; these bounds keep a slow or dead mirror from holding more
// than maxMirrorsInFlight goroutines and connections, each for at most mirrorTimeout.
const (
	// maxMirrorsInFlight bounds the copies being sent at once, over all routes; a copy over
	// it is dropped (and counted), never queued.
	maxMirrorsInFlight = 256
	// mirrorTimeout bounds one copy, connection, request and answer.
	mirrorTimeout = 5 * time.Second
	// maxMirrorBody bounds the request body a copy carries. The body is read before the
	// request is proxied (and handed on to the backend unchanged), so this is also what a
	// mirrored request may hold in memory. A request whose body is larger, or of unknown
	// length (chunked), is not mirrored: its copies are dropped (and counted) rather than
	// sent without the body.
	maxMirrorBody = 64 << 10
	// maxMirrorAnswer bounds what is read of a mirror's answer before the connection is
	// closed; reading a short answer to its end lets the connection be reused.
	maxMirrorAnswer = 64 << 10
)

// MirrorStats counts the copies the router made of mirrored requests since Caddy started.
type MirrorStats struct {
	// Sent copies got an answer (any status) from the mirror.
	Sent uint64 `json:"sent"`
	// Failed copies got no answer: connection refused, timed out.
	Failed uint64 `json:"failed"`
	// Dropped copies were never sent: too many in flight, or the body could not be copied.
	Dropped uint64 `json:"dropped"`
}

// mirrorCopy is one copy of a request, for one endpoint of a mirror's backend.
type mirrorCopy struct {
	backend, dial             string
	method, host, path, query string
	header                    http.Header
	body                      []byte
}

// mirrorSender sends copies, at most cap(slots) at once.
type mirrorSender struct {
	slots                 chan struct{}
	client                *http.Client
	sent, failed, dropped atomic.Uint64
}

func newMirrorSender(inFlight int) *mirrorSender {
	return &mirrorSender{
		slots: make(chan struct{}, inFlight),
		client: &http.Client{
			Transport: &http.Transport{
				DialContext:         (&net.Dialer{Timeout: mirrorTimeout}).DialContext,
				MaxIdleConnsPerHost: 8,
				IdleConnTimeout:     30 * time.Second,
			},
			// A mirror's redirect is part of its discarded answer.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Timeout:       mirrorTimeout,
		},
	}
}

// mirrors sends every copy the router makes; dispatch is what the router calls, replaced in
// tests that record the copies instead.
var (
	mirrors  = newMirrorSender(maxMirrorsInFlight)
	dispatch = func(c *mirrorCopy) { mirrors.dispatch(c) }
)

// Stats are the counts so far.
func (s *mirrorSender) stats() MirrorStats {
	return MirrorStats{Sent: s.sent.Load(), Failed: s.failed.Load(), Dropped: s.dropped.Load()}
}

// dispatch sends c on its own goroutine when a slot is free, and drops it otherwise: a
// copy never waits, so neither does the client's request.
func (s *mirrorSender) dispatch(c *mirrorCopy) {
	select {
	case s.slots <- struct{}{}:
	default:
		s.dropped.Add(1)
		return
	}
	go func() {
		defer func() { <-s.slots }()
		if s.send(c) {
			s.sent.Add(1)
		} else {
			s.failed.Add(1)
		}
	}()
}

// send sends c and discards the answer; false when there was none.
func (s *mirrorSender) send(c *mirrorCopy) bool {
	// Not the client's context: the copy is independent of how the client's request ends.
	ctx, cancel := context.WithTimeout(context.Background(), mirrorTimeout)
	defer cancel()
	u := &url.URL{Scheme: "http", Host: c.dial, Path: c.path, RawQuery: c.query}
	var body io.Reader
	if len(c.body) > 0 {
		body = bytes.NewReader(c.body)
	}
	req, err := http.NewRequestWithContext(ctx, c.method, u.String(), body)
	if err != nil {
		return false
	}
	req.Header, req.Host = c.header, c.host
	resp, err := s.client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxMirrorAnswer))
	_ = resp.Body.Close()
	return true
}

// drawn says whether a request is copied to m: with probability numerator/denominator.
func drawn(m *configv1.Mirror) bool {
	d := m.GetDenominator()
	if d == 0 || m.GetNumerator() == 0 {
		return false
	}
	return m.GetNumerator() >= d || rand.Uint32N(d) < m.GetNumerator()
}

// mirror makes the copies of r (matched as req to route rt of table t) that rt's mirrors
// draw, each to a ready endpoint of its backend, with what the route forwards
// (contract.Forwarded: its rewrite and request header modifier, not the picked backend's),
// and dispatches them. It runs before r is changed for the backend; a body it copies is
// put back in r unchanged.
func mirror(t *Table, rt *configv1.Route, req contract.Request, r *http.Request) {
	var copies []*mirrorCopy
	for _, m := range rt.GetMirrors() {
		if !drawn(m) {
			continue
		}
		b, _ := t.backends.get(m.GetBackend())
		if b == nil || len(b.upstreams) == 0 {
			continue
		}
		copies = append(copies, &mirrorCopy{backend: m.GetBackend(), dial: b.upstreams[rand.IntN(len(b.upstreams))].Dial})
	}
	if len(copies) == 0 {
		return
	}
	body, ok := copyBody(r, maxMirrorBody)
	if !ok {
		mirrors.dropped.Add(uint64(len(copies)))
		return
	}
	host, path, header := contract.Forwarded(rt, req)
	for _, c := range copies {
		c.method, c.host, c.path, c.query, c.header, c.body = r.Method, host, path, r.URL.RawQuery, header.Clone(), body
		dispatch(c)
	}
}

// copyBody reads r's body when it is known to be at most limit bytes and puts it back for
// the backend; false when it cannot be copied (too large, of unknown length, or the client
// failed to send it: the backend then sees the same failure).
func copyBody(r *http.Request, limit int64) ([]byte, bool) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil, true
	}
	if r.ContentLength < 0 || r.ContentLength > limit {
		return nil, false
	}
	buf := make([]byte, r.ContentLength)
	n, err := io.ReadFull(r.Body, buf)
	rest := io.Reader(bytes.NewReader(buf[:n]))
	if err != nil {
		rest = io.MultiReader(rest, errReader{err})
	}
	r.Body = readCloser{rest, r.Body}
	return buf, err == nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

type readCloser struct {
	io.Reader
	io.Closer
}
