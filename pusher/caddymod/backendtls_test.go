package caddymod

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/pki"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// upstream is an HTTPS endpoint whose certificate ca issued for names, that asks for a
// client certificate issued by ca (requiring one when mutual), and records the server name
// each handshake sent.
type upstream struct {
	url string
	mu  sync.Mutex
	sni []string
}

func (u *upstream) sent() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.sni...)
}

func startUpstream(t *testing.T, ca *pki.CA, mutual bool, names ...string) *upstream {
	t.Helper()
	crt, key, err := ca.Issue(pki.CertOptions{CommonName: names[0], DNSNames: names, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	u := &upstream{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who := "anonymous"
		if len(r.TLS.PeerCertificates) > 0 {
			who = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		_, _ = io.WriteString(w, "client "+who)
	}))
	auth := tls.VerifyClientCertIfGiven
	if mutual {
		auth = tls.RequireAndVerifyClientCert
	}
	srv.TLS = &tls.Config{ClientAuth: auth, ClientCAs: pool, GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		u.mu.Lock()
		u.sni = append(u.sni, h.ServerName)
		u.mu.Unlock()
		return nil, nil
	}, Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	u.url = srv.URL
	return u
}

// tlsTransport is the module's transport as the TLS reverse_proxy of pusher/caddy's
// ModuleConfig has it: Caddy's TLS transport, unverified by default.
func tlsTransport(t *testing.T) *Transport {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	tr := &Transport{HTTP: json.RawMessage(`{"tls":{"insecure_skip_verify":true}}`)}
	if err := tr.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Cleanup() })
	return tr
}

// through sends a GET to u through tr with bt as the backend's TLS settings (nil: none): the
// answer's body, or the error.
func through(t *testing.T, tr *Transport, u *upstream, bt *configv1.BackendTLS) (string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]any{}
	if bt != nil {
		p, err := compileTLSProfile(bt)
		if err != nil {
			t.Fatal(err)
		}
		vars[tlsVar] = p
	}
	req = req.WithContext(context.WithValue(req.Context(), caddyhttp.VarsCtxKey, vars))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), nil
}

// Upstream TLS (docs/translation.md): the module's transport verifies an endpoint as the
// backend's settings say (its chain leads to the trusted certificates, it is valid for the
// name), sends the server name only when told, and presents the client certificate; a
// backend without settings is reached unverified, as before, on a transport of its own.
func TestTransportVerifiesEndpointsAsTheBackendSays(t *testing.T) {
	ca, err := pki.NewCA("upstream-ca")
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("other-ca")
	if err != nil {
		t.Fatal(err)
	}
	clientCrt, clientKey, err := ca.Issue(pki.CertOptions{CommonName: "proxy", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	plain := startUpstream(t, ca, false, "app.internal")
	mutual := startUpstream(t, ca, true, "secure.internal")
	tr := tlsTransport(t)

	verify := func(ca []byte, name string) *configv1.BackendTLS {
		return &configv1.BackendTLS{Verify: true, CaPem: ca, VerifyName: name, MaxDepth: 1}
	}
	for _, c := range []struct {
		name   string
		u      *upstream
		bt     *configv1.BackendTLS
		want   string // the body, or a part of the error
		wantOK bool
		sni    string
	}{
		{name: "unverified", u: plain, want: "client anonymous", wantOK: true},
		{name: "verified", u: plain, bt: verify(ca.CertPEM, "app.internal"), want: "client anonymous", wantOK: true},
		{name: "verified with SNI", u: plain, bt: &configv1.BackendTLS{Verify: true, CaPem: ca.CertPEM, VerifyName: "app.internal", ServerName: "app.internal"}, want: "client anonymous", wantOK: true, sni: "app.internal"},
		{name: "another CA", u: plain, bt: verify(other.CertPEM, "app.internal"), want: "certificate signed by unknown authority"},
		{name: "another name", u: plain, bt: verify(ca.CertPEM, "db.internal"), want: "not db.internal"},
		{name: "client certificate required, none", u: mutual, bt: verify(ca.CertPEM, "secure.internal"), want: "certificate required"},
		{name: "client certificate", u: mutual, bt: &configv1.BackendTLS{Verify: true, CaPem: ca.CertPEM, VerifyName: "secure.internal", ClientCertificatePem: clientCrt, ClientKeyPem: clientKey}, want: "client proxy", wantOK: true},
		{name: "client certificate, unverified", u: mutual, bt: &configv1.BackendTLS{ClientCertificatePem: clientCrt, ClientKeyPem: clientKey}, want: "client proxy", wantOK: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(c.u.sent())
			got, err := through(t, tr, c.u, c.bt)
			switch {
			case c.wantOK && err != nil:
				t.Fatalf("error %v, want %q", err, c.want)
			case c.wantOK && got != c.want:
				t.Fatalf("answer %q, want %q", got, c.want)
			case !c.wantOK && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("answer %q, error %v; want an error with %q", got, err, c.want)
			}
			if sent := c.u.sent(); len(sent) > before && sent[len(sent)-1] != c.sni {
				t.Errorf("server name sent %q, want %q", sent[len(sent)-1], c.sni)
			}
		})
	}
}

// A backend whose TLS settings do not compile is refused by name, and nothing of the config
// is applied.
func TestBackendWithBadTLSSettingsIsRefused(t *testing.T) {
	cfg := retriedConfig(nil, 0, false)
	be := cfg.GetResources().GetBackends()[0]
	be.Protocol = configv1.BackendProtocol_BACKEND_PROTOCOL_TLS
	be.Tls = &configv1.BackendTLS{Verify: true, CaPem: []byte("not a certificate"), VerifyName: "a.internal"}
	cfg.Hash = contract.Hash(cfg.GetResources())
	err := (&Store{}).Replace(cfg)
	var re *RefusedError
	if !asRefused(err, &re) || len(re.Refused) != 1 || re.Refused[0].Backend != "web" {
		t.Fatalf("Replace: %v, want a refusal of backend web", err)
	}
}

func asRefused(err error, re **RefusedError) bool {
	r, ok := err.(*RefusedError)
	if ok {
		*re = r
	}
	return ok
}
