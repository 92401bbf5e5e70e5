package identity

import (
	"context"
	"crypto/x509"
	"errors"
	"sync"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Caller is who made a call, as the server's Guard saw it.
type Caller struct {
	Identity Identity
	// Anonymous is true when the server does not verify client certificates: authorization
	// is off and every caller may do everything.
	Anonymous bool
	// Err says why a verified certificate names no usable identity.
	Err error
	// Access is what the policy granted for this call.
	Access Access
	// Name is the identity, or the certificate's subject when it names none, for logs.
	Name string
}

type callerKey struct{}

// WithCaller returns ctx carrying c; handlers read it with CallerFrom.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller the Guard admitted. Without a Guard (a handler called
// directly, as in unit tests) it is Anonymous with Full access.
func CallerFrom(ctx context.Context) Caller {
	if c, ok := ctx.Value(callerKey{}).(Caller); ok {
		return c
	}
	return Caller{Anonymous: true, Access: Full, Name: "anonymous"}
}

// GuardConfig configures a Guard.
type GuardConfig struct {
	Logger      hclog.Logger
	TrustDomain string
	Policy      Policy
	// Authenticated says the server verifies client certificates against a CA; without it
	// every caller is Anonymous.
	Authenticated bool
	// OnDenied counts one denial, by method and role ("none" for a certificate without an
	// identity).
	OnDenied func(method, role string)
}

// maxLoggedDenials bounds the memory of who was already logged.
const maxLoggedDenials = 4096

// Guard authorizes every call of a server by its caller's identity.
type Guard struct {
	cfg GuardConfig

	mu     sync.Mutex
	logged map[[2]string]bool
}

// NewGuard returns a Guard.
func NewGuard(cfg GuardConfig) (*Guard, error) {
	if cfg.Logger == nil || cfg.Policy == nil {
		return nil, errors.New("identity: GuardConfig needs Logger and Policy")
	}
	if cfg.TrustDomain == "" {
		cfg.TrustDomain = DefaultTrustDomain
	}
	if cfg.OnDenied == nil {
		cfg.OnDenied = func(string, string) {}
	}
	return &Guard{cfg: cfg, logged: map[[2]string]bool{}}, nil
}

// caller identifies the peer of ctx.
func (g *Guard) caller(ctx context.Context) Caller {
	if !g.cfg.Authenticated {
		return Caller{Anonymous: true, Name: "anonymous"}
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return Caller{Err: errors.New("no peer information"), Name: "unknown"}
	}
	tlsInfo, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(tlsInfo.State.VerifiedChains) == 0 || len(tlsInfo.State.VerifiedChains[0]) == 0 {
		return Caller{Err: errors.New("no verified client certificate"), Name: "unverified " + p.Addr.String()}
	}
	return Identify(tlsInfo.State.VerifiedChains[0][0], g.cfg.TrustDomain)
}

// Identify names the caller that presented cert (already verified).
func Identify(cert *x509.Certificate, trustDomain string) Caller {
	id, err := FromCertificate(cert, trustDomain)
	if err != nil {
		name := "subject " + cert.Subject.String()
		for _, u := range cert.URIs {
			name += " uri " + u.String()
		}
		return Caller{Err: err, Name: name}
	}
	return Caller{Identity: id, Name: id.URI()}
}

// authorize decides a call, logging and counting a denial.
func (g *Guard) authorize(ctx context.Context, method string) (context.Context, error) {
	c := g.caller(ctx)
	access, reason := g.cfg.Policy.Decide(method, c)
	if access == Denied {
		role := string(c.Identity.Role)
		if role == "" {
			role = "none"
		}
		g.cfg.OnDenied(method, role)
		g.logOnce(c.Name, method, reason)
		return nil, status.Errorf(codes.PermissionDenied, "%s: %s", c.Name, reason)
	}
	c.Access = access
	return WithCaller(ctx, c), nil
}

// logOnce logs a denial the first time an identity is denied a method: a peer retrying in a
// loop must not flood the log (the metric counts every one).
func (g *Guard) logOnce(name, method, reason string) {
	k := [2]string{name, method}
	g.mu.Lock()
	first := !g.logged[k] && len(g.logged) < maxLoggedDenials
	if first {
		g.logged[k] = true
	}
	g.mu.Unlock()
	if first {
		g.cfg.Logger.Warn("call denied", "caller", name, "method", method, "reason", reason)
	}
}

// Unary is the Guard as a unary interceptor.
func (g *Guard) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, err := g.authorize(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// Stream is the Guard as a stream interceptor.
func (g *Guard) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, err := g.authorize(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		return handler(srv, &withContext{ServerStream: ss, ctx: ctx})
	}
}

type withContext struct {
	grpc.ServerStream
	ctx context.Context
}

func (w *withContext) Context() context.Context { return w.ctx }
