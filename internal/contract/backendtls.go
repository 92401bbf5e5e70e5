package contract

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"strings"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// This file is the one reading of a backend's TLS settings (Backend.tls): what the translator
// checks before it emits them and what the Sluice Caddy module builds its transports from,
// so that a backend the translator sends is never refused by the module, and both verify an
// endpoint the same way (docs/translation.md, "Upstream TLS").

// Bounds on a backend's TLS settings.
const (
	// MaxTrustedCABytes bounds a backend's trusted certificates (a Secret's ca.crt): a bundle
	// of a few dozen CA certificates.
	MaxTrustedCABytes = 256 << 10
	// MaxTrustedCAs bounds their number.
	MaxTrustedCAs = 100
)

// CheckedCAs are trusted certificates that passed CheckTrustedCAs: their PEM blocks
// re-encoded (nothing outside them kept), and the pool they make.
type CheckedCAs struct {
	PEM  []byte
	Pool *x509.CertPool
}

// CheckTrustedCAs checks a bundle of trusted certificates (a Secret's ca.crt): at most
// MaxTrustedCABytes and MaxTrustedCAs, every PEM block a certificate that parses, at least one.
func CheckTrustedCAs(bundle []byte) (*CheckedCAs, error) {
	if len(bundle) > MaxTrustedCABytes {
		return nil, fmt.Errorf("trusted certificates of %d bytes (at most %d)", len(bundle), MaxTrustedCABytes)
	}
	out := &CheckedCAs{Pool: x509.NewCertPool()}
	n := 0
	for rest := bundle; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		n++
		switch {
		case n > MaxTrustedCAs:
			return nil, fmt.Errorf("more than %d trusted certificates", MaxTrustedCAs)
		case b.Type != "CERTIFICATE":
			return nil, fmt.Errorf("trusted certificate block %d is a %q, not a CERTIFICATE", n, b.Type)
		case len(b.Headers) > 0:
			return nil, fmt.Errorf("trusted certificate block %d has PEM headers", n)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("trusted certificate block %d does not parse: %w", n, err)
		}
		out.Pool.AddCert(c)
		out.PEM = append(out.PEM, pem.EncodeToMemory(&pem.Block{Type: b.Type, Bytes: b.Bytes})...)
	}
	if n == 0 {
		return nil, errors.New("no certificate among the trusted certificates")
	}
	return out, nil
}

// CheckBackendTLS reports why bt cannot be used: trusted certificates or a client
// certificate that do not pass their checks, a name that is not a host name, verification
// without a name to verify.
func CheckBackendTLS(bt *configv1.BackendTLS) error {
	_, err := BackendTLSConfig(bt)
	return err
}

// BackendTLSConfig returns the client TLS config that speaks to a backend's endpoints as bt
// says (nil bt: encrypted, the endpoint not authenticated). The endpoint is verified by
// VerifyConnection rather than by Go's default check, because the name checked (VerifyName)
// need not be the one sent (ServerName, possibly none) and the chain's depth may be bounded.
func BackendTLSConfig(bt *configv1.BackendTLS) (*tls.Config, error) {
	cfg := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
	if bt == nil {
		return cfg, nil
	}
	if n := bt.GetServerName(); n != "" {
		if err := checkHostname(n); err != nil {
			return nil, fmt.Errorf("server name %q: %w", n, err)
		}
		cfg.ServerName = n
	}
	if len(bt.GetClientCertificatePem()) > 0 || len(bt.GetClientKeyPem()) > 0 {
		c, err := CheckCertificate(bt.GetClientCertificatePem(), bt.GetClientKeyPem())
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		pair, err := tls.X509KeyPair(c.CertificatePEM, c.PrivateKeyPEM)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if !bt.GetVerify() {
		if len(bt.GetCaPem()) > 0 || bt.GetVerifyName() != "" || bt.GetMaxDepth() != 0 || len(bt.GetSubjectAltNames()) > 0 {
			return nil, errors.New("trusted certificates, a name to verify or a depth without verification")
		}
		return cfg, nil
	}
	name := bt.GetVerifyName()
	sans, err := parseSANs(bt.GetSubjectAltNames())
	if err != nil {
		return nil, err
	}
	switch {
	case len(sans) > 0:
		name = "" // the names verified are the SANs
	case name == "":
		return nil, errors.New("verification without a name to verify")
	default:
		if err := checkHostname(name); err != nil {
			return nil, fmt.Errorf("name to verify %q: %w", name, err)
		}
	}
	var roots *x509.CertPool // nil: the system's
	if len(bt.GetCaPem()) > 0 {
		cas, err := CheckTrustedCAs(bt.GetCaPem())
		if err != nil {
			return nil, err
		}
		roots = cas.Pool
	}
	depth := int(bt.GetMaxDepth())
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(sans) > 0 {
			return verifySANs(cs.PeerCertificates, roots, sans, depth)
		}
		return VerifyEndpoint(cs.PeerCertificates, roots, name, depth)
	}
	return cfg, nil
}

