package contract

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// This file holds the bounds on what a tenant controls, checked per object before anything
// is emitted (the translator) and again by every data plane (through CheckRoute), so that
// a config the translator emits is never refused by a data plane for one object's part.

// Bounds on what one object may ask for. Each is far above what a legitimate object needs;
// a part over a bound is refused on its own (a finding on its object), never the config.
const (
	// MaxRegexLength bounds a regular expression (a path, header or query match), in
	// bytes. It is the Gateway API's own limit on a path value, so every regular
	// expression path its CRD admits is served. Go's RE2 compiles in linear time and
	// matches in time linear in the input, so the bound is on memory, not on backtracking.
	MaxRegexLength = 1024
	// MaxPathLength bounds a path match value or a redirect's or rewrite's path, in bytes.
	MaxPathLength = 4096
	// MaxHeaderValueLength bounds a header value a route sets, adds or matches, in bytes
	// (the Gateway API's limit on a header value).
	MaxHeaderValueLength = 4096
	// MaxCertificateChainBytes bounds a TLS Secret's tls.crt; a chain of a leaf and its
	// intermediates is a few KiB.
	MaxCertificateChainBytes = 64 << 10
	// MaxCertificateChainLength bounds the number of certificates in a chain.
	MaxCertificateChainLength = 10
	// MaxPrivateKeyBytes bounds a TLS Secret's tls.key (an RSA 8192-bit key is under 7 KiB).
	MaxPrivateKeyBytes = 16 << 10
	// MaxMirrors bounds a route's mirrors: each is one more copy of every request it mirrors
	// (the Gateway API allows 16 filters on a rule).
	MaxMirrors = 16
	// MaxMirrorDenominator bounds the denominator of a mirror's share (the Gateway API's
	// fraction has no bound; a million is finer than any use).
	MaxMirrorDenominator = 1000000
	// MaxCORSEntries bounds each list of a route's CORS policy (origins, methods, allowed
	// and exposed headers): the Gateway API allows 64 of each.
	MaxCORSEntries = 64
	// MaxCORSOriginLength bounds one allowed origin, in bytes (a scheme and a hostname).
	MaxCORSOriginLength = 512
)

// CheckRegex returns why expr is not a usable regular expression: over MaxRegexLength, or
// not RE2.
func CheckRegex(expr string) error { return compileChecked(expr, expr, nil) }

// compileChecked bounds the expression a tenant wrote (value) and compiles the one a data
// plane runs (expr: value, or value anchored), keeping it in compiled when that is not nil.
func compileChecked(value, expr string, compiled map[string]*regexp.Regexp) error {
	if len(value) > MaxRegexLength {
		return fmt.Errorf("regular expression of %d bytes (at most %d)", len(value), MaxRegexLength)
	}
	re, err := compile(expr)
	if err != nil {
		return err
	}
	if compiled != nil {
		compiled[expr] = re
	}
	return nil
}

// CheckHeaderName returns why name cannot be a header name: empty, or not an HTTP token
// (RFC 9110: letters, digits and !#$%&'*+-.^_`|~).
func CheckHeaderName(name string) error {
	if name == "" {
		return errors.New("empty header name")
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return fmt.Errorf("header name %q: %q is not allowed in a header name", name, name[i])
		}
	}
	return nil
}

// CheckHeaderValue returns why v cannot be a header value: over MaxHeaderValueLength, or
// holding a control character (CR, LF, NUL and the rest; a horizontal tab is allowed).
func CheckHeaderValue(v string) error {
	if len(v) > MaxHeaderValueLength {
		return fmt.Errorf("header value of %d bytes (at most %d)", len(v), MaxHeaderValueLength)
	}
	if i := controlChar(v, true); i >= 0 {
		return fmt.Errorf("header value %q holds control character %q", v, v[i])
	}
	return nil
}

