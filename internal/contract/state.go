// Package contract is the contract between the processes beside the protocol: the rules
// that the translator, the pusher and any client of the config stream must apply the same
// way. It owns the config state (resources keyed per type), its state hash, how a delta
// applies onto a state, and the canonical orders of hosts and findings. It imports only the
// generated protocol (and internal/parallel, to digest a large state on every core); the
// processes import it, never each other.
//
// The state hash. Each resource has a digest: SHA-256 over its type tag, its key and its
// deterministic protobuf serialisation. The state's sum is the sum of the digests of all its
// resources as 256-bit integers modulo 2^256, and the state hash is the hex SHA-256 of
// "sluice.config.v1/state" and that sum. Adding, replacing or removing one resource changes
// the sum by one digest, so a sender and a receiver both keep the hash of the whole state
// current at the cost of the change, not of the state.
package contract

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/sluice-io/sluice/internal/parallel"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// Type is a resource type of the config state.
type Type uint8

// The resource types, in the order the state hash tags them.
const (
	VirtualHosts Type = iota
	Backends
	Certificates
	Findings
	numTypes
)

var typeNames = [numTypes]string{"virtual host", "backend", "certificate", "findings"}

func (t Type) String() string { return typeNames[t] }

// sum is a 256-bit integer, big-endian words.
type sum [4]uint64

func (s *sum) add(d [32]byte) {
	var c uint64
	for i := 3; i >= 0; i-- {
		s[i], c = bits.Add64(s[i], binary.BigEndian.Uint64(d[i*8:]), c)
	}
}

func (s *sum) sub(d [32]byte) {
	var b uint64
	for i := 3; i >= 0; i-- {
		s[i], b = bits.Sub64(s[i], binary.BigEndian.Uint64(d[i*8:]), b)
	}
}

func (s sum) hash() string {
	h := sha256.New()
	h.Write([]byte("sluice.config.v1/state"))
	var b [32]byte
	for i, w := range s {
		binary.BigEndian.PutUint64(b[i*8:], w)
	}
	h.Write(b[:])
	return hex.EncodeToString(h.Sum(nil))
}

var marshal = proto.MarshalOptions{Deterministic: true}

// encode returns a resource's deterministic serialisation and its digest, the resource's
// contribution to the state sum.
func encode(t Type, key string, m proto.Message) ([]byte, [32]byte) {
	b, err := marshal.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("contract: marshal %s %q: %v", t, key, err)) // cannot happen for valid messages
	}
	h := sha256.New()
	h.Write([]byte{byte(t)})
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write(b)
	var d [32]byte
	h.Sum(d[:0])
	return b, d
}

// entry is one resource: the message itself (proto.Message), or in an encoded state its
// serialisation ([]byte). One field serves both, so that a decoded state's entries, two maps
// of every resource in a translator, cost nothing for the other mode.
type entry struct {
	val    any
	digest [32]byte
}

// State is a complete config state: every resource by type and key, and the state hash.
// Resources put into a State are never modified afterwards (a change is a new message), so
// a materialised Resources may share them. A State is not safe for concurrent use.
//
// An encoded state (NewEncodedState, FromResourcesEncoded) keeps each resource as the
// serialisation its digest was computed from, not the decoded message, and decodes what is
// read (Get, Resources, a delta's upserts): a decoded resource takes several times its
// serialisation's memory, and a process that follows the chain only to check it and hand it
// on (the pusher) reads a resource rarely (docs/design.md, "Cold start").
type State struct {
	m       [numTypes]map[string]entry
	sum     sum
	encoded bool
	// touched records, per type and key, what the key held when it was first changed since
	// the last TakeDelta (absent: the zero entry), so that a delta carries only net changes.
	touched [numTypes]map[string]touch
}

type touch struct {
	had    bool
	digest [32]byte
}

// NewState returns an empty state.
func NewState() *State {
	s := &State{}
	for t := range s.m {
		s.m[t] = map[string]entry{}
		s.touched[t] = map[string]touch{}
	}
	return s
}

