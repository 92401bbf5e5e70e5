package contract

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// CheckExternalAuth returns why a data plane could not ask a's service: no backend, a path
// that is not absolute or has a control character, a host that is not a hostname (with an
// optional port), a method that is not a token, a response header name that is not one, a
// sign-in URL that is not an absolute http(s) URL.
func CheckExternalAuth(a *configv1.ExternalAuth) error {
	if a == nil {
		return nil
	}
	if a.GetBackend() == "" {
		return errors.New("no backend")
	}
	if p := a.GetPath(); !strings.HasPrefix(p, "/") || controlChar(p, false) >= 0 || strings.ContainsAny(p, " #") || gatewayAPIAuth(a) && strings.Contains(p, "?") {
		return fmt.Errorf("path %q", p)
	}
	// The Gateway API style sends the request's own Host (an empty Host).
	if host, _ := splitHost(a.GetHost()); a.GetHost() != "" || !gatewayAPIAuth(a) {
		if err := checkHostname(host); err != nil || host == "" {
			return fmt.Errorf("host %q", a.GetHost())
		}
	}
	if m := a.GetMethod(); m != "" {
		if err := CheckHeaderName(m); err != nil {
			return fmt.Errorf("method %q is not a token", m)
		}
	}
	for _, h := range append(append([]string(nil), a.GetResponseHeaders()...), a.GetRequestHeaders()...) {
		if err := CheckHeaderName(h); err != nil {
			return fmt.Errorf("response header: %w", err)
		}
	}
	if s := a.GetSigninUrl(); s != "" {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || controlChar(s, false) >= 0 || strings.ContainsAny(s, " ") {
			return fmt.Errorf("sign-in URL %q", s)
		}
	}
	return nil
}

// gatewayAPIAuth says whether a follows the Gateway API's semantics.
func gatewayAPIAuth(a *configv1.ExternalAuth) bool {
	return a.GetStyle() == configv1.ExternalAuthStyle_EXTERNAL_AUTH_STYLE_GATEWAY_API
}

// AuthRequest is the question a's service is asked about req: its method, path (with the
// query) and header; originalURL is the URL the client asked for. nginx's auth_request asks
// a.Method (GET) for a.Path with the request's header (without a body's) and who asked for
// what; the Gateway API's filter asks the request's method for a.Path before the request's
// path and query, with Host, Authorization and a.RequestHeaders only.
func AuthRequest(a *configv1.ExternalAuth, req Request) (method, path string, h http.Header, originalURL string) {
	uri := req.Path
	if req.RawQuery != "" {
		uri += "?" + req.RawQuery
	}
	originalURL = req.Scheme + "://" + req.Host + uri
	if gatewayAPIAuth(a) {
		h = http.Header{}
		CopyHeaders(h, req.Header, append([]string{"Authorization"}, a.GetRequestHeaders()...))
		return req.Method, strings.TrimSuffix(a.GetPath(), "/") + uri, h, originalURL
	}
	h = authRequestHeader(req, uri, originalURL)
	method = a.GetMethod()
	if method == "" {
		method = http.MethodGet
	}
	return method, a.GetPath(), h, originalURL
}

// AuthPassHeaders are the names of the answer's headers a passing request gets: a's
// ResponseHeaders, or for the Gateway API style without any, every header of answer but
// Host and those of the connection.
func AuthPassHeaders(a *configv1.ExternalAuth, answer http.Header) []string {
	if !gatewayAPIAuth(a) || len(a.GetResponseHeaders()) > 0 {
		return a.GetResponseHeaders()
	}
	var out []string
	for n := range answer {
		switch http.CanonicalHeaderKey(n) {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Te", "Trailer", "Upgrade", "Proxy-Connection", "Date", "Content-Type":
			continue
		}
		out = append(out, n)
	}
	return out
}

// CopyHeaders sets on dst the values src has of each header named (names any case); a name
// src lacks leaves dst as it is.
func CopyHeaders(dst, src http.Header, names []string) {
	for _, n := range names {
		if vs := src.Values(n); len(vs) > 0 {
			dst[http.CanonicalHeaderKey(n)] = append([]string(nil), vs...)
		}
	}
}

// authRequestHeader is the header nginx's auth_request sends the authentication service for
// req, which asked for uri (originalURL in full): its own, without a body's, plus who asked
// for what.
func authRequestHeader(req Request, uri, originalURL string) http.Header {
	h := req.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	for _, n := range []string{"Content-Length", "Transfer-Encoding", "Connection", "Upgrade", "Expect", "Te", "Trailer"} {
		h.Del(n)
	}
	h.Set("X-Original-URL", originalURL)
	h.Set("X-Original-Method", req.Method)
	h.Set("X-Sent-From", "sluice")
	h.Set("X-Auth-Request-Redirect", uri)
	if req.Client.IsValid() {
		h.Set("X-Real-IP", req.Client.String())
		h.Set("X-Forwarded-For", req.Client.String())
	}
	return h
}

// AuthDenialMaxBody bounds the body of a denied answer passed to the client.
const AuthDenialMaxBody = 64 << 10

// AuthDenialHeaders are the headers of the service's answer that a denied request's answer
// carries: in the Gateway API's style, all of them but the connection's and the framing's
// (the service's answer is the client's, as Envoy's ext_authz passes its denied response,
// body included); in nginx's, only WWW-Authenticate on a 401 (auth_request answers with
// its own page).
func AuthDenialHeaders(a *configv1.ExternalAuth, status int, answer http.Header) http.Header {
	out := http.Header{}
	if !gatewayAPIAuth(a) {
		if v := answer.Values("WWW-Authenticate"); status == http.StatusUnauthorized && len(v) > 0 {
			out["Www-Authenticate"] = slices.Clone(v)
		}
		return out
	}
	for k, v := range answer {
		switch http.CanonicalHeaderKey(k) {
		case "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "Te", "Trailer", "Content-Length":
			continue
		}
		out[http.CanonicalHeaderKey(k)] = slices.Clone(v)
	}
	return out
}

// AuthDecision is what the proxy does with a request whose authentication service answered
// status (0: no answer): pass (0), or answer it with the status returned, and location for
// a redirect to the sign-in URL.
func AuthDecision(a *configv1.ExternalAuth, status int, originalURL string) (code int, location string) {
	if gatewayAPIAuth(a) {
		switch {
		case status == http.StatusOK:
			return 0, ""
		case status == 0:
			return http.StatusForbidden, ""
		}
		return status, ""
	}
	switch {
	case status >= 200 && status <= 299:
		return 0, ""
	case status == http.StatusUnauthorized && a.GetSigninUrl() != "":
		sep := "?"
		if strings.Contains(a.GetSigninUrl(), "?") {
			sep = "&"
		}
		return http.StatusFound, a.GetSigninUrl() + sep + "rd=" + url.QueryEscape(originalURL)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return status, ""
	}
	return http.StatusInternalServerError, ""
}
