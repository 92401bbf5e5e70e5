package contract

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// fuzzInput turns the fuzzer's bytes into choices; when the bytes run out every choice is 0.
type fuzzInput struct{ b []byte }

func (in *fuzzInput) byte() byte {
	if len(in.b) == 0 {
		return 0
	}
	c := in.b[0]
	in.b = in.b[1:]
	return c
}

func (in *fuzzInput) intn(n int) int          { return int(in.byte()) % n }
func (in *fuzzInput) done() bool              { return len(in.b) == 0 }
func (in *fuzzInput) pick(xs []string) string { return xs[in.intn(len(xs))] }

// Small pools of keys, so that generated states and deltas collide: keys held and not held,
// the catch-all host, an empty name, findings keys with slashes and UIDs.
var (
	fHosts    = []string{"", "a.example.com", "b.example.com", "*.example.com", "c.example.com"}
	fBackends = []string{"", "ns/web:80", "ns/api:81", "other/web:80"}
	fCerts    = []string{"", "ns/tls", "ns/tls-2"}
	fKinds    = []string{"Ingress", "Service", "", "a/b"}
	fNames    = []string{"x", "y", "", "y/z"}
	fHashes   = []string{"", "0", strings.Repeat("0", 64)}
)

func (in *fuzzInput) route(i int) *configv1.Route {
	rt := &configv1.Route{Name: fmt.Sprintf("r%d", i), Path: &configv1.PathMatch{
		Type: configv1.PathMatchType(in.intn(4)), Value: in.pick([]string{"/", "/api", "/v[0-9]+", "/a("})}}
	for range in.intn(3) {
		rt.Backends = append(rt.Backends, &configv1.WeightedBackend{Backend: in.pick(fBackends), Weight: uint32(in.intn(3))})
	}
	if in.intn(4) == 0 {
		rt.Timeout = durationpb.New(1e9 * 5)
	}
	return rt
}

func (in *fuzzInput) vhost(host string) *configv1.VirtualHost {
	vh := &configv1.VirtualHost{Hostname: host, Certificate: in.pick(fCerts)}
	for i := range in.intn(3) {
		vh.Routes = append(vh.Routes, in.route(i))
	}
	return vh
}

func (in *fuzzInput) backend(name string) *configv1.Backend {
	b := &configv1.Backend{Name: name, ServicePort: int32(in.intn(3))}
	for range in.intn(3) {
		b.Endpoints = append(b.Endpoints, &configv1.Endpoint{Address: fmt.Sprintf("10.0.0.%d", in.intn(4)), Port: 8080, Ready: in.intn(2) == 0})
	}
	return b
}

func (in *fuzzInput) cert(name string) *configv1.Certificate {
	return &configv1.Certificate{Name: name, CertificatePem: []byte{in.byte()}, PrivateKeyPem: []byte("key"), DnsNames: []string{in.pick(fHosts)}}
}

func (in *fuzzInput) object() *configv1.ObjectRef {
	o := &configv1.ObjectRef{Kind: in.pick(fKinds), Namespace: in.pick([]string{"a", "", "b"}), Name: in.pick(fNames)}
	if in.intn(4) == 0 {
		o.Uid = "uid"
	}
	return o
}

// findings is a group of findings of o in canonical form when canonical is set, else as the
// bytes say (another object in the group, a UID, any order).
func (in *fuzzInput) findings(o *configv1.ObjectRef, canonical bool) *configv1.ObjectFindings {
	g := &configv1.ObjectFindings{Object: o}
	for i := range 1 + in.intn(3) {
		f := &configv1.Finding{Object: o, Field: in.pick([]string{"spec", "metadata", ""}), Cause: fmt.Sprint(i % 2), Severity: configv1.FindingSeverity(in.intn(3))}
		if !canonical && in.intn(4) == 0 {
			f.Object = in.object()
		}
		g.Findings = append(g.Findings, f)
	}
	if canonical {
		g.Object = ObjectOfKey(KeyOfObject(o))
		SortFindings(g.Findings)
	}
	return g
}