// NewEncodedState returns an empty encoded state.
func NewEncodedState() *State {
	s := NewState()
	s.encoded = true
	return s
}

// entryOf is what s keeps of m, whose serialisation is b and digest d.
func (s *State) entryOf(m proto.Message, b []byte, d [32]byte) entry {
	if s.encoded {
		return entry{val: b, digest: d}
	}
	return entry{val: m, digest: d}
}

// newMessage returns an empty resource of type t.
func newMessage(t Type) proto.Message {
	switch t {
	case VirtualHosts:
		return &configv1.VirtualHost{}
	case Backends:
		return &configv1.Backend{}
	case Certificates:
		return &configv1.Certificate{}
	default:
		return &configv1.ObjectFindings{}
	}
}

// message returns the resource e holds, decoding it in an encoded state.
func (s *State) message(t Type, key string, e entry) proto.Message {
	raw, ok := e.val.([]byte)
	if !ok {
		m, _ := e.val.(proto.Message)
		return m
	}
	m := newMessage(t)
	if err := proto.Unmarshal(raw, m); err != nil {
		panic(fmt.Sprintf("contract: decode %s %q: %v", t, key, err)) // cannot happen: the state serialised it
	}
	return m
}

// Clone returns a copy of the state that shares its (immutable) resources and digests: what
// another owner can take without serialising anything again. Changes not yet taken as a
// delta are not part of the copy's pending delta.
func (s *State) Clone() *State {
	c := NewState()
	c.encoded = s.encoded
	for t := range s.m {
		c.m[t] = make(map[string]entry, len(s.m[t]))
		for k, e := range s.m[t] {
			c.m[t][k] = e
		}
	}
	c.sum = s.sum
	return c
}

// Hash is the state hash of the state.
func (s *State) Hash() string { return s.sum.hash() }

// Len is the number of resources of type t.
func (s *State) Len(t Type) int { return len(s.m[t]) }

// Get returns the resource of type t with key, or nil. Of an encoded state it is a new
// message each time.
func (s *State) Get(t Type, key string) proto.Message {
	e, ok := s.m[t][key]
	if !ok {
		return nil
	}
	return s.message(t, key, e)
}

// Has reports whether the state holds a resource of type t with key.
func (s *State) Has(t Type, key string) bool {
	_, ok := s.m[t][key]
	return ok
}

func (s *State) note(t Type, key string) {
	if _, ok := s.touched[t][key]; ok {
		return
	}
	e, had := s.m[t][key]
	s.touched[t][key] = touch{had: had, digest: e.digest}
}

// Put makes m the resource of type t with key; it reports whether that changed the state.
func (s *State) Put(t Type, key string, m proto.Message) bool {
	b, d := encode(t, key, m)
	old, had := s.m[t][key]
	if had && old.digest == d {
		return false
	}
	s.note(t, key)
	if had {
		s.sum.sub(old.digest)
	}
	s.sum.add(d)
	s.m[t][key] = s.entryOf(m, b, d)
	return true
}

// Remove removes the resource of type t with key; it reports whether there was one.
func (s *State) Remove(t Type, key string) bool {
	old, had := s.m[t][key]
	if !had {
		return false
	}
	s.note(t, key)
	s.sum.sub(old.digest)
	delete(s.m[t], key)
	return true
}

// TakeDelta returns the net change since the last TakeDelta (resources only: the caller
// sets the versions and the hash) and starts a new one; nil when nothing changed.
func (s *State) TakeDelta() *configv1.ConfigDelta {
	d, _ := s.TakeDeltaDigests()
	return d
}

// Digests are the digests of a delta's upserts, by type and key, as the state that took the
// delta computed them (TakeDeltaDigests). A state in the same process applies the delta with
// them (ApplyDigests) without serialising and hashing each resource again; the sum is still
// checked against the delta's hash, so a delta that is not onto the state's version is still
// refused. They are trusted: digests from anywhere else are not digests of the delta.
type Digests [numTypes]map[string][32]byte

