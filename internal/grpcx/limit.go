package grpcx

import (
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// limiter caps concurrent streams per method, so that a peer opening streams in a loop (or
// a fleet of pushers far larger than planned) cannot take the server's memory: each stream
// holds a subscription, a buffer or a copy of the state.
type limiter struct {
	limits map[string]int
	mu     sync.Mutex
	open   map[string]int
}

func newLimiter(limits map[string]int) *limiter {
	return &limiter{limits: limits, open: map[string]int{}}
}

func (l *limiter) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	max, ok := l.limits[info.FullMethod]
	if !ok || max <= 0 {
		return handler(srv, ss)
	}
	l.mu.Lock()
	if l.open[info.FullMethod] >= max {
		l.mu.Unlock()
		return status.Errorf(codes.ResourceExhausted, "%s: %d concurrent streams already open, the server's limit; try again later", info.FullMethod, max)
	}
	l.open[info.FullMethod]++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.open[info.FullMethod]--
		l.mu.Unlock()
	}()
	return handler(srv, ss)
}
