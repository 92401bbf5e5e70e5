package contract

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// RedactedKey replaces a private key for a reader that may not have it.
var RedactedKey = []byte("REDACTED")

// RedactCertificate returns c without its private key (c itself when it has none).
func RedactCertificate(c *configv1.Certificate) *configv1.Certificate {
	if len(c.GetPrivateKeyPem()) == 0 {
		return c
	}
	out := proto.Clone(c).(*configv1.Certificate)
	out.PrivateKeyPem = RedactedKey
	return out
}

// RedactBackend returns b without the private key it presents to its endpoints (b itself
// when it has none).
func RedactBackend(b *configv1.Backend) *configv1.Backend {
	if len(b.GetTls().GetClientKeyPem()) == 0 {
		return b
	}
	out := proto.Clone(b).(*configv1.Backend)
	out.Tls.ClientKeyPem = RedactedKey
	return out
}

// RedactResources returns r without private keys; r is not changed (resources are shared).
func RedactResources(r *configv1.Resources) *configv1.Resources {
	if r == nil {
		return nil
	}
	out := &configv1.Resources{VirtualHosts: r.GetVirtualHosts(), Findings: r.GetFindings()}
	for _, c := range r.GetCertificates() {
		out.Certificates = append(out.Certificates, RedactCertificate(c))
	}
	for _, b := range r.GetBackends() {
		out.Backends = append(out.Backends, RedactBackend(b))
	}
	return out
}

// Redactor rewrites one config stream without private keys, for a reader that may not have
// them (the operator role). The hashes it sends are those of what it sends, so that the
// reader's Chain still verifies every message; it keeps the redacted state to compute them
// at the cost of the change.
type Redactor struct {
	st *State
}

// Config returns c redacted; it starts the stream's state again.
func (r *Redactor) Config(c *configv1.Config) (*configv1.Config, error) {
	out := RefOf(c)
	out.Resources = RedactResources(c.GetResources())
	st, err := StateOf(out.GetResources())
	if err != nil {
		return nil, fmt.Errorf("redact config %d: %w", c.GetVersion(), err)
	}
	r.st, out.Hash = st, st.Hash()
	return out, nil
}

// Delta returns d redacted, onto the config or delta redacted before.
func (r *Redactor) Delta(d *configv1.ConfigDelta) (*configv1.ConfigDelta, error) {
	if r.st == nil {
		return nil, fmt.Errorf("redact delta %d: no config before it", d.GetVersion())
	}
	changes, err := Changes(d)
	if err != nil {
		return nil, fmt.Errorf("redact delta %d: %w", d.GetVersion(), err)
	}
	out := proto.Clone(d).(*configv1.ConfigDelta)
	out.Certificates = nil
	for _, c := range d.GetCertificates() {
		out.Certificates = append(out.Certificates, RedactCertificate(c))
	}
	out.Backends = nil
	for _, b := range d.GetBackends() {
		out.Backends = append(out.Backends, RedactBackend(b))
	}
	for _, ch := range changes {
		if ch.Msg == nil {
			r.st.Remove(ch.Type, ch.Key)
			continue
		}
		switch m := ch.Msg.(type) {
		case *configv1.Certificate:
			ch.Msg = RedactCertificate(m)
		case *configv1.Backend:
			ch.Msg = RedactBackend(m)
		}
		r.st.Put(ch.Type, ch.Key, ch.Msg)
	}
	r.st.TakeDelta() // only the hash matters here
	out.Hash = r.st.Hash()
	return out, nil
}