// TakeDeltaDigests is TakeDelta with the digests of the delta's upserts.
func (s *State) TakeDeltaDigests() (*configv1.ConfigDelta, Digests) {
	var changes []Change
	var dg Digests
	for t := Type(0); t < numTypes; t++ {
		for key, was := range s.touched[t] {
			e, has := s.m[t][key]
			switch {
			case has && (!was.had || e.digest != was.digest):
				changes = append(changes, Change{t, key, s.message(t, key, e)})
				if dg[t] == nil {
					dg[t] = map[string][32]byte{}
				}
				dg[t][key] = e.digest
			case !has && was.had:
				changes = append(changes, Change{t, key, nil})
			}
		}
		s.touched[t] = map[string]touch{}
	}
	if len(changes) == 0 {
		return nil, Digests{}
	}
	return DeltaOf(changes), dg
}

func addUpsert(d *configv1.ConfigDelta, t Type, m proto.Message) {
	switch t {
	case VirtualHosts:
		d.VirtualHosts = append(d.VirtualHosts, m.(*configv1.VirtualHost))
	case Backends:
		d.Backends = append(d.Backends, m.(*configv1.Backend))
	case Certificates:
		d.Certificates = append(d.Certificates, m.(*configv1.Certificate))
	case Findings:
		d.Findings = append(d.Findings, m.(*configv1.ObjectFindings))
	}
}

// addRemoval adds the removal of key.
func addRemoval(d *configv1.ConfigDelta, t Type, key string) {
	switch t {
	case VirtualHosts:
		d.RemovedVirtualHosts = append(d.RemovedVirtualHosts, key)
	case Backends:
		d.RemovedBackends = append(d.RemovedBackends, key)
	case Certificates:
		d.RemovedCertificates = append(d.RemovedCertificates, key)
	case Findings:
		d.RemovedFindings = append(d.RemovedFindings, ObjectOfKey(key))
	}
}

// sortDelta puts a delta's lists in canonical order, so that equal deltas are equal bytes.
func sortDelta(d *configv1.ConfigDelta) {
	sort.Slice(d.VirtualHosts, func(i, j int) bool { return HostLess(d.VirtualHosts[i].GetHostname(), d.VirtualHosts[j].GetHostname()) })
	sort.Slice(d.RemovedVirtualHosts, func(i, j int) bool { return HostLess(d.RemovedVirtualHosts[i], d.RemovedVirtualHosts[j]) })
	sort.Slice(d.Backends, func(i, j int) bool { return d.Backends[i].GetName() < d.Backends[j].GetName() })
	sort.Strings(d.RemovedBackends)
	sort.Slice(d.Certificates, func(i, j int) bool { return d.Certificates[i].GetName() < d.Certificates[j].GetName() })
	sort.Strings(d.RemovedCertificates)
	sort.Slice(d.Findings, func(i, j int) bool { return ObjectLess(d.Findings[i].GetObject(), d.Findings[j].GetObject()) })
	sort.Slice(d.RemovedFindings, func(i, j int) bool { return ObjectLess(d.RemovedFindings[i], d.RemovedFindings[j]) })
}

// ErrBrokenChain is wrapped by every error of ApplyDelta and FromResources: the state the
// message describes cannot be built from what the receiver holds.
var ErrBrokenChain = errors.New("broken config chain")

// Change is one resource of a delta; a nil Msg removes the key.
type Change struct {
	Type Type
	Key  string
	Msg  proto.Message
}

