package configserver

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/identity"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// bigSource is a source whose complete state is many times the message limit: n hosts, each
// with a certificate (and its private key).
func bigSource(s *Server, n int) *source {
	src := &source{epoch: "e1", version: 1, st: contract.NewState()}
	for i := range n {
		putHostWithCert(src.st, i)
	}
	src.st.TakeDelta()
	s.NewEpoch(src.epoch)
	s.Publish(&configv1.Config{Epoch: src.epoch, Version: 1, Hash: src.st.Hash(), Resources: src.st.Resources()}, src.st.Clone())
	return src
}

func putHostWithCert(st *contract.State, i int) {
	name := fmt.Sprintf("h%04d.example.com", i)
	c := cert(name)
	c.CertificatePem = append(c.CertificatePem, bytes.Repeat([]byte{'c'}, 200)...)
	st.Put(contract.Certificates, name, c)
	st.Put(contract.VirtualHosts, name, &configv1.VirtualHost{Hostname: name, Certificate: name,
		Routes: []*configv1.Route{{Name: "r", Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"}}}})
}

// No single-message ceiling: a complete state larger than the message limit reaches a new
// stream, a pusher's and an operator's, in chunks that each fit the limit (the server sends
// with gRPC's limit set to it, so a message over it would end the stream), and verifies
// whole (the operator's without private keys, its hashes of what it gets). A delta larger
// than the limit is replaced by the complete state, again in chunks; a small one stays a
// delta.
func TestCompleteStateOverTheLimitTravelsInChunks(t *testing.T) {
	const limit = 8 << 10
	stopping := make(chan struct{})
	t.Cleanup(func() { close(stopping) })
	s, err := New(Config{Logger: hclog.NewNullLogger(), Stopping: stopping, MaxMessageSize: limit})
	if err != nil {
		t.Fatal(err)
	}
	src := bigSource(s, 200)
	if size := len(mustMarshal(t, src.st.Resources())); size < 8*limit {
		t.Fatalf("the state is %d bytes, want at least 8 times the limit", size)
	}
	pusherAddr := serve(t, s, grpc.MaxSendMsgSize(limit))
	op := startAs(t, s, identity.Redacted)

	p := pusherStream(t, pusherAddr, "p")
	o := follow(t, op)
	for _, c := range []*client{p, o} {
		c.readUntil(1)
		if c.chunks < 8 || c.fulls != 1 || c.largest > limit {
			t.Fatalf("the complete state came in %d chunks (%d complete states), the largest message %d bytes; want at least 8 chunks of at most %d", c.chunks, c.fulls, c.largest, limit)
		}
	}
	if p.chain.State.Hash() != src.st.Hash() {
		t.Fatal("the pusher holds another state than the source")
	}
	for _, c := range o.chain.State.Resources().GetCertificates() {
		if bytes.Contains(c.GetPrivateKeyPem(), []byte("PRIVATE KEY")) {
			t.Fatalf("the operator's chunks carry the private key of %s", c.GetName())
		}
	}

	// Version 2 adds 100 hosts: a delta over the limit, so the complete state again.
	for i := 200; i < 300; i++ {
		putHostWithCert(src.st, i)
	}
	d := src.st.TakeDelta()
	src.version++
	d.Epoch, d.Version, d.BaseVersion, d.Hash = src.epoch, src.version, 1, src.st.Hash()
	s.PublishDelta(d, contract.Digests{})
	for _, c := range []*client{p, o} {
		before := c.chunks
		c.readUntil(2)
		if c.fulls != 2 || c.deltas != 0 || c.chunks-before < 12 || c.largest > limit {
			t.Fatalf("version 2 (a delta over the limit) came as %d complete states, %d deltas, %d chunks; want the complete state in chunks", c.fulls-1, c.deltas, c.chunks-before)
		}
	}
	// Version 3 changes one host: a delta.
	src.next(s, 0, 1000)
	for _, c := range []*client{p, o} {
		c.readUntil(3)
		if c.deltas != 1 {
			t.Fatalf("version 3 (a small change) came as %d deltas, want 1", c.deltas)
		}
	}
	if p.chain.State.Hash() != src.st.Hash() {
		t.Fatal("the pusher holds another state than the source")
	}
}

// Cold start: a complete state larger than one chunk but within the message limit reaches a
// client that takes chunks in chunks (neither end holds it as one message, and the client
// decodes a part while the rest is on its way), and one from before chunks whole, as it
// always did.
func TestStateOverAChunkTravelsInChunksToAClientThatTakesThem(t *testing.T) {
	stopping := make(chan struct{})
	t.Cleanup(func() { close(stopping) })
	s, err := New(Config{Logger: hclog.NewNullLogger(), Stopping: stopping})
	if err != nil {
		t.Fatal(err)
	}
	src := bigSource(s, 15000)
	size := len(mustMarshal(t, src.st.Resources()))
	if size <= contract.ChunkTarget || size > s.cfg.MaxMessageSize/2 {
		t.Fatalf("the state is %d bytes, want over one chunk (%d) and well within the limit (%d)", size, contract.ChunkTarget, s.cfg.MaxMessageSize)
	}
	addr := serve(t, s)
	takes := helloStream(t, addr, &configv1.Hello{PusherId: "takes", TakesChunks: true})
	before := helloStream(t, addr, &configv1.Hello{PusherId: "before"})
	takes.readUntil(1)
	before.readUntil(1)
	if takes.chunks < 2 || takes.largest > contract.ChunkTarget {
		t.Fatalf("to a client that takes chunks: %d chunks, the largest message %d bytes; want chunks of at most %d", takes.chunks, takes.largest, contract.ChunkTarget)
	}
	if before.chunks != 0 || before.largest < size {
		t.Fatalf("to a client from before chunks: %d chunks, the largest message %d bytes; want the state whole (%d bytes)", before.chunks, before.largest, size)
	}
	for _, c := range []*client{takes, before} {
		if c.chain.State.Hash() != src.st.Hash() {
			t.Fatal("a client holds another state than the source")
		}
	}
}

// A resource that alone exceeds the limit cannot be sent in any chunk: the state is not
// sent, the log names the resource and the objects it was built from, and the stream stays
// (the next version that fits reaches it).
func TestResourceOverTheLimitIsNamedWithItsObjects(t *testing.T) {
	const limit = 8 << 10
	stopping := make(chan struct{})
	t.Cleanup(func() { close(stopping) })
	m := newRecorder()
	logs := &lockedBuffer{}
	s, err := New(Config{Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info}), Stopping: stopping, Metrics: m, MaxMessageSize: limit})
	if err != nil {
		t.Fatal(err)
	}
	src := bigSource(s, 100)
	big := &configv1.VirtualHost{Hostname: "big.example.com", Routes: []*configv1.Route{
		{Name: strings.Repeat("x", limit), Source: &configv1.ObjectRef{Kind: "Ingress", Namespace: "shop", Name: "huge"}}}}
	src.st.Put(contract.VirtualHosts, big.GetHostname(), big)
	src.st.TakeDelta()
	s.Publish(&configv1.Config{Epoch: src.epoch, Version: 2, Hash: src.st.Hash(), Resources: src.st.Resources()}, src.st.Clone())
	p := pusherStream(t, serve(t, s, grpc.MaxSendMsgSize(limit)), "p")
	<-m.tooLarge
	src.version = 2
	src.st.Remove(contract.VirtualHosts, big.GetHostname())
	src.next(s, 0, 1000)
	p.readUntil(3)
	if p.chain.State.Hash() != src.st.Hash() || p.chunks == 0 {
		t.Fatalf("after the version with a resource over the limit, the stream holds %s (in %d chunks), want the source's state in chunks", p.chain.Version, p.chunks)
	}
	for _, want := range []string{`key=big.example.com`, `objects=["Ingress shop/huge"]`, "version=2"} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("the log does not say %s:\n%s", want, logs)
		}
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
