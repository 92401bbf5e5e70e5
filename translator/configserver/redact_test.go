package configserver

import (
	"bytes"
	"context"
	"net"
	"testing"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/identity"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// startAs serves s to callers the Guard would have admitted with access.
func startAs(t *testing.T, s *Server, access identity.Access) configv1.ConfigServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	caller := identity.Caller{Identity: identity.Identity{Role: identity.Operator}, Access: access, Name: "spiffe://cluster.local/sluice/operator"}
	gs := grpc.NewServer(
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return h(srv, &ctxStream{ss, identity.WithCaller(ss.Context(), caller)})
		}),
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			return h(identity.WithCaller(ctx, caller), req)
		}))
	configv1.RegisterConfigServiceServer(gs, s)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return configv1.NewConfigServiceClient(conn)
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (c *ctxStream) Context() context.Context { return c.ctx }

func cert(name string) *configv1.Certificate {
	return &configv1.Certificate{Name: name, CertificatePem: []byte("CERT " + name), PrivateKeyPem: []byte("-----BEGIN PRIVATE KEY----- " + name)}
}

// docs/operations.md, "Security model": the operator follows the config stream read-only. Every config
// and delta it gets is without private keys, yet verifies (the hashes are of what it gets);
// it is not recorded as a pusher; an ACK from it ends the stream with PERMISSION_DENIED;
// GetStatus returns no key to anyone; and a pusher on the same server still gets the keys.
func TestOperatorStreamIsReadOnlyWithoutPrivateKeys(t *testing.T) {
	stopping := make(chan struct{})
	defer close(stopping)
	s, err := New(Config{Logger: hclog.NewNullLogger(), Stopping: stopping})
	if err != nil {
		t.Fatal(err)
	}
	op, full := startAs(t, s, identity.Redacted), startAs(t, s, identity.Full)

	src := &source{epoch: "e1"}
	src.first(s)
	// Version 2 adds a certificate; version 3 adds another and changes the first.
	for _, names := range [][]string{{"a"}, {"a", "b"}} {
		for _, n := range names {
			c := cert(n)
			c.CertificatePem = append(c.CertificatePem, byte('0'+src.version))
			src.st.Put(contract.Certificates, n, c)
		}
		d := src.st.TakeDelta()
		src.version++
		d.Epoch, d.Version, d.BaseVersion, d.Hash = src.epoch, src.version, src.version-1, src.st.Hash()
		s.PublishDelta(d, contract.Digests{})
	}

	for _, tc := range []struct {
		name string
		c    configv1.ConfigServiceClient
		keys bool
	}{{"operator", op, false}, {"pusher", full, true}} {
		cl := follow(t, tc.c)
		cl.readUntil(src.version)
		res := cl.chain.State.Resources()
		if len(res.GetCertificates()) != 2 {
			t.Fatalf("%s holds %d certificates, want 2", tc.name, len(res.GetCertificates()))
		}
		for _, c := range res.GetCertificates() {
			if has := bytes.Contains(c.GetPrivateKeyPem(), []byte("PRIVATE KEY")); has != tc.keys {
				t.Fatalf("%s: certificate %s has a private key: %v, want %v", tc.name, c.GetName(), has, tc.keys)
			}
		}
		if tc.name == "operator" {
			// A read-only stream may not answer.
			if err := cl.stream.Send(&configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Ack{Ack: &configv1.Ack{Config: &configv1.ConfigRef{Epoch: cl.chain.Version.GetEpoch(), Version: cl.chain.Version.GetVersion(), Hash: cl.chain.Version.GetHash()}}}}); err != nil {
				t.Fatal(err)
			}
			for {
				_, err := cl.stream.Recv()
				if err == nil {
					continue
				}
				if status.Code(err) != codes.PermissionDenied {
					t.Fatalf("an ACK on a read-only stream: %v, want PERMISSION_DENIED", err)
				}
				break
			}
		}
	}

	st, err := op.GetStatus(context.Background(), &configv1.GetStatusRequest{IncludeResources: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st.GetCurrent().GetResources().GetCertificates() {
		if bytes.Contains(c.GetPrivateKeyPem(), []byte("PRIVATE KEY")) {
			t.Fatalf("GetStatus returned the private key of %s", c.GetName())
		}
	}
	// Both streams used the same pusher id: only the pusher's was recorded.
	if len(st.GetPushers()) != 1 || st.GetPushers()[0].GetApplied() != nil && st.GetPushers()[0].GetApplied().GetVersion() == 0 {
		t.Fatalf("pushers %v, want only the pusher", st.GetPushers())
	}
}

// docs/design.md, "Who may do what": a client that declares data plane NONE (sluicectl
// config --watch) follows the stream read-only whatever its access. It receives every
// version, is never listed as a pusher (not while connected, not after), and an ACK from it
// ends its stream with FAILED_PRECONDITION.
func TestFollowerOfDataPlaneNoneIsNeverAPusher(t *testing.T) {
	stopping := make(chan struct{})
	defer close(stopping)
	s, err := New(Config{Logger: hclog.NewNullLogger(), Stopping: stopping})
	if err != nil {
		t.Fatal(err)
	}
	full := startAs(t, s, identity.Full)
	src := &source{epoch: "e1"}
	src.first(s)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := full.StreamConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Hello{Hello: &configv1.Hello{
		PusherId: "sluicectl-follower", DataPlane: configv1.DataPlaneKind_DATA_PLANE_KIND_NONE}}}); err != nil {
		t.Fatal(err)
	}
	cl := &client{t: t, stream: stream}
	cl.readUntil(src.version)

	st, err := full.GetStatus(context.Background(), &configv1.GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.GetPushers()) != 0 {
		t.Fatalf("pushers %v while only a follower is connected, want none", st.GetPushers())
	}
	if err := stream.Send(&configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Ack{Ack: &configv1.Ack{Config: &configv1.ConfigRef{
		Epoch: cl.chain.Version.GetEpoch(), Version: cl.chain.Version.GetVersion(), Hash: cl.chain.Version.GetHash()}}}}); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := stream.Recv()
		if err == nil {
			continue
		}
		if status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("an ACK from a follower: %v, want FAILED_PRECONDITION", err)
		}
		break
	}
	if st, err = full.GetStatus(context.Background(), &configv1.GetStatusRequest{}); err != nil || len(st.GetPushers()) != 0 {
		t.Fatalf("pushers %v (%v) after the follower left, want none", st.GetPushers(), err)
	}
}