// Changes lists a delta's resources, upserts and removals, type by type. Resources without
// a key are an error.
func Changes(d *configv1.ConfigDelta) ([]Change, error) {
	var out []Change
	for _, vh := range d.GetVirtualHosts() {
		out = append(out, Change{VirtualHosts, vh.GetHostname(), vh})
	}
	for _, h := range d.GetRemovedVirtualHosts() {
		out = append(out, Change{VirtualHosts, h, nil})
	}
	for _, b := range d.GetBackends() {
		if b.GetName() == "" {
			return nil, fmt.Errorf("%w: a backend without a name", ErrBrokenChain)
		}
		out = append(out, Change{Backends, b.GetName(), b})
	}
	for _, n := range d.GetRemovedBackends() {
		out = append(out, Change{Backends, n, nil})
	}
	for _, c := range d.GetCertificates() {
		if c.GetName() == "" {
			return nil, fmt.Errorf("%w: a certificate without a name", ErrBrokenChain)
		}
		out = append(out, Change{Certificates, c.GetName(), c})
	}
	for _, n := range d.GetRemovedCertificates() {
		out = append(out, Change{Certificates, n, nil})
	}
	for _, f := range d.GetFindings() {
		if len(f.GetFindings()) == 0 {
			return nil, fmt.Errorf("%w: empty findings of %s", ErrBrokenChain, KeyOfObject(f.GetObject()))
		}
		if err := checkGroup(f); err != nil {
			return nil, err
		}
		out = append(out, Change{Findings, KeyOfObject(f.GetObject()), f})
	}
	for _, o := range d.GetRemovedFindings() {
		out = append(out, Change{Findings, KeyOfObject(o), nil})
	}
	return out, nil
}

// checkGroup refuses findings that are not in the form the state hash is defined on (and
// that Resources and FromResources would change): the object as {kind, namespace, name} of
// its key, every finding of that key, in canonical order.
func checkGroup(g *configv1.ObjectFindings) error {
	key := KeyOfObject(g.GetObject())
	if !proto.Equal(g.GetObject(), ObjectOfKey(key)) {
		return fmt.Errorf("%w: findings of %s name the object as %v, not as its key", ErrBrokenChain, key, g.GetObject())
	}
	fs := g.GetFindings()
	for i, f := range fs {
		if KeyOfObject(f.GetObject()) != key {
			return fmt.Errorf("%w: findings of %s hold a finding of %s", ErrBrokenChain, key, KeyOfObject(f.GetObject()))
		}
		if i > 0 && FindingLess(f, fs[i-1]) {
			return fmt.Errorf("%w: findings of %s are not in canonical order", ErrBrokenChain, key)
		}
	}
	return nil
}

// DeltaOf builds the resources of a delta from changes (the caller sets the versions and
// the hash), in canonical order.
func DeltaOf(changes []Change) *configv1.ConfigDelta {
	d := &configv1.ConfigDelta{}
	for _, c := range changes {
		if c.Msg != nil {
			addUpsert(d, c.Type, c.Msg)
		} else {
			addRemoval(d, c.Type, c.Key)
		}
	}
	sortDelta(d)
	return d
}

// ApplyDelta applies d's resources onto the state and checks that the result has d's hash.
// It is atomic: on any error (a key removed that is not held, a key given twice, a resource
// without a key, a different resulting hash) the state is unchanged.
func (s *State) ApplyDelta(d *configv1.ConfigDelta) error {
	_, err := s.Apply(d)
	return err
}

// Applied is a delta that was applied, with, per type, the keys it added (that its base did
// not hold): what Merge needs to know of the states between deltas.
type Applied struct {
	Delta *configv1.ConfigDelta
	Added map[Type]map[string]bool
}

// Apply is ApplyDelta that also returns what Merge needs.
func (s *State) Apply(d *configv1.ConfigDelta) (Applied, error) { return s.ApplyDigests(d, Digests{}) }