// san is one subject alternative name an endpoint's certificate may carry.
type san struct{ dns, uri string }

// MaxSubjectAltNames bounds a backend's subject alternative names (the Gateway API allows 5).
const MaxSubjectAltNames = 16

func parseSANs(in []string) ([]san, error) {
	if len(in) > MaxSubjectAltNames {
		return nil, fmt.Errorf("%d subject alternative names (at most %d)", len(in), MaxSubjectAltNames)
	}
	var out []san
	for _, s := range in {
		switch {
		case strings.HasPrefix(s, "dns:"):
			if err := checkHostname(strings.TrimPrefix(s, "dns:")); err != nil {
				return nil, fmt.Errorf("subject alternative name %q: %w", s, err)
			}
			out = append(out, san{dns: strings.TrimPrefix(s, "dns:")})
		case strings.HasPrefix(s, "uri:"):
			u, err := url.Parse(strings.TrimPrefix(s, "uri:"))
			if err != nil || !u.IsAbs() || controlChar(s, false) >= 0 {
				return nil, fmt.Errorf("subject alternative name %q is not an absolute URI", s)
			}
			out = append(out, san{uri: strings.TrimPrefix(s, "uri:")})
		default:
			return nil, fmt.Errorf("subject alternative name %q is neither dns:NAME nor uri:URI", s)
		}
	}
	return out, nil
}

// verifySANs verifies an endpoint as VerifyEndpoint does, but for any of sans instead of one
// name: a DNS name as VerifyEndpoint matches it, a URI exactly.
func verifySANs(certs []*x509.Certificate, roots *x509.CertPool, sans []san, depth int) error {
	if err := VerifyEndpoint(certs, roots, "", depth); err != nil {
		return err
	}
	leaf := certs[0]
	for _, s := range sans {
		if s.dns != "" && leaf.VerifyHostname(s.dns) == nil {
			return nil
		}
		for _, u := range leaf.URIs {
			if s.uri != "" && u.String() == s.uri {
				return nil
			}
		}
	}
	return errors.New("endpoint certificate: none of its subject alternative names is one the backend asks for")
}

// VerifyEndpoint verifies an endpoint's certificates (its own first, then the chain it
// sent): they lead to one of roots (nil: the system's), the first is valid for name and for
// server authentication, and, when depth is not zero, some such chain has at most depth
// certificates between the endpoint's and the trusted one (OpenSSL's verify depth, which
// nginx's proxy_ssl_verify_depth sets).
func VerifyEndpoint(certs []*x509.Certificate, roots *x509.CertPool, name string, depth int) error {
	if len(certs) == 0 {
		return errors.New("the endpoint sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	chains, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return fmt.Errorf("endpoint certificate: %w", err)
	}
	if depth == 0 {
		return nil
	}
	for _, ch := range chains {
		if len(ch)-2 <= depth {
			return nil
		}
	}
	return fmt.Errorf("endpoint certificate: its chain has more than %d certificates between it and the trusted one", depth)
}