// state builds a state as a sender would (keys match their resources, findings canonical).
func (in *fuzzInput) state() *State {
	s := NewState()
	for range in.intn(8) {
		switch Type(in.intn(int(numTypes))) {
		case VirtualHosts:
			h := in.pick(fHosts)
			s.Put(VirtualHosts, h, in.vhost(h))
		case Backends:
			if n := in.pick(fBackends); n != "" {
				s.Put(Backends, n, in.backend(n))
			}
		case Certificates:
			if n := in.pick(fCerts); n != "" {
				s.Put(Certificates, n, in.cert(n))
			}
		case Findings:
			g := in.findings(in.object(), true)
			s.Put(Findings, KeyOfObject(g.GetObject()), g)
		}
	}
	s.TakeDelta()
	return s
}

// delta builds any delta onto s: upserts and removals of keys held and not held, duplicates,
// empty keys, non-canonical findings; its hash is the right one (as far as there is one),
// another state's, or garbage.
func (in *fuzzInput) delta(s *State) *configv1.ConfigDelta {
	d := &configv1.ConfigDelta{}
	for range in.intn(6) {
		remove := in.intn(3) == 0
		switch Type(in.intn(int(numTypes))) {
		case VirtualHosts:
			h := in.pick(fHosts)
			if remove {
				d.RemovedVirtualHosts = append(d.RemovedVirtualHosts, h)
			} else {
				d.VirtualHosts = append(d.VirtualHosts, in.vhost(h))
			}
		case Backends:
			n := in.pick(fBackends)
			if remove {
				d.RemovedBackends = append(d.RemovedBackends, n)
			} else {
				d.Backends = append(d.Backends, in.backend(n))
			}
		case Certificates:
			n := in.pick(fCerts)
			if remove {
				d.RemovedCertificates = append(d.RemovedCertificates, n)
			} else {
				d.Certificates = append(d.Certificates, in.cert(n))
			}
		case Findings:
			if remove {
				d.RemovedFindings = append(d.RemovedFindings, in.object())
			} else {
				g := in.findings(in.object(), in.intn(4) > 0)
				if in.intn(8) == 0 {
					g.Findings = nil
				}
				d.Findings = append(d.Findings, g)
			}
		}
	}
	switch in.intn(6) {
	case 0:
		d.Hash = in.pick(fHashes)
	case 1:
		d.Hash = s.Hash()
	default:
		d.Hash = expectedHash(s, d)
	}
	return d
}

// expectedHash is the hash of s with d's changes put and removed one by one (what a
// correct sender claims).
func expectedHash(s *State, d *configv1.ConfigDelta) string {
	c := s.Clone()
	changes, _ := Changes(d)
	for _, ch := range changes {
		if ch.Msg == nil {
			c.Remove(ch.Type, ch.Key)
		} else {
			c.Put(ch.Type, ch.Key, ch.Msg)
		}
	}
	return c.Hash()
}