// ApplyDigests is Apply with the digests of d's upserts as the state that took d computed
// them (Digests): a resource whose digest is given is not serialised and hashed again, unless
// the state keeps serialisations (an encoded state).
func (s *State) ApplyDigests(d *configv1.ConfigDelta, dg Digests) (Applied, error) {
	changes, err := Changes(d)
	if err != nil {
		return Applied{}, err
	}
	a := Applied{Delta: d, Added: map[Type]map[string]bool{}}
	seen := [numTypes]map[string]bool{}
	for t := range seen {
		seen[t] = map[string]bool{}
	}
	digests := make([][32]byte, len(changes))
	raws := make([][]byte, len(changes))
	next := s.sum
	for i, c := range changes {
		if seen[c.Type][c.Key] {
			return Applied{}, fmt.Errorf("%w: %s %q appears twice in the delta", ErrBrokenChain, c.Type, c.Key)
		}
		seen[c.Type][c.Key] = true
		old, had := s.m[c.Type][c.Key]
		if c.Msg == nil && !had {
			return Applied{}, fmt.Errorf("%w: the delta removes %s %q, which is not held", ErrBrokenChain, c.Type, c.Key)
		}
		if had {
			next.sub(old.digest)
		} else {
			if a.Added[c.Type] == nil {
				a.Added[c.Type] = map[string]bool{}
			}
			a.Added[c.Type][c.Key] = true
		}
		if c.Msg != nil {
			if known, ok := dg[c.Type][c.Key]; ok && !s.encoded {
				digests[i] = known
			} else {
				raws[i], digests[i] = encode(c.Type, c.Key, c.Msg)
			}
			next.add(digests[i])
		}
	}
	if got := next.hash(); got != d.GetHash() {
		return Applied{}, fmt.Errorf("%w: the state after the delta has hash %.12s, the delta says %.12s", ErrBrokenChain, got, d.GetHash())
	}
	for i, c := range changes {
		if c.Msg == nil {
			delete(s.m[c.Type], c.Key)
		} else {
			s.m[c.Type][c.Key] = s.entryOf(c.Msg, raws[i], digests[i])
		}
	}
	s.sum = next
	return a, nil
}

// Merge folds contiguous applied deltas into one onto the first one's base, with the last
// one's version, hash and watcher reference: the last word on each key wins, and a key added
// and removed again within them is left out (the base never held it).
func Merge(as []Applied) *configv1.ConfigDelta {
	type net struct {
		c      Change
		atBase bool // the base held the key
	}
	var byKey [numTypes]map[string]*net
	var order []*net
	for _, a := range as {
		changes, _ := Changes(a.Delta) // checked when applied
		for _, c := range changes {
			if byKey[c.Type] == nil {
				byKey[c.Type] = map[string]*net{}
			}
			n, ok := byKey[c.Type][c.Key]
			if !ok {
				n = &net{atBase: c.Msg == nil || !a.Added[c.Type][c.Key]}
				byKey[c.Type][c.Key] = n
				order = append(order, n)
			}
			n.c = c
		}
	}
	var changes []Change
	for _, n := range order {
		if n.c.Msg != nil || n.atBase {
			changes = append(changes, n.c)
		}
	}
	first, last := as[0].Delta, as[len(as)-1].Delta
	d := DeltaOf(changes)
	d.Epoch, d.Version, d.BaseVersion, d.Hash = last.GetEpoch(), last.GetVersion(), first.GetBaseVersion(), last.GetHash()
	d.WatcherEpoch, d.WatcherRevision = last.GetWatcherEpoch(), last.GetWatcherRevision()
	return d
}

// FromResources returns the state of a complete config received from a peer; want is the
// hash it must have, and a config without one is refused (nothing would check it).
// Duplicate keys are an error.
func FromResources(r *configv1.Resources, want string) (*State, error) {
	if want == "" {
		return nil, fmt.Errorf("%w: a complete config without a hash", ErrBrokenChain)
	}
	return stateOf(r, want, false)
}

// FromResourcesEncoded is FromResources into an encoded state.
func FromResourcesEncoded(r *configv1.Resources, want string) (*State, error) {
	if want == "" {
		return nil, fmt.Errorf("%w: a complete config without a hash", ErrBrokenChain)
	}
	return stateOf(r, want, true)
}

// StateOf returns the state of resources this process built itself; there is no hash to
// check. Duplicate keys are an error.
func StateOf(r *configv1.Resources) (*State, error) { return stateOf(r, "", false) }

