package contract

import (
	"errors"
	"fmt"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// ErrBrokenStream is wrapped by every error of Assembler: the stream broke the rules of a
// complete state sent in chunks. No Resync repairs that (the sender does not know where it
// went wrong): the receiver applies nothing of it and drops the stream.
var ErrBrokenStream = errors.New("broken config stream")

// Assembler puts a complete state sent in chunks (ConfigStart, ConfigChunks, ConfigEnd)
// back together into the Config it stands for, so that a receiver handles the state only
// when it is whole. It checks the sequence: nothing but heartbeats between the start and
// the end, every chunk of the start's epoch and version in order, no more entries than the
// start announced, and exactly those at the end. It does not check the state hash: the
// receiver does that on the Config, as on a Config sent whole. The zero value is ready; use
// one per stream.
type Assembler struct {
	start *configv1.ConfigStart // nil when no state is being assembled
	res   *configv1.Resources
	next  uint32 // index of the next chunk
	// Chunks is how many chunks the last state assembled took, for logs.
	Chunks int
}

// Take takes one message of a config stream. It returns the message to handle: m itself
// when m is not part of a chunked state, nil while a state is being assembled, and the
// assembled Config at its end. On an error (wrapping ErrBrokenStream) the state being
// assembled is dropped.
func (a *Assembler) Take(m *configv1.StreamConfigResponse) (*configv1.StreamConfigResponse, error) {
	out, err := a.take(m)
	if err != nil {
		a.start, a.res = nil, nil
		return nil, fmt.Errorf("%w: %v", ErrBrokenStream, err)
	}
	return out, nil
}

func (a *Assembler) take(m *configv1.StreamConfigResponse) (*configv1.StreamConfigResponse, error) {
	switch msg := m.GetMessage().(type) {
	case *configv1.StreamConfigResponse_ConfigStart:
		if a.start != nil {
			return nil, fmt.Errorf("a start of version %d while version %d is being assembled", msg.ConfigStart.GetVersion(), a.start.GetVersion())
		}
		a.start, a.res, a.next = msg.ConfigStart, &configv1.Resources{}, 0
		return nil, nil
	case *configv1.StreamConfigResponse_ConfigChunk:
		return nil, a.chunk(msg.ConfigChunk)
	case *configv1.StreamConfigResponse_ConfigEnd:
		return a.end(msg.ConfigEnd)
	case *configv1.StreamConfigResponse_Heartbeat:
		return m, nil
	}
	if a.start != nil {
		return nil, fmt.Errorf("a %s while version %d is being assembled", kindOf(m), a.start.GetVersion())
	}
	if m.GetConfig() != nil {
		a.Chunks = 0
	}
	return m, nil
}

func (a *Assembler) chunk(c *configv1.ConfigChunk) error {
	s := a.start
	switch {
	case s == nil:
		return fmt.Errorf("a chunk of version %d without a start", c.GetVersion())
	case c.GetEpoch() != s.GetEpoch() || c.GetVersion() != s.GetVersion():
		return fmt.Errorf("a chunk of version %s/%d while version %s/%d is being assembled", c.GetEpoch(), c.GetVersion(), s.GetEpoch(), s.GetVersion())
	case c.GetIndex() != a.next:
		return fmt.Errorf("chunk %d of version %d where chunk %d is due", c.GetIndex(), s.GetVersion(), a.next)
	case a.next >= s.GetChunks():
		return fmt.Errorf("chunk %d of version %d, which was announced with %d chunks", c.GetIndex(), s.GetVersion(), s.GetChunks())
	}
	r := c.GetResources()
	a.res.VirtualHosts = append(a.res.VirtualHosts, r.GetVirtualHosts()...)
	a.res.Backends = append(a.res.Backends, r.GetBackends()...)
	a.res.Certificates = append(a.res.Certificates, r.GetCertificates()...)
	a.res.Findings = append(a.res.Findings, r.GetFindings()...)
	if err := a.within(false); err != nil {
		return err
	}
	a.next++
	return nil
}

// within checks the entries assembled against the start's counts: never more, and, at the
// end, exactly as many.
func (a *Assembler) within(end bool) error {
	s := a.start
	for _, c := range []struct {
		what      string
		got, want uint64
	}{
		{"virtual hosts", uint64(len(a.res.GetVirtualHosts())), s.GetVirtualHosts()},
		{"backends", uint64(len(a.res.GetBackends())), s.GetBackends()},
		{"certificates", uint64(len(a.res.GetCertificates())), s.GetCertificates()},
		{"findings", uint64(len(a.res.GetFindings())), s.GetFindings()},
	} {
		if c.got > c.want || end && c.got != c.want {
			return fmt.Errorf("version %d carried %d %s, announced %d", s.GetVersion(), c.got, c.what, c.want)
		}
	}
	return nil
}

func (a *Assembler) end(e *configv1.ConfigEnd) (*configv1.StreamConfigResponse, error) {
	s := a.start
	switch {
	case s == nil:
		return nil, fmt.Errorf("an end of version %d without a start", e.GetVersion())
	case e.GetEpoch() != s.GetEpoch() || e.GetVersion() != s.GetVersion() || e.GetHash() != s.GetHash():
		return nil, fmt.Errorf("an end of version %s/%d hash %.12s closing version %s/%d hash %.12s",
			e.GetEpoch(), e.GetVersion(), e.GetHash(), s.GetEpoch(), s.GetVersion(), s.GetHash())
	case a.next != s.GetChunks():
		return nil, fmt.Errorf("version %d ended after %d chunks, announced %d", s.GetVersion(), a.next, s.GetChunks())
	}
	if err := a.within(true); err != nil {
		return nil, err
	}
	c := &configv1.Config{Epoch: s.GetEpoch(), Version: s.GetVersion(), Hash: s.GetHash(),
		WatcherEpoch: s.GetWatcherEpoch(), WatcherRevision: s.GetWatcherRevision(), Resources: a.res}
	a.Chunks = int(a.next)
	a.start, a.res = nil, nil
	return &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Config{Config: c}}, nil
}

// Assembling reports whether a chunked state has started and not ended.
func (a *Assembler) Assembling() bool { return a.start != nil }

func kindOf(m *configv1.StreamConfigResponse) string {
	switch m.GetMessage().(type) {
	case *configv1.StreamConfigResponse_Config:
		return "complete state"
	case *configv1.StreamConfigResponse_Delta:
		return "delta"
	case *configv1.StreamConfigResponse_InitialSyncComplete:
		return "marker"
	case nil:
		return "message of a kind unknown to this receiver"
	}
	return fmt.Sprintf("%T", m.GetMessage())
}