// snapshot is what a state holds, byte for byte: its hash and its materialised resources.
func snapshot(t *testing.T, s *State) string {
	t.Helper()
	if s == nil {
		return "<nil>"
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(s.Resources())
	if err != nil {
		t.Fatal(err)
	}
	return s.Hash() + "\n" + string(b)
}

// checkConsistent fails unless s's hash is the hash of its own materialised resources.
func checkConsistent(t *testing.T, s *State, what string) {
	t.Helper()
	again, err := StateOf(s.Resources())
	if err != nil {
		t.Fatalf("%s: the state's resources are not a complete config: %v", what, err)
	}
	if again.Hash() != s.Hash() {
		t.Fatalf("%s: the state has hash %.12s, its resources %.12s", what, s.Hash(), again.Hash())
	}
}

// FuzzApplyDelta: Apply either fails, wrapping ErrBrokenChain and leaving the state exactly
// as it was, or makes the state the delta claims: its hash, which is the hash of the
// resources it materialises. Merge of two contiguous applied deltas, applied onto the first
// one's base, makes the same state as both.
func FuzzApplyDelta(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x05\x00\x01\x01\x01\x02\x03\x03\x00\x02\x04\x02\x01\x01\x00\x03\x02\x00\x03\x05\x00\x02\x01\x01\x03\x00\x01\x00\x02\x02"))
	f.Add(bytes.Repeat([]byte{3, 1, 2, 0}, 40))
	f.Add(bytes.Repeat([]byte{7, 3, 1, 2, 5, 0, 1}, 40))
	f.Fuzz(func(t *testing.T, b []byte) {
		in := &fuzzInput{b: b}
		s := in.state()
		base := s.Clone()
		var applied []Applied
		for step := 0; step < 2; step++ {
			d := in.delta(s)
			want := expectedHash(s, d)
			before := snapshot(t, s)
			a, err := s.Apply(d)
			if err != nil {
				if !errors.Is(err, ErrBrokenChain) {
					t.Fatalf("step %d: %v does not wrap ErrBrokenChain", step, err)
				}
				if snapshot(t, s) != before {
					t.Fatalf("step %d: a refused delta (%v) changed the state", step, err)
				}
				continue
			}
			if s.Hash() != d.GetHash() {
				t.Fatalf("step %d: applied, the state has hash %.12s, the delta says %.12s", step, s.Hash(), d.GetHash())
			}
			if s.Hash() != want {
				t.Fatalf("step %d: applied, the state has hash %.12s, putting and removing gives %.12s", step, s.Hash(), want)
			}
			checkConsistent(t, s, fmt.Sprintf("step %d", step))
			applied = append(applied, a)
		}
		if len(applied) == 2 {
			m := Merge(applied)
			if err := base.ApplyDelta(m); err != nil {
				t.Fatalf("the merge of two applied deltas does not apply onto their base: %v\n%v", err, m)
			}
			if snapshot(t, base) != snapshot(t, s) {
				t.Fatal("the merge of two applied deltas makes another state than both")
			}
		}
	})
}

// FuzzChain: a Chain fed any sequence of config stream messages never panics; a message it
// accepts leaves it holding the state the message names (its hash); a message it refuses
// leaves it exactly as it was.
func FuzzChain(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x00\x01\x00\x04\x00\x01\x01\x02\x00\x03\x02\x00\x02\x00\x01\x03\x00\x02\x00\x02\x00\x03\x00"))
	f.Add(bytes.Repeat([]byte{2, 0, 1, 3, 1, 4, 2, 2, 0, 0, 5}, 20))
	f.Fuzz(func(t *testing.T, b []byte) {
		in := &fuzzInput{b: b}
		var c Chain
		epochs := []string{"e1", "e2", ""}
		for !in.done() {
			var m *configv1.StreamConfigResponse
			switch in.intn(6) {
			case 0:
				m = &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_InitialSyncComplete{
					InitialSyncComplete: &configv1.InitialSyncComplete{Epoch: in.pick(epochs), Version: uint64(in.intn(4))}}}
			case 1:
				s := in.state()
				r := s.Resources()
				h := s.Hash()
				switch in.intn(4) {
				case 0:
					h = in.pick(fHashes)
				case 1: // a duplicate key
					r.VirtualHosts = append(r.VirtualHosts, r.GetVirtualHosts()...)
				}
				m = &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Config{Config: &configv1.Config{
					Epoch: in.pick(epochs), Version: uint64(in.intn(4)), Hash: h, Resources: r}}}
			case 2, 3, 4:
				held := c.State
				if held == nil {
					held = NewState()
				}
				d := in.delta(held)
				d.Epoch, d.BaseVersion, d.Version = c.Version.GetEpoch(), c.Version.GetVersion(), c.Version.GetVersion()+1
				if in.intn(4) == 0 {
					d.Epoch = in.pick(epochs)
					d.BaseVersion = uint64(in.intn(4))
				}
				m = &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Delta{Delta: d}}
			case 5:
				m = &configv1.StreamConfigResponse{Message: &configv1.StreamConfigResponse_Heartbeat{Heartbeat: &configv1.Heartbeat{}}}
			}
			before, beforeVersion := snapshot(t, c.State), proto.Clone(c.Version)
			v, err := c.Receive(m)
			if err != nil {
				if !errors.Is(err, ErrBrokenChain) {
					t.Fatalf("%v does not wrap ErrBrokenChain", err)
				}
				if snapshot(t, c.State) != before || !proto.Equal(c.Version, beforeVersion) {
					t.Fatalf("a refused message (%v) changed what the chain holds", err)
				}
				continue
			}
			if v == nil {
				continue
			}
			claimed := m.GetConfig().GetHash()
			if m.GetDelta() != nil {
				claimed = m.GetDelta().GetHash()
			}
			if c.State == nil || c.State.Hash() != claimed || v.GetHash() != claimed || !proto.Equal(v, c.Version) {
				t.Fatalf("accepted version %v, but the chain holds state %s, version %v", v, snapshot(t, c.State), c.Version)
			}
			checkConsistent(t, c.State, "accepted")
		}
	})
}

