package contract

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// chunkedConfig is a complete state of n hosts, n backends, n/2 certificates and n findings,
// each entry about pad bytes.
func chunkedConfig(n, pad int) *configv1.Config {
	r := &configv1.Resources{}
	p := strings.Repeat("p", pad)
	for i := range n {
		name := fmt.Sprintf("h%05d", i)
		r.VirtualHosts = append(r.VirtualHosts, &configv1.VirtualHost{Hostname: name + ".example.com", Routes: []*configv1.Route{{Name: p}}})
		r.Backends = append(r.Backends, &configv1.Backend{Name: name, Service: &configv1.ObjectRef{Kind: "Service", Namespace: "ns", Name: p}})
		if i%2 == 0 {
			r.Certificates = append(r.Certificates, &configv1.Certificate{Name: name, PrivateKeyPem: []byte(p)})
		}
		r.Findings = append(r.Findings, &configv1.Finding{Object: &configv1.ObjectRef{Kind: "Ingress", Namespace: "ns", Name: name}, Cause: p})
	}
	return &configv1.Config{Epoch: "e1", Version: 7, Hash: Hash(r), WatcherEpoch: "w", WatcherRevision: 42, Resources: r}
}

// Chunk: a state that fits goes whole, and to a client that takes chunks only when it also
// fits one chunk; a larger one in chunks, each within the limit (and the target and entry
// bounds), carrying every entry exactly once in the state's order, the same bytes for the
// same state; the Assembler gives back the same Config.
func TestChunkBoundedBatchesEveryEntryOnceInOrder(t *testing.T) {
	for _, tc := range []struct {
		name       string
		n, pad     int
		limit      int
		takes      bool // the client takes chunks (Hello.takes_chunks)
		wantChunks int  // 0: sent whole
	}{
		{"fits whole", 10, 10, 64 << 10, true, 0},
		{"empty state", 0, 0, 256, true, 0},
		{"small limit", 300, 100, 4 << 10, true, 30},
		{"entry count bound", 5000, 1, 200 << 10, true, 5},
		{"target bound", 300, 20 << 10, 8 << 20, false, 5},
		{"one entry per chunk", 20, 3000, 4 << 10, true, 70},
		// A state over one chunk but within the limit: in chunks to a client that takes
		// them, whole to one from before chunks.
		{"over a chunk, to a client that takes chunks", 300, 20 << 10, 64 << 20, true, 2},
		{"over a chunk, to a client from before chunks", 300, 20 << 10, 64 << 20, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := chunkedConfig(tc.n, tc.pad)
			msgs, err := Chunk(c, tc.limit, tc.takes)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := Chunk(c, tc.limit, tc.takes)
			for i := range msgs {
				a, _ := proto.MarshalOptions{Deterministic: true}.Marshal(msgs[i])
				b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(again[i])
				if string(a) != string(b) {
					t.Fatalf("message %d differs between two runs", i)
				}
			}
			if tc.wantChunks == 0 {
				if len(msgs) != 1 || msgs[0].GetConfig() != c {
					t.Fatalf("got %d messages, want the config whole", len(msgs))
				}
				return
			}
			chunks := len(msgs) - 2
			if chunks < tc.wantChunks {
				t.Fatalf("%d chunks, want at least %d", chunks, tc.wantChunks)
			}
			var asm Assembler
			var got *configv1.Config
			for i, m := range msgs {
				if size := proto.Size(m); size > tc.limit {
					t.Fatalf("message %d is %d bytes, over the limit %d", i, size, tc.limit)
				}
				if ch := m.GetConfigChunk(); ch != nil {
					r := ch.GetResources()
					n := len(r.GetVirtualHosts()) + len(r.GetBackends()) + len(r.GetCertificates()) + len(r.GetFindings())
					if n > ChunkMaxEntries || n > 1 && proto.Size(m) > ChunkTarget {
						t.Fatalf("chunk %d has %d entries, %d bytes", i, n, proto.Size(m))
					}
				}
				out, err := asm.Take(m)
				if err != nil {
					t.Fatal(err)
				}
				if (out != nil) != (i == len(msgs)-1) {
					t.Fatalf("message %d of %d: assembled %v", i, len(msgs), out != nil)
				}
				if out != nil {
					got = out.GetConfig()
				}
			}
			if !proto.Equal(got, c) {
				t.Fatal("the assembled config differs from the one chunked (an entry lost, doubled or moved)")
			}
			if asm.Chunks != chunks {
				t.Fatalf("Chunks = %d, want %d", asm.Chunks, chunks)
			}
		})
	}
}

// One resource over the limit is refused by name, with the objects it was built from.
func TestChunkRefusesAResourceOverTheLimit(t *testing.T) {
	c := chunkedConfig(50, 10)
	big := &configv1.VirtualHost{Hostname: "zz.example.com", Routes: []*configv1.Route{
		{Name: strings.Repeat("x", 5000), Source: &configv1.ObjectRef{Kind: "Ingress", Namespace: "shop", Name: "b"}},
		{Name: "y", Source: &configv1.ObjectRef{Kind: "HTTPRoute", Namespace: "shop", Name: "a"}},
		{Name: "z", Source: &configv1.ObjectRef{Kind: "Ingress", Namespace: "shop", Name: "b"}}}}
	c.Resources.VirtualHosts = append(c.Resources.VirtualHosts, big)
	_, err := Chunk(c, 4096, true)
	var tl *TooLargeError
	if !errors.As(err, &tl) {
		t.Fatalf("Chunk: %v, want a TooLargeError", err)
	}
	if tl.Type != VirtualHosts || tl.Key != "zz.example.com" || len(tl.Sources) != 2 || !strings.Contains(err.Error(), "HTTPRoute shop/a, Ingress shop/b") {
		t.Fatalf("TooLargeError %+v: %v", tl, err)
	}
}

