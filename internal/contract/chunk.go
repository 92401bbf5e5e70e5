package contract

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// ChunkTarget is the size a chunk aims at when the message limit allows more, and
// ChunkMaxEntries the most entries one carries: a receiver decodes one message at a time,
// and a smaller one is sent and decoded sooner. A resource larger than ChunkTarget (but
// within the limit) travels in a chunk of its own.
const (
	ChunkTarget     = 4 << 20
	ChunkMaxEntries = 4096
)

// TooLargeError is Chunk's error when one resource alone does not fit in a message: a
// complete state holding it cannot be sent. Sources are the objects it was built from.
type TooLargeError struct {
	Type    Type
	Key     string
	Size    int
	Limit   int
	Sources []*configv1.ObjectRef
}

func (e *TooLargeError) Error() string {
	var objs []string
	for _, o := range e.Sources {
		objs = append(objs, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	return fmt.Sprintf("%s %q is %d bytes, more than one message may carry (%d); built from %s",
		e.Type, e.Key, e.Size, e.Limit, strings.Join(objs, ", "))
}

// Chunk returns the messages that carry c, a complete state, on a stream whose messages may
// be limit bytes long (encoded): c whole when it fits and, for a receiver that takes chunks
// (Hello.takes_chunks), is at most ChunkTarget; else a ConfigStart, ConfigChunks that each
// fit (at most ChunkTarget bytes and ChunkMaxEntries entries, unless one entry alone is
// larger) and a ConfigEnd. Entries keep c's order, each in exactly one chunk. A resource
// that alone exceeds the limit is a *TooLargeError.
func Chunk(c *configv1.Config, limit int, takesChunks bool) ([]*configv1.StreamConfigResponse, error) {
	whole := &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Config{Config: c}}
	wholeAtMost := limit
	if takesChunks {
		wholeAtMost = min(limit, ChunkTarget)
	}
	if proto.Size(whole) <= wholeAtMost {
		return []*configv1.StreamConfigResponse{whole}, nil
	}
	// What a chunk message takes beside its entries, at most: the response's field, the
	// chunk's epoch, version and index, and its resources' field.
	overhead := 1 + protowire.SizeVarint(math.MaxUint32) +
		1 + protowire.SizeBytes(len(c.GetEpoch())) + 1 + protowire.SizeVarint(math.MaxUint64) + 1 + protowire.SizeVarint(math.MaxUint32) +
		1 + protowire.SizeVarint(math.MaxUint32)
	hard := limit - overhead
	soft := min(hard, ChunkTarget-overhead)

	var chunks []*configv1.Resources
	cur, size, n := &configv1.Resources{}, 0, 0
	add := func(t Type, key string, m proto.Message, sources func() []*configv1.ObjectRef, put func(*configv1.Resources)) error {
		es := 1 + protowire.SizeBytes(proto.Size(m)) // every Resources field number takes one byte
		if es > hard {
			return &TooLargeError{Type: t, Key: key, Size: es, Limit: limit, Sources: sources()}
		}
		if n > 0 && (size+es > soft || n >= ChunkMaxEntries) {
			chunks, cur, size, n = append(chunks, cur), &configv1.Resources{}, 0, 0
		}
		put(cur)
		size += es
		n++
		return nil
	}
	r := c.GetResources()
	for _, vh := range r.GetVirtualHosts() {
		if err := add(VirtualHosts, vh.GetHostname(), vh, func() []*configv1.ObjectRef { return routeSources(vh) },
			func(x *configv1.Resources) { x.VirtualHosts = append(x.VirtualHosts, vh) }); err != nil {
			return nil, err
		}
	}
	for _, b := range r.GetBackends() {
		if err := add(Backends, b.GetName(), b, func() []*configv1.ObjectRef { return []*configv1.ObjectRef{b.GetService()} },
			func(x *configv1.Resources) { x.Backends = append(x.Backends, b) }); err != nil {
			return nil, err
		}
	}
	for _, ce := range r.GetCertificates() {
		if err := add(Certificates, ce.GetName(), ce, func() []*configv1.ObjectRef { return []*configv1.ObjectRef{ce.GetSource()} },
			func(x *configv1.Resources) { x.Certificates = append(x.Certificates, ce) }); err != nil {
			return nil, err
		}
	}
	for _, f := range r.GetFindings() {
		if err := add(Findings, KeyOfObject(f.GetObject()), f, func() []*configv1.ObjectRef { return []*configv1.ObjectRef{f.GetObject()} },
			func(x *configv1.Resources) { x.Findings = append(x.Findings, f) }); err != nil {
			return nil, err
		}
	}
	if n > 0 {
		chunks = append(chunks, cur)
	}

	out := make([]*configv1.StreamConfigResponse, 0, len(chunks)+2)
	out = append(out, &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_ConfigStart{ConfigStart: &configv1.ConfigStart{
		Epoch: c.GetEpoch(), Version: c.GetVersion(), Hash: c.GetHash(), WatcherEpoch: c.GetWatcherEpoch(), WatcherRevision: c.GetWatcherRevision(),
		Chunks: uint32(len(chunks)), VirtualHosts: uint64(len(r.GetVirtualHosts())), Backends: uint64(len(r.GetBackends())),
		Certificates: uint64(len(r.GetCertificates())), Findings: uint64(len(r.GetFindings())),
	}}})
	for i, res := range chunks {
		out = append(out, &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_ConfigChunk{ConfigChunk: &configv1.ConfigChunk{
			Epoch: c.GetEpoch(), Version: c.GetVersion(), Index: uint32(i), Resources: res}}})
	}
	out = append(out, &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_ConfigEnd{ConfigEnd: &configv1.ConfigEnd{
		Epoch: c.GetEpoch(), Version: c.GetVersion(), Hash: c.GetHash()}}})
	return out, nil
}

// routeSources are the distinct objects a virtual host's routes came from, sorted.
func routeSources(vh *configv1.VirtualHost) []*configv1.ObjectRef {
	seen := map[string]*configv1.ObjectRef{}
	for _, rt := range vh.GetRoutes() {
		seen[KeyOfObject(rt.GetSource())] = rt.GetSource()
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*configv1.ObjectRef, 0, len(keys))
	for _, k := range keys {
		out = append(out, seen[k])
	}
	return out
}