// checkPath returns why p cannot be a path: over MaxPathLength, or holding a control
// character.
func checkPath(p string) error {
	if len(p) > MaxPathLength {
		return fmt.Errorf("path of %d bytes (at most %d)", len(p), MaxPathLength)
	}
	if i := controlChar(p, false); i >= 0 {
		return fmt.Errorf("path %q holds control character %q", p, p[i])
	}
	return nil
}

// checkHostname returns why h cannot be the host a redirect or rewrite sets: longer than a
// DNS name, or holding anything but letters, digits, '-' and '.'.
func checkHostname(h string) error {
	if len(h) > 253 {
		return fmt.Errorf("hostname of %d bytes (at most 253)", len(h))
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return fmt.Errorf("hostname %q: %q is not allowed in a hostname", h, c)
		}
	}
	return nil
}

// controlChar is the index of the first control character of s (ASCII below 0x20, and
// DEL), or -1; a horizontal tab is not one when tab is set.
func controlChar(s string, tab bool) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && !(tab && c == '\t')) || c == 0x7f {
			return i
		}
	}
	return -1
}

func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// CheckedCertificate is a certificate chain and key that passed CheckCertificate: the PEM
// blocks re-encoded (nothing outside them kept), and the leaf parsed.
type CheckedCertificate struct {
	CertificatePEM []byte
	PrivateKeyPEM  []byte
	Leaf           *x509.Certificate
}

// CheckCertificate checks a TLS Secret's chain and key whole: the chain at most
// MaxCertificateChainBytes and MaxCertificateChainLength certificates, every PEM block in it
// a certificate that parses; the key at most MaxPrivateKeyBytes, one private key (an "EC
// PARAMETERS" block beside it is allowed, as openssl writes it), unencrypted, matching the
// leaf (the first certificate). Text outside the PEM blocks is not kept.
func CheckCertificate(chainPEM, keyPEM []byte) (*CheckedCertificate, error) {
	if len(chainPEM) > MaxCertificateChainBytes {
		return nil, fmt.Errorf("certificate chain of %d bytes (at most %d)", len(chainPEM), MaxCertificateChainBytes)
	}
	if len(keyPEM) > MaxPrivateKeyBytes {
		return nil, fmt.Errorf("private key of %d bytes (at most %d)", len(keyPEM), MaxPrivateKeyBytes)
	}
	var chain bytes.Buffer
	var leaf *x509.Certificate
	n := 0
	for rest := chainPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		n++
		if n > MaxCertificateChainLength {
			return nil, fmt.Errorf("certificate chain of more than %d certificates", MaxCertificateChainLength)
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("certificate chain block %d is a %q, not a CERTIFICATE", n, b.Type)
		}
		if len(b.Headers) > 0 {
			return nil, fmt.Errorf("certificate chain block %d has PEM headers", n)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate chain block %d does not parse: %w", n, err)
		}
		if leaf == nil {
			leaf = c
		}
		_ = pem.Encode(&chain, &pem.Block{Type: b.Type, Bytes: b.Bytes})
	}
	if leaf == nil {
		return nil, errors.New("no certificate in the chain")
	}
	var key []byte
	for rest := keyPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		switch {
		case b.Type == "EC PARAMETERS":
			continue
		case b.Type != "PRIVATE KEY" && !strings.HasSuffix(b.Type, " PRIVATE KEY"):
			return nil, fmt.Errorf("key block %q is not a private key", b.Type)
		case len(b.Headers) > 0:
			return nil, errors.New("private key has PEM headers (an encrypted key is not supported)")
		case key != nil:
			return nil, errors.New("more than one private key")
		}
		key = pem.EncodeToMemory(&pem.Block{Type: b.Type, Bytes: b.Bytes})
	}
	if key == nil {
		return nil, errors.New("no private key")
	}
	if _, err := tls.X509KeyPair(chain.Bytes(), key); err != nil {
		return nil, fmt.Errorf("key and certificate: %w", err)
	}
	return &CheckedCertificate{CertificatePEM: chain.Bytes(), PrivateKeyPEM: key, Leaf: leaf}, nil
}
