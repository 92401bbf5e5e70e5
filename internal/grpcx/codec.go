package grpcx

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
)

// pooledBufferMax is the largest message buffer kept for reuse: gRPC's own pool keeps
// buffers of every size, and one above its largest tier (1 MiB) goes into a sync.Pool,
// which frees it only at the second garbage collection after. A process in steady state
// collects minutes apart (internal/cli, SteadyGCPercent), so the buffer of each large
// message it sent or received (a complete state, a full status report, a config an
// operator dumped: tens of MB at 100k Ingresses) stayed live that long, one per size and
// direction (docs/design.md, "Cold start").
const pooledBufferMax = 1 << 20

// boundedPool is gRPC's default buffer pool for buffers up to pooledBufferMax and no pool
// above it: a larger buffer is allocated for its message and is garbage once freed.
type boundedPool struct{ small mem.BufferPool }

func (p boundedPool) Get(n int) *[]byte {
	if n > pooledBufferMax {
		b := make([]byte, n)
		return &b
	}
	return p.small.Get(n)
}

func (p boundedPool) Put(b *[]byte) {
	if cap(*b) > pooledBufferMax {
		return
	}
	p.small.Put(b)
}

// protoCodec is gRPC's protobuf codec with boundedPool in place of the process-wide default
// pool, which its codec uses whatever the server's or the connection's options say.
type protoCodec struct{ pool mem.BufferPool }

// codec is what every server and connection built here encodes messages with.
var codec encoding.CodecV2 = protoCodec{pool: boundedPool{small: mem.DefaultBufferPool()}}

func (protoCodec) Name() string { return "proto" }

func (c protoCodec) Marshal(v any) (mem.BufferSlice, error) {
	m := messageOf(v)
	if m == nil {
		return nil, fmt.Errorf("proto: cannot marshal %T, not a proto.Message", v)
	}
	size := proto.Size(m)
	// UseCachedSize reuses the Size just computed; the message is not changed meanwhile.
	opts := proto.MarshalOptions{UseCachedSize: true}
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := c.pool.Get(size)
	if _, err := opts.MarshalAppend((*buf)[:0], m); err != nil {
		c.pool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, c.pool)}, nil
}

func (c protoCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m := messageOf(v)
	if m == nil {
		return fmt.Errorf("proto: cannot unmarshal into %T, not a proto.Message", v)
	}
	buf := data.MaterializeToBuffer(c.pool)
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

func messageOf(v any) proto.Message {
	switch m := v.(type) {
	case proto.Message:
		return m
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(m)
	}
	return nil
}