// The Assembler takes a well-formed sequence (heartbeats may come between its messages) and
// refuses every malformed one: nothing is assembled from it.
func TestAssemblerRefusesMalformedSequences(t *testing.T) {
	c := chunkedConfig(60, 100)
	msgs, err := Chunk(c, 4096, true)
	if err != nil {
		t.Fatal(err)
	}
	start, chunks, end := msgs[0], msgs[1:len(msgs)-1], msgs[len(msgs)-1]
	seq := func(parts ...any) []*configv1.StreamConfigResponse {
		var out []*configv1.StreamConfigResponse
		for _, p := range parts {
			switch x := p.(type) {
			case *configv1.StreamConfigResponse:
				out = append(out, x)
			case []*configv1.StreamConfigResponse:
				out = append(out, x...)
			}
		}
		return out
	}
	edit := func(m *configv1.StreamConfigResponse, f func(*configv1.StreamConfigResponse)) *configv1.StreamConfigResponse {
		m = proto.Clone(m).(*configv1.StreamConfigResponse)
		f(m)
		return m
	}
	hb := &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Heartbeat{Heartbeat: &configv1.Heartbeat{}}}
	delta := &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Delta{Delta: &configv1.ConfigDelta{Epoch: "e1", Version: 8, BaseVersion: 7}}}
	marker := &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_InitialSyncComplete{InitialSyncComplete: &configv1.InitialSyncComplete{Epoch: "e2", Version: 1}}}
	whole := &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Config{Config: c}}
	for _, tc := range []struct {
		name    string
		msgs    []*configv1.StreamConfigResponse
		wantErr string // "" : the config is assembled at the last message
	}{
		{"well formed", seq(start, chunks, end), ""},
		{"heartbeats between", seq(start, chunks[:2], hb, chunks[2:], hb, end), ""},
		{"chunk without a start", seq(chunks[0]), "without a start"},
		{"end without a start", seq(end), "without a start"},
		{"a second start", seq(start, chunks[:1], start), "while version 7 is being assembled"},
		{"chunk of another version", seq(start, edit(chunks[0], func(m *configv1.StreamConfigResponse) { m.GetConfigChunk().Version = 6 })), "a chunk of version e1/6"},
		{"chunk of another epoch", seq(start, edit(chunks[0], func(m *configv1.StreamConfigResponse) { m.GetConfigChunk().Epoch = "e0" })), "a chunk of version e0/7"},
		{"chunk lost", seq(start, chunks[1:]), "chunk 1 of version 7 where chunk 0 is due"},
		{"chunk twice", seq(start, chunks[0], chunks[0]), "chunk 0 of version 7 where chunk 1 is due"},
		{"more chunks than announced", seq(edit(start, func(m *configv1.StreamConfigResponse) { m.GetConfigStart().Chunks = 2 }), chunks[:3]), "announced with 2 chunks"},
		{"more entries than announced", seq(edit(start, func(m *configv1.StreamConfigResponse) { m.GetConfigStart().VirtualHosts = 3 }), chunks), "announced 3"},
		{"fewer entries than announced", seq(edit(start, func(m *configv1.StreamConfigResponse) { m.GetConfigStart().Findings++ }), chunks, end), "findings, announced 61"},
		{"end before the last chunk", seq(start, chunks[:len(chunks)-1], end), "announced"},
		{"end with another hash", seq(start, chunks, edit(end, func(m *configv1.StreamConfigResponse) { m.GetConfigEnd().Hash = "00" })), "an end of version e1/7 hash 00"},
		{"a delta mid-state", seq(start, chunks[:1], delta), "a delta while version 7 is being assembled"},
		{"a marker mid-state", seq(start, chunks[:1], marker), "a marker while"},
		{"a whole config mid-state", seq(start, chunks[:1], whole), "a complete state while"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asm Assembler
			var err error
			var out *configv1.StreamConfigResponse
			for i, m := range tc.msgs {
				out, err = asm.Take(m)
				if err != nil {
					break
				}
				if out != nil && out.GetConfig() != nil && i != len(tc.msgs)-1 {
					t.Fatalf("a config assembled at message %d of %d", i, len(tc.msgs))
				}
			}
			if tc.wantErr == "" {
				if err != nil || !proto.Equal(out.GetConfig(), c) {
					t.Fatalf("err %v; assembled the config: %v", err, out.GetConfig() != nil)
				}
				return
			}
			if !errors.Is(err, ErrBrokenStream) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want ErrBrokenStream saying %q", err, tc.wantErr)
			}
			if out != nil || asm.Assembling() {
				t.Fatal("something was assembled from a malformed sequence")
			}
		})
	}
}
