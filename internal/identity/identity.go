// Package identity owns who Sluice's components are and what each may call. A component's
// certificate names its role in a SPIFFE URI SAN, spiffe://<trust-domain>/sluice/<role>
// (a translator's also names the IngressClass it serves:
// spiffe://<trust-domain>/sluice/translator/<class>); Policy says, per RPC, which roles may
// call it and whether they see private keys; Guard enforces that on every call of a server
// and tells the handlers who called (CallerFrom).
//
// Authorization needs mutual TLS: a server without a client CA cannot tell callers apart and
// treats every caller as Anonymous (allowed only on loopback, or with --insecure).
package identity

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Role is what a component is.
type Role string

// The roles. Each component's certificate carries exactly one.
const (
	// Watcher is the watcher: it serves Watch and StatusService, and relays status streams
	// to the leading replica.
	Watcher Role = "watcher"
	// Translator reads the watch stream (with Secrets), reports statuses for its class and
	// serves ConfigService.
	Translator Role = "translator"
	// Pusher reads the config stream (with private keys) and drives the proxy.
	Pusher Role = "pusher"
	// Operator is sluicectl: it may read both streams and status, never private keys.
	Operator Role = "operator"
)

// Roles lists the roles, in a fixed order.
var Roles = []Role{Watcher, Translator, Pusher, Operator}

// DefaultTrustDomain is the trust domain when none is set; Kubernetes' own default.
const DefaultTrustDomain = "cluster.local"

// Identity is a component's name.
type Identity struct {
	TrustDomain string
	Role        Role
	// Class is the IngressClass a translator serves; empty for the other roles.
	Class string
}

// URI is the identity's SPIFFE ID.
func (id Identity) URI() string {
	u := "spiffe://" + id.TrustDomain + "/sluice/" + string(id.Role)
	if id.Class != "" {
		u += "/" + id.Class
	}
	return u
}

func (id Identity) String() string { return id.URI() }

// Validate checks that id can be written into a certificate and parsed back.
func (id Identity) Validate() error {
	_, err := Parse(id.URI(), id.TrustDomain)
	return err
}

// Parse reads a SPIFFE ID of trustDomain.
func Parse(uri, trustDomain string) (Identity, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return Identity{}, fmt.Errorf("identity %q: %w", uri, err)
	}
	if u.Scheme != "spiffe" {
		return Identity{}, fmt.Errorf("identity %q: not a spiffe:// URI", uri)
	}
	if u.Host != trustDomain {
		return Identity{}, fmt.Errorf("identity %q: trust domain %q, want %q", uri, u.Host, trustDomain)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Port() != "" {
		return Identity{}, fmt.Errorf("identity %q: a SPIFFE ID has no user, port, query or fragment", uri)
	}
	parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	if len(parts) < 2 || parts[0] != "sluice" {
		return Identity{}, fmt.Errorf("identity %q: want spiffe://%s/sluice/<role>", uri, trustDomain)
	}
	id := Identity{TrustDomain: trustDomain, Role: Role(parts[1])}
	switch id.Role {
	case Translator:
		if len(parts) != 3 || parts[2] == "" {
			return Identity{}, fmt.Errorf("identity %q: a translator's identity names its IngressClass: spiffe://%s/sluice/translator/<class>", uri, trustDomain)
		}
		id.Class = parts[2]
	case Watcher, Pusher, Operator:
		if len(parts) != 2 {
			return Identity{}, fmt.Errorf("identity %q: want spiffe://%s/sluice/%s", uri, trustDomain, id.Role)
		}
	default:
		return Identity{}, fmt.Errorf("identity %q: unknown role %q (want one of %v)", uri, parts[1], Roles)
	}
	return id, nil
}

// ErrNoIdentity is a certificate that names no Sluice identity of the trust domain.
var ErrNoIdentity = errors.New("the certificate names no Sluice identity")

// FromCertificate reads the Sluice identity of a verified certificate: the one URI SAN of the
// trust domain under /sluice/. Two such SANs are refused, since a component has one role.
func FromCertificate(cert *x509.Certificate, trustDomain string) (Identity, error) {
	var found []Identity
	var errs []error
	for _, u := range cert.URIs {
		if u.Scheme != "spiffe" || u.Host != trustDomain || !strings.HasPrefix(u.Path, "/sluice/") {
			continue
		}
		id, err := Parse(u.String(), trustDomain)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		found = append(found, id)
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		return Identity{}, fmt.Errorf("the certificate names %d Sluice identities (%s, %s, ...); a component has one", len(found), found[0], found[1])
	case len(errs) > 0:
		return Identity{}, errors.Join(errs...)
	}
	return Identity{}, fmt.Errorf("%w of trust domain %q (a URI SAN spiffe://%s/sluice/<role>; subject %q)", ErrNoIdentity, trustDomain, trustDomain, cert.Subject.String())
}
