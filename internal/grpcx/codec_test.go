package grpcx

import (
	"bytes"
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"unsafe"
	"weak"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// largeMessage is a message whose serialisation is above pooledBufferMax.
func largeMessage() *wrapperspb.BytesValue {
	return wrapperspb.Bytes(bytes.Repeat([]byte("x"), 3*pooledBufferMax))
}

// recordingPool records the buffers above pooledBufferMax it hands out.
type recordingPool struct {
	mem.BufferPool
	large []weak.Pointer[byte]
}

func (p *recordingPool) Get(n int) *[]byte {
	b := p.BufferPool.Get(n)
	if n > pooledBufferMax {
		p.large = append(p.large, weak.Make(unsafe.SliceData(*b)))
	}
	return b
}

// Cold start: the buffer of a message above pooledBufferMax is garbage as soon as gRPC frees
// it, both for a message sent (Marshal) and one received in several buffers (Unmarshal):
// kept in a pool, it stayed live for minutes of steady state.
func TestLargeMessageBuffersAreNotKept(t *testing.T) {
	rec := &recordingPool{BufferPool: codec.(protoCodec).pool}
	c := protoCodec{pool: rec}
	sent, err := c.Marshal(largeMessage())
	if err != nil {
		t.Fatal(err)
	}
	// What a receiver gets: the same bytes in frames of 16 KiB.
	var frames mem.BufferSlice
	for b := sent.Materialize(); len(b) > 0; {
		n := min(len(b), 16<<10)
		frames = append(frames, mem.SliceBuffer(bytes.Clone(b[:n])))
		b = b[n:]
	}
	sent.Free()
	var got wrapperspb.BytesValue
	if err := c.Unmarshal(frames, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.GetValue()) != 3*pooledBufferMax {
		t.Fatalf("received %d bytes, want %d", len(got.GetValue()), 3*pooledBufferMax)
	}
	if len(rec.large) != 2 {
		t.Fatalf("%d large buffers taken from the pool, want 2 (one to send, one to receive)", len(rec.large))
	}
	runtime.GC()
	for i, w := range rec.large {
		if w.Value() != nil {
			t.Fatalf("large buffer %d (of %d) is still live after one collection", i+1, len(rec.large))
		}
	}
}

// countingCodec counts what it encodes and decodes.
type countingCodec struct {
	encoding.CodecV2
	marshalled, unmarshalled atomic.Int32
}

func (c *countingCodec) Marshal(v any) (mem.BufferSlice, error) {
	c.marshalled.Add(1)
	return c.CodecV2.Marshal(v)
}

func (c *countingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	c.unmarshalled.Add(1)
	return c.CodecV2.Unmarshal(data, v)
}

// fakeWatch sends one large message on every Watch stream.
type fakeWatch struct {
	watchv1.UnimplementedWatchServiceServer
	msg *watchv1.WatchResponse
}

func (f fakeWatch) Watch(_ *watchv1.WatchRequest, s watchv1.WatchService_WatchServer) error {
	return s.Send(f.msg)
}

// Every server and connection built here use the codec, and a message far above
// pooledBufferMax travels whole.
func TestServersAndConnectionsUseTheCodec(t *testing.T) {
	counting := &countingCodec{CodecV2: codec}
	prev := codec
	codec = counting
	t.Cleanup(func() { codec = prev })

	msg := &watchv1.WatchResponse{Epoch: "e", Event: &watchv1.WatchResponse_Upsert{Upsert: &watchv1.Upsert{
		Object: &watchv1.Object{Name: "big", Raw: bytes.Repeat([]byte("y"), 3*pooledBufferMax)}}}}
	_, addr := serve(t, ServerConfig{}, func(s *grpc.Server) { watchv1.RegisterWatchServiceServer(s, fakeWatch{msg: msg}) })
	conn, err := Dial(addr, ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := watchv1.NewWatchServiceClient(conn).Watch(context.Background(), &watchv1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, msg) {
		t.Fatal("the large message arrived changed")
	}
	// Client: the request marshalled and the response unmarshalled; server: the reverse.
	if m, u := counting.marshalled.Load(), counting.unmarshalled.Load(); m < 2 || u < 2 {
		t.Fatalf("the codec marshalled %d and unmarshalled %d messages, want at least 2 each", m, u)
	}
}
