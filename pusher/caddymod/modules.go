package caddymod

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/caddyserver/caddy/v2/modules/caddytls"
	"github.com/caddyserver/certmagic"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

func init() {
	caddy.RegisterModule(Admin{})
	caddy.RegisterModule(new(Router))
	caddy.RegisterModule(Upstreams{})
	caddy.RegisterModule(Certificates{})
	caddy.RegisterModule(NoIssuance{})
}

// The admin API paths.
const (
	PathState = "/sluice/state"
	PathDelta = "/sluice/delta"
)

// upstreamsVar is the request variable through which the router hands the chosen backend's
// endpoints to the upstream source.
const upstreamsVar = "sluice.upstreams"

// protocolVar is the request variable through which the router tells Caddy's config which
// reverse_proxy speaks the chosen backend's protocol: protocolH2C selects the one whose
// transport speaks HTTP/2 over cleartext, protocolTLS the one that speaks TLS without
// verifying the endpoint (ModuleProtocolVar, ModuleH2C and ModuleTLS in pusher/caddy's
// ModuleConfig); unset or empty, the default one (HTTP/1.1).
const (
	protocolVar = "sluice.protocol"
	protocolH2C = "h2c"
	protocolTLS = "tls"
	// hostVar is the Host a TLS backend is sent (pusher/caddy's ModuleHostVar): the TLS
	// reverse_proxy sets it, since Caddy's TLS transport would send the endpoint's address.
	hostVar = "sluice.host"
)

// Admin is the pusher's endpoint on Caddy's admin API (admin.api.sluice).
type Admin struct{}

// CaddyModule returns the Caddy module information.
func (Admin) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "admin.api.sluice", New: func() caddy.Module { return Admin{} }}
}

// Routes returns the admin routes.
func (Admin) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{
		{Pattern: PathState, Handler: caddy.AdminHandlerFunc(serveState)},
		{Pattern: PathDelta, Handler: caddy.AdminHandlerFunc(serveDelta)},
	}
}

// StateInfo is what GET /sluice/state answers: the version held (all empty when none).
type StateInfo struct {
	Ref
	VirtualHosts int `json:"virtual_hosts"`
	Backends     int `json:"backends"`
	Certificates int `json:"certificates"`
	// Mirrors counts the copies of mirrored requests, whatever the version.
	Mirrors MirrorStats `json:"mirrors"`
}

func serveState(w http.ResponseWriter, r *http.Request) error {
	switch r.Method {
	case http.MethodGet:
		var info StateInfo
		if t := store.Current(); t != nil {
			info = StateInfo{Ref: t.Ref, VirtualHosts: t.hosts.len(), Backends: t.backends.len(), Certificates: t.certs.len()}
		}
		info.Mirrors = mirrors.stats()
		w.Header().Set("Content-Type", "application/json")
		return json.NewEncoder(w).Encode(info)
	case http.MethodPut:
		cfg := &configv1.Config{}
		if err := readProto(r, cfg); err != nil {
			return err
		}
		return answer(w, store.Replace(cfg))
	default:
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
	}
}

func serveDelta(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
	}
	d := &configv1.ConfigDelta{}
	if err := readProto(r, d); err != nil {
		return err
	}
	return answer(w, store.ApplyDelta(d))
}

func readProto(r *http.Request, m proto.Message) error {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("reading the body: %w", err)}
	}
	if err := proto.Unmarshal(b, m); err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("decoding %T: %w", m, err)}
	}
	return nil
}

func answer(w http.ResponseWriter, err error) error {
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
		return nil
	case errors.Is(err, ErrNotAtBase), errors.Is(err, contract.ErrBrokenChain):
		return caddy.APIError{HTTPStatus: http.StatusConflict, Err: err}
	}
	var rf *RefusedError
	if errors.As(err, &rf) {
		// What was refused, beside Caddy's own error body (which holds only the message).
		if b, jerr := json.Marshal(rf.Refused); jerr == nil {
			w.Header().Set(contract.RefusedHeader, string(b))
		}
	}
	return caddy.APIError{HTTPStatus: http.StatusUnprocessableEntity, Err: err}
}

