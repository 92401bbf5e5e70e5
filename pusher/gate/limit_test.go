package gate

import (
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// bigSender answers every stream with one config of a given size.
type bigSender struct {
	configv1.UnimplementedConfigServiceServer
	size int
}

func (b bigSender) StreamConfig(stream configv1.ConfigService_StreamConfigServer) error {
	if _, err := stream.Recv(); err != nil {
		return err
	}
	err := stream.Send(&configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Config{Config: &configv1.Config{Epoch: "e1", Version: 1, Hash: strings.Repeat("x", b.size)}}})
	if err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

// recvError is what a pusher with a receive limit of limit gets from a translator that
// sends it a config of size bytes.
func recvError(t *testing.T, size, limit int) error {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	configv1.RegisterConfigServiceServer(gs, bigSender{size: size})
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(limit)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := configv1.NewConfigServiceClient(conn).StreamConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Hello{Hello: &configv1.Hello{PusherId: "p"}}}); err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	if err == nil {
		t.Fatalf("a config of %d bytes was received under a limit of %d", size, limit)
	}
	return err
}

// A config over the pusher's receive limit is recognised from gRPC's own error, with the
// message's size and the limit (the gate then logs both, says what to raise and reconnects
// only after the longest backoff); other RESOURCE_EXHAUSTED ends are not mistaken for it.
func TestConfigOverThePushersLimitIsRecognisedWithSizeAndLimit(t *testing.T) {
	err := recvError(t, 4096, 1024)
	size, limit, ok := messageTooLarge(err)
	if !ok || size <= 4096 || limit != 1024 {
		t.Fatalf("messageTooLarge(%v) = %d, %d, %v; want the size (over 4096) and the limit 1024", err, size, limit, ok)
	}
	for _, other := range []error{
		status.Error(codes.ResourceExhausted, "the pusher stopped reading: a send did not complete within 30s; reconnect"),
		status.Error(codes.Unavailable, "translator is shutting down"),
		context.Canceled,
	} {
		if _, _, ok := messageTooLarge(other); ok {
			t.Fatalf("messageTooLarge(%v) = true, want false", other)
		}
	}
}
