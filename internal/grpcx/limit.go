package grpcx

import (
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-io/sluice/internal/identity"
)

// Anonymous is the role the stream limits count callers under when the server cannot tell
// them apart (no client CA): they all share its cap.
const Anonymous identity.Role = "anonymous"

// HealthWatchStreams caps each role's concurrent Health.Watch streams on every server:
// any Sluice identity may open them, and each holds a goroutine until the caller leaves.
const HealthWatchStreams = 16

// StreamLimit caps the concurrent streams of one method per role of the caller, so that the
// streams of one role (operators following a stream read-only, or one misbehaving pusher)
// cannot take the slots another role needs.
type StreamLimit struct {
	// PerRole caps the streams the callers of a role hold together; Anonymous is the key of
	// callers when authorization is off.
	PerRole map[identity.Role]int
	// Default caps a role PerRole does not name; 0 means no cap.
	Default int
}

// capOf is the cap of role; 0 or less is no cap.
func (l StreamLimit) capOf(role identity.Role) int {
	if n, ok := l.PerRole[role]; ok {
		return n
	}
	return l.Default
}

// LimitByAccess is the limit of method under policy p: each role with full access to it, and
// anonymous callers (who have full access), may hold full streams; every other role (the
// read-only ones) readOnly.
func LimitByAccess(p identity.Policy, method string, full, readOnly int) StreamLimit {
	l := StreamLimit{PerRole: map[identity.Role]int{Anonymous: full}, Default: readOnly}
	for _, r := range identity.Roles {
		if slices.Contains(p[method].Full, r) {
			l.PerRole[r] = full
		} else {
			l.PerRole[r] = readOnly
		}
	}
	return l
}

// limiter caps concurrent streams per method and role of the caller, so that a peer opening
// streams in a loop (or a fleet of pushers far larger than planned) cannot take the server's
// memory, and one role cannot starve another: each stream holds a subscription, a buffer or a
// copy of the state. It runs after the Guard, which tells it the caller.
type limiter struct {
	limits    map[string]StreamLimit
	onLimited func(method, role string)
	mu        sync.Mutex
	open      map[limitKey]int
}

type limitKey struct {
	method string
	role   identity.Role
}

func newLimiter(limits map[string]StreamLimit, onLimited func(method, role string)) *limiter {
	if onLimited == nil {
		onLimited = func(string, string) {}
	}
	return &limiter{limits: limits, onLimited: onLimited, open: map[limitKey]int{}}
}

// roleOf is the role a stream is counted under.
func roleOf(c identity.Caller) identity.Role {
	if c.Anonymous {
		return Anonymous
	}
	return c.Identity.Role
}

func (l *limiter) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	lim, ok := l.limits[info.FullMethod]
	if !ok {
		return handler(srv, ss)
	}
	role := roleOf(identity.CallerFrom(ss.Context()))
	max := lim.capOf(role)
	if max <= 0 {
		return handler(srv, ss)
	}
	k := limitKey{info.FullMethod, role}
	l.mu.Lock()
	if l.open[k] >= max {
		l.mu.Unlock()
		l.onLimited(info.FullMethod, string(role))
		return status.Errorf(codes.ResourceExhausted, "%s: role %s already holds %d concurrent streams, its limit on this server; try again later", info.FullMethod, role, max)
	}
	l.open[k]++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		if l.open[k]--; l.open[k] == 0 {
			delete(l.open, k)
		}
		l.mu.Unlock()
	}()
	return handler(srv, ss)
}
