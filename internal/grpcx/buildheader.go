package grpcx

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/sluice-io/sluice/internal/version"
)

// Every answer says which build served it, in its response headers, so that a client (sluicectl
// version) can tell the server's version without an RPC of its own for it.
const (
	VersionHeader  = "sluice-version"
	RevisionHeader = "sluice-revision"
)

func buildHeader() metadata.MD {
	return metadata.Pairs(VersionHeader, version.Version, RevisionHeader, version.Rev())
}

func versionUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	_ = grpc.SetHeader(ctx, buildHeader()) // only fails once headers are sent, which they are not yet
	return handler(ctx, req)
}

func versionStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	_ = ss.SetHeader(buildHeader())
	return handler(srv, ss)
}
