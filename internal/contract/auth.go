package contract

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
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
	if p := a.GetPath(); !strings.HasPrefix(p, "/") || controlChar(p, false) >= 0 || strings.ContainsAny(p, " #") {
		return fmt.Errorf("path %q", p)
	}
	host, _ := splitHost(a.GetHost())
	if err := checkHostname(host); err != nil || host == "" {
		return fmt.Errorf("host %q", a.GetHost())
	}
	if m := a.GetMethod(); m != "" {
		if err := CheckHeaderName(m); err != nil {
			return fmt.Errorf("method %q is not a token", m)
		}
	}
	for _, h := range a.GetResponseHeaders() {
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

// AuthRequestHeader is the header the authentication service is sent for req (its own,
// without a body's, plus what nginx's auth_request adds), and originalURL is the URL the
// client asked for.
func AuthRequestHeader(req Request) (h http.Header, originalURL string) {
	h = req.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	for _, n := range []string{"Content-Length", "Transfer-Encoding", "Connection", "Upgrade", "Expect", "Te", "Trailer"} {
		h.Del(n)
	}
	uri := req.Path
	if req.RawQuery != "" {
		uri += "?" + req.RawQuery
	}
	originalURL = req.Scheme + "://" + req.Host + uri
	h.Set("X-Original-URL", originalURL)
	h.Set("X-Original-Method", req.Method)
	h.Set("X-Sent-From", "sluice")
	h.Set("X-Auth-Request-Redirect", uri)
	if req.Client.IsValid() {
		h.Set("X-Real-IP", req.Client.String())
		h.Set("X-Forwarded-For", req.Client.String())
	}
	return h, originalURL
}

// AuthDecision is what the proxy does with a request whose authentication service answered
// status (0: no answer): pass (0), or answer it with the status returned, and location for
// a redirect to the sign-in URL.
func AuthDecision(a *configv1.ExternalAuth, status int, originalURL string) (code int, location string) {
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
