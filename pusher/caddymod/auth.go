package caddymod

import (
	"context"
	"crypto/tls"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"time"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// authTimeout bounds one question to an authentication service (Route.external_auth), as
// nginx's default proxy timeouts bound its auth_request: no answer in time is a 500.
const authTimeout = 30 * time.Second

// authorizeInto asks rt's authentication service about req, if it has one: done when the
// client has been answered (the service did not let the request pass).
func (t *Table) authorizeInto(w http.ResponseWriter, r *http.Request, rt *route, req contract.Request) (done bool, err error) {
	ea := rt.rt.GetExternalAuth()
	if ea == nil {
		return false, nil
	}
	pass, d := t.authorize(r, req, ea)
	if pass {
		return false, nil
	}
	if d.location != "" {
		w.Header().Set("Location", d.location)
		w.WriteHeader(d.code)
		return true, nil
	}
	for k, v := range d.header {
		w.Header()[k] = v
	}
	if d.body != nil {
		w.WriteHeader(d.code)
		_, err := w.Write(d.body)
		return true, err
	}
	return true, plain(w, d.code, http.StatusText(d.code)+"\n")
}

// authDenial is the answer to a request its authentication service did not let through.
type authDenial struct {
	code     int
	location string // a redirect to the sign-in URL
	header   http.Header
	body     []byte // the service's own body (Gateway API style); nil: a plain status page
}

// authClients ask authentication services: in cleartext, or over TLS without verifying the
// endpoint (BACKEND_PROTOCOL_TLS, as the proxy speaks to such backends). They never follow
// a redirect: the answer is the service's, which contract.AuthDecision reads.
var authClients = func() map[string]*http.Client {
	client := func(tlsCfg *tls.Config) *http.Client {
		return &http.Client{
			Transport: &http.Transport{DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext, TLSClientConfig: tlsCfg,
				MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return map[string]*http.Client{"": client(nil), protocolTLS: client(&tls.Config{InsecureSkipVerify: true})} //nolint:gosec // the protocol's TLS backends are unverified
}()

// authorize asks a's service about req (r as the client sent it): pass, or the answer the
// client gets (contract.AuthDecision), with the service's headers (contract.AuthDenialHeaders)
// and, in the Gateway API's style, its body. On pass, a's ResponseHeaders are set on r from
// the service's answer.
func (t *Table) authorize(r *http.Request, req contract.Request, a *configv1.ExternalAuth) (pass bool, d authDenial) {
	failed := authDenial{code: http.StatusInternalServerError}
	b, _ := t.backends.get(a.GetBackend())
	if b == nil || len(b.upstreams) == 0 {
		return false, failed
	}
	client := authClients[b.protocol]
	scheme := "http"
	if b.protocol == protocolTLS {
		scheme = "https"
	}
	if client == nil { // h2c: the translator never names such a service
		return false, failed
	}
	method, path, header, original := contract.AuthRequest(a, req)
	ctx, cancel := context.WithTimeout(r.Context(), authTimeout)
	defer cancel()
	u := b.upstreams[rand.IntN(len(b.upstreams))]
	areq, err := http.NewRequestWithContext(ctx, method, scheme+"://"+u.Dial+path, nil)
	status := 0
	var resp *http.Response
	var body []byte
	if err == nil {
		areq.Host, areq.Header = a.GetHost(), header
		if areq.Host == "" {
			areq.Host = req.Host // the Gateway API style sends the request's Host
		}
		if resp, err = client.Do(areq); err == nil {
			body, err = io.ReadAll(io.LimitReader(resp.Body, contract.AuthDenialMaxBody))
			resp.Body.Close()
			status = resp.StatusCode
			if err != nil {
				status = 0 // a body cut short is no answer
			}
		}
	}
	d.code, d.location = contract.AuthDecision(a, status, original)
	if d.code == 0 {
		contract.CopyHeaders(r.Header, resp.Header, contract.AuthPassHeaders(a, resp.Header))
		return true, d
	}
	if resp != nil && status != 0 && d.code == status {
		d.header = contract.AuthDenialHeaders(a, status, resp.Header)
		if a.GetStyle() == configv1.ExternalAuthStyle_EXTERNAL_AUTH_STYLE_GATEWAY_API {
			d.body = body
		}
	}
	return false, d
}