// Router routes a request by the table (http.handlers.sluice): 404 without a route or with a
// stop route (Route.stop), a CORS
// preflight answered directly (contract.PreflightHeader), the route's redirect answered directly, 500 for the route's invalid share, 503 without ready
// endpoints, else a backend is picked, the route's mirrors get their copies (mirror), the
// request is rewritten and its headers changed as
// the route and then the picked backend say (contract.ForwardedTo) and handed to
// the next handler (reverse_proxy with the sluice upstreams: the one of the chosen backend's
// protocol, through protocolVar) with the chosen backend, within the route's timeout, and
// tried again as the route's retry policy says (retry); the route's CORS headers
// (contract.ApplyResponseCORS) and then its response header modifier change the response.
type Router struct {
	// Listener names the proxy listener of the server this handler is in (Route.listener):
	// empty in the main HTTP and HTTPS servers. Only its routes are served there.
	Listener string `json:"listener,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Router) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.sluice", New: func() caddy.Module { return new(Router) }}
}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (h *Router) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	t := store.Current()
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	req := contract.RequestOf(scheme, r)
	req.Listener = h.Listener
	var rt *route
	if t != nil {
		rt = t.Match(req)
	}
	if rt == nil || rt.rt.GetStop() {
		// A stop route ends a Gateway listener's hostname: nothing less specific serves it.
		return plain(w, http.StatusNotFound, "no route\n")
	}
	// The route's limits come before anything else of it (contract.OutcomeOf).
	if !rt.clients.Admits(req.Client) {
		return plain(w, http.StatusForbidden, "client address not allowed\n")
	}
	var body *limitedBody
	if max := rt.rt.GetMaxRequestBodyBytes(); max > 0 {
		if contract.BodyTooLarge(rt.rt, r.ContentLength) {
			return plain(w, http.StatusRequestEntityTooLarge, "request body too large\n")
		}
		if r.Body != nil && r.Body != http.NoBody {
			// A body of unknown length is cut at the limit; the answer is then 413, whatever
			// reverse_proxy made of the cut (502).
			body = &limitedBody{ReadCloser: r.Body, left: int64(max)}
			r.Body = body
		}
	}
	err := h.serveRoute(w, r, next, t, rt, req)
	if body != nil && body.over && err != nil {
		return caddyhttp.Error(http.StatusRequestEntityTooLarge, fmt.Errorf("request body over %d bytes", rt.rt.GetMaxRequestBodyBytes()))
	}
	return err
}

// limitedBody reads at most left bytes of a request body, and remembers a try to read more.
type limitedBody struct {
	io.ReadCloser
	left int64
	over bool
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more says whether the body goes on.
		var one [1]byte
		n, err := b.ReadCloser.Read(one[:])
		if n > 0 {
			b.over = true
			return 0, errors.New("request body too large")
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// serveRoute serves req by rt, a route that is not a stop route and whose address and body
// limits admit it.
func (h *Router) serveRoute(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, t *Table, rt *route, req contract.Request) error {
	if contract.IsPreflight(rt.rt, req) {
		// The proxy answers a CORS preflight itself; the backend never sees it.
		for k, v := range contract.PreflightHeader(rt.rt.GetCors(), req) {
			w.Header()[k] = v
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	// The Gateway API's external auth comes before a redirect is answered (contract.OutcomeOf).
	authFirst := rt.rt.GetExternalAuth().GetStyle() == configv1.ExternalAuthStyle_EXTERNAL_AUTH_STYLE_GATEWAY_API
	if authFirst {
		if done, err := t.authorizeInto(w, r, rt, req); done {
			return err
		}
	}
	if loc, code := contract.RedirectLocation(rt.rt, req); code != 0 {
		w.Header().Set("Location", loc)
		w.WriteHeader(code)
		return nil
	}
	// Rate and connection limits count what reaches nginx's preaccess phase: not a preflight
	// or a redirect, which its rewrite phase answers before (docs/translation.md, "Routing
	// order").
	ok, done := rt.zone.admit(req.Client)
	if !ok {
		return plain(w, http.StatusServiceUnavailable, "rate limit exceeded\n")
	}
	defer done()
	if !authFirst {
		// After a preflight and a redirect are answered, as nginx's auth_request.
		if done, err := t.authorizeInto(w, r, rt, req); done {
			return err
		}
	}
	a := rt.rt.GetSessionAffinity()
	b, wb, pinned := t.pinned(rt, a, req)
	if b == nil {
		var invalid bool
		if b, wb, invalid = t.pick(rt); invalid {
			return plain(w, http.StatusInternalServerError, "invalid backend reference\n")
		}
	}
	if b == nil {
		return plain(w, http.StatusServiceUnavailable, "no ready endpoints\n")
	}
	if a != nil && pinned == nil {
		// Session affinity: the endpoint is chosen here, and the answer names it.
		pinned = b.upstreams[rand.IntN(len(b.upstreams))]
		w.Header().Add("Set-Cookie", contract.AffinityCookie(a, b.affinityValue(pinned)))
	}
	if pinned != nil {
		b = &backend{name: b.name, upstreams: []*reverseproxy.Upstream{pinned}, protocol: b.protocol}
	}
	// Mirrors get the request as the route forwards it, before the picked backend's own
	// modifier; they are sent apart and never hold up what follows.
	if len(rt.rt.GetMirrors()) > 0 {
		mirror(t, rt.rt, req, r)
	}
	if m, c := rt.rt.GetResponseHeaders(), rt.rt.GetCors(); m != nil || c != nil {
		w = &modifiedResponse{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, m: m, cors: c, req: req}
	}
	if rt.timeout > 0 {
		// The route's timeout bounds the whole request, every try of it included.
		ctx, cancel := context.WithTimeout(r.Context(), rt.timeout)
		defer cancel()
		r = r.WithContext(ctx)
	}
	if rt.rt.GetRetry() != nil {
		if body, ok := retryable(r); ok {
			return retry(t, rt, req, b, wb, body, w, r, next)
		}
	}
	forward(rt, req, b, wb, r)
	return next.ServeHTTP(w, r)
}

// forward makes r what backend b (the route's entry wb) is sent, and hands b's endpoints and
// protocol to reverse_proxy. The picked backend's own modifier applies after the route's, so
// only once it is picked.
func forward(rt *route, req contract.Request, b *backend, wb *configv1.WeightedBackend, r *http.Request) {
	if rt.rt.GetRewrite() != nil || rt.rt.GetRequestHeaders() != nil || wb.GetRequestHeaders() != nil {
		host, path, header := contract.ForwardedTo(rt.rt, wb, req)
		r.Host, r.URL.Path, r.URL.RawPath, r.Header = host, path, "", header
		r.RequestURI = r.URL.RequestURI()
	}
	caddyhttp.SetVar(r.Context(), upstreamsVar, b.upstreams)
	caddyhttp.SetVar(r.Context(), protocolVar, b.protocol)
	if b.protocol == protocolTLS {
		caddyhttp.SetVar(r.Context(), hostVar, r.Host)
	}
	if b.tls != nil {
		caddyhttp.SetVar(r.Context(), tlsVar, b.tls)
	}
	if rt.dial != (timeouts{}) {
		caddyhttp.SetVar(r.Context(), timeoutsVar, rt.dial)
	}
}

// modifiedResponse applies the route's CORS headers and then its response header modifier
// when the (final) header is written, after reverse_proxy copied the backend's header into it.
type modifiedResponse struct {
	*caddyhttp.ResponseWriterWrapper
	m     *configv1.HeaderModifier
	cors  *configv1.Cors
	req   contract.Request
	wrote bool
}

func (w *modifiedResponse) WriteHeader(code int) {
	if w.wrote {
		return
	}
	if code < 100 || code > 199 { // an informational response is not the final header
		w.wrote = true
		contract.ApplyResponseCORS(w.cors, w.req, w.ResponseWriterWrapper.Header())
		contract.ModifyHeaders(w.m, w.ResponseWriterWrapper.Header())
	}
	w.ResponseWriterWrapper.WriteHeader(code)
}

func (w *modifiedResponse) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriterWrapper.Write(b)
}

func (w *modifiedResponse) ReadFrom(src io.Reader) (int64, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriterWrapper.ReadFrom(src)
}

func plain(w http.ResponseWriter, code int, body string) error {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, err := io.WriteString(w, body)
	return err
}

// Upstreams gives reverse_proxy the endpoints of the backend the router chose
// (http.reverse_proxy.upstreams.sluice).
type Upstreams struct{}

// CaddyModule returns the Caddy module information.
func (Upstreams) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.reverse_proxy.upstreams.sluice", New: func() caddy.Module { return Upstreams{} }}
}

// GetUpstreams implements reverseproxy.UpstreamSource.
func (Upstreams) GetUpstreams(r *http.Request) ([]*reverseproxy.Upstream, error) {
	ups, ok := caddyhttp.GetVar(r.Context(), upstreamsVar).([]*reverseproxy.Upstream)
	if !ok {
		return nil, errors.New("no backend chosen: the sluice handler must come before reverse_proxy")
	}
	return ups, nil
}

// Certificates serves the table's certificates at handshake time (tls.get_certificate.sluice).
type Certificates struct{}

// CaddyModule returns the Caddy module information.
func (Certificates) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "tls.get_certificate.sluice", New: func() caddy.Module { return Certificates{} }}
}

// GetCertificate implements certmagic.Manager: nil (no certificate, the handshake fails) for
// a name the table has no certificate for.
func (Certificates) GetCertificate(_ context.Context, hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if t := store.Current(); t != nil {
		return t.Certificate(hello.ServerName), nil
	}
	return nil, nil
}

// NoIssuance refuses every on-demand certificate (tls.permission.sluice). Caddy turns
// on-demand TLS on for a policy with a certificate manager, and without a permission module
// it would then try to obtain a certificate from its default issuers for any server name a
// client sends that the table has no certificate for: a request to a public CA on a client's
// behalf (and, offline, a handshake that hangs). With this module the table is the only
// source of certificates; a name without one fails the handshake at once.
type NoIssuance struct{}

// CaddyModule returns the Caddy module information.
func (NoIssuance) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "tls.permission.sluice", New: func() caddy.Module { return NoIssuance{} }}
}

// CertificateAllowed implements caddytls.OnDemandPermission: never.
func (NoIssuance) CertificateAllowed(_ context.Context, name string) error {
	return fmt.Errorf("no certificate for %q in the Sluice table; certificates are never obtained on demand", name)
}

var (
	_ caddytls.OnDemandPermission = NoIssuance{}
	_ caddy.AdminRouter           = Admin{}
	_ caddyhttp.MiddlewareHandler = (*Router)(nil)
	_ reverseproxy.UpstreamSource = Upstreams{}
	_ certmagic.Manager           = Certificates{}
)