func stateOf(r *configv1.Resources, want string, encoded bool) (*State, error) {
	s := NewState()
	s.encoded = encoded
	// A complete state is nobody's change: its resources are put without recording a
	// pending delta. Keys are checked first, in order, so that a duplicate is named as it
	// comes; the digests, the cost of taking a complete state, are then computed on every
	// core (docs/design.md, "Cold start").
	var items []item
	add := func(t Type, key string, m proto.Message) error {
		if _, dup := s.m[t][key]; dup {
			return fmt.Errorf("%w: %s %q appears twice in the config", ErrBrokenChain, t, key)
		}
		s.m[t][key] = entry{val: m}
		items = append(items, item{t, key, m})
		return nil
	}
	for _, vh := range r.GetVirtualHosts() {
		if err := add(VirtualHosts, vh.GetHostname(), vh); err != nil {
			return nil, err
		}
	}
	for _, b := range r.GetBackends() {
		if err := add(Backends, b.GetName(), b); err != nil {
			return nil, err
		}
	}
	for _, c := range r.GetCertificates() {
		if err := add(Certificates, c.GetName(), c); err != nil {
			return nil, err
		}
	}
	for _, g := range GroupFindings(r.GetFindings()) {
		if err := add(Findings, KeyOfObject(g.GetObject()), g); err != nil {
			return nil, err
		}
	}
	raws, ds := digests(items)
	for i, it := range items {
		s.m[it.t][it.key] = s.entryOf(it.msg, raws[i], ds[i])
		s.sum.add(ds[i])
	}
	if want != "" && s.Hash() != want {
		return nil, fmt.Errorf("%w: the config has hash %.12s, it says %.12s", ErrBrokenChain, s.Hash(), want)
	}
	return s, nil
}

type item struct {
	t   Type
	key string
	msg proto.Message
}

// parallelDigests is the number of resources below which digests are computed on one
// goroutine: starting more costs more than it saves.
const parallelDigests = 1024

// digests returns each item's serialisation and digest, computed on every core for a large
// list.
func digests(items []item) ([][]byte, [][32]byte) {
	raws := make([][]byte, len(items))
	out := make([][32]byte, len(items))
	parallel.Ranges(len(items), parallelDigests, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			raws[i], out[i] = encode(items[i].t, items[i].key, items[i].msg)
		}
	})
	return raws, out
}

// Hash returns the state hash of a complete config's resources.
func Hash(r *configv1.Resources) string {
	s, err := StateOf(r)
	if err != nil {
		panic(fmt.Sprintf("contract: hash of resources with duplicate keys: %v", err))
	}
	return s.Hash()
}

// Resources materialises the state as a complete config, every list in canonical order.
func (s *State) Resources() *configv1.Resources {
	out := &configv1.Resources{}
	out.VirtualHosts = messagesOf[*configv1.VirtualHost](s, VirtualHosts)
	sort.Slice(out.VirtualHosts, func(i, j int) bool {
		return HostLess(out.VirtualHosts[i].GetHostname(), out.VirtualHosts[j].GetHostname())
	})
	out.Backends = messagesOf[*configv1.Backend](s, Backends)
	sort.Slice(out.Backends, func(i, j int) bool { return out.Backends[i].GetName() < out.Backends[j].GetName() })
	out.Certificates = messagesOf[*configv1.Certificate](s, Certificates)
	sort.Slice(out.Certificates, func(i, j int) bool { return out.Certificates[i].GetName() < out.Certificates[j].GetName() })
	groups := messagesOf[*configv1.ObjectFindings](s, Findings)
	sort.Slice(groups, func(i, j int) bool { return ObjectLess(groups[i].GetObject(), groups[j].GetObject()) })
	for _, g := range groups {
		out.Findings = append(out.Findings, g.GetFindings()...)
	}
	return out
}

// messagesOf returns the resources of type t, in no order; an encoded state's are decoded
// on every core when they are many.
func messagesOf[M proto.Message](s *State, t Type) []M {
	out := make([]M, 0, len(s.m[t]))
	if !s.encoded {
		for _, e := range s.m[t] {
			out = append(out, e.val.(M))
		}
		return out
	}
	type held struct {
		key string
		e   entry
	}
	all := make([]held, 0, len(s.m[t]))
	for k, e := range s.m[t] {
		all = append(all, held{k, e})
	}
	out = out[:len(all)]
	parallel.Ranges(len(all), parallelDigests, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			out[i] = s.message(t, all[i].key, all[i].e).(M)
		}
	})
	return out
}