// FuzzEncodedStateIsTheSameState: an encoded state (what the pusher keeps of the chain,
// docs/design.md "Cold start") is the decoded state it was made from, after any deltas and
// puts: the same hash, the same resources, the same resource for every key, the same net
// delta; and it holds no decoded message, which is what it is for.
func FuzzEncodedStateIsTheSameState(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x05\x00\x01\x01\x01\x02\x03\x03\x00\x02\x04\x02\x01\x01\x00\x03\x02\x00\x03\x05\x00\x02\x01\x01\x03\x00\x01\x00\x02\x02"))
	f.Add(bytes.Repeat([]byte{7, 3, 1, 2, 5, 0, 1}, 40))
	f.Fuzz(func(t *testing.T, b []byte) {
		in := &fuzzInput{b: b}
		s := in.state()
		e, err := FromResourcesEncoded(s.Resources(), s.Hash())
		if err != nil {
			t.Fatalf("an encoded state refuses a decoded state's resources: %v", err)
		}
		same := func(what string) {
			t.Helper()
			if snapshot(t, e) != snapshot(t, s) {
				t.Fatalf("%s: the encoded state holds another state", what)
			}
			for ty := range numTypes {
				if e.Len(ty) != s.Len(ty) {
					t.Fatalf("%s: %d %ss encoded, %d decoded", what, e.Len(ty), ty, s.Len(ty))
				}
				for k, en := range e.m[ty] {
					if _, ok := en.val.([]byte); !ok {
						t.Fatalf("%s: the encoded state holds %s %q decoded", what, ty, k)
					}
					if !proto.Equal(e.Get(ty, k), s.Get(ty, k)) {
						t.Fatalf("%s: %s %q is %v encoded, %v decoded", what, ty, k, e.Get(ty, k), s.Get(ty, k))
					}
				}
			}
		}
		same("taken")
		for step := 0; step < 2; step++ {
			d := in.delta(s)
			_, errS := s.Apply(d)
			_, errE := e.Apply(d)
			if (errS == nil) != (errE == nil) {
				t.Fatalf("step %d: the decoded state says %v, the encoded %v", step, errS, errE)
			}
			same(fmt.Sprintf("step %d", step))
		}
		// Puts and removals, then the net delta.
		for range in.intn(4) {
			h := in.pick(fHosts)
			if in.intn(3) == 0 {
				s.Remove(VirtualHosts, h)
				e.Remove(VirtualHosts, h)
				continue
			}
			vh := in.vhost(h)
			if s.Put(VirtualHosts, h, vh) != e.Put(VirtualHosts, h, vh) {
				t.Fatal("a put changes one state and not the other")
			}
		}
		ds, de := s.TakeDelta(), e.TakeDelta()
		if !proto.Equal(ds, de) {
			t.Fatalf("net deltas differ:\ndecoded %v\nencoded %v", ds, de)
		}
		same("after puts")
		if c := e.Clone(); snapshot(t, c) != snapshot(t, e) || !c.encoded {
			t.Fatal("a clone of an encoded state is another state")
		}
	})
}
