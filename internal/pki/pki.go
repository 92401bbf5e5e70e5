// Package pki issues the certificates Sluice's components and tests use: a CA, and leaf
// certificates that name a component's identity (a SPIFFE URI SAN, see internal/identity)
// beside its host names. It is used by `make certs`, by the test helpers and by tests; it
// holds no test code, so commands can use it.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"time"
)

// CA is a certificate authority.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
}

// NewCA returns a fresh CA valid for a day.
func NewCA(name string) (*CA, error) { return NewCAValid(name, 24*time.Hour) }

// NewCAValid returns a fresh CA valid for validity.
func NewCAValid(name string, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: pemBlock("CERTIFICATE", der)}, nil
}

// LoadCA returns the CA of a certificate and its private key, both PEM (PKCS #8 or EC).
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("load CA: no certificate")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, fmt.Errorf("load CA: no key")
	}
	var key any
	if key, err = x509.ParsePKCS8PrivateKey(kb.Bytes); err != nil {
		if key, err = x509.ParseECPrivateKey(kb.Bytes); err != nil {
			return nil, fmt.Errorf("load CA: key: %w", err)
		}
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("load CA: key of type %T cannot sign", key)
	}
	return &CA{Cert: cert, Key: signer, CertPEM: pemBlock("CERTIFICATE", cb.Bytes)}, nil
}

// KeyPEM returns the CA's private key, PEM (PKCS #8).
func (ca *CA) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		return nil, err
	}
	return pemBlock("PRIVATE KEY", der), nil
}

// CertOptions describes a leaf certificate.
type CertOptions struct {
	CommonName   string
	Organization []string // Kubernetes groups for client certificates
	DNSNames     []string
	IPs          []net.IP
	// URIs are URI SANs, such as a component's SPIFFE ID.
	URIs     []string
	Server   bool
	Client   bool
	NotAfter time.Time // default: a day from now
}

// Issue returns a leaf certificate and its key, both PEM.
func (ca *CA) Issue(o CertOptions) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	notAfter := o.NotAfter
	if notAfter.IsZero() {
		notAfter = time.Now().Add(24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: o.CommonName, Organization: o.Organization},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:     o.DNSNames,
		IPAddresses:  o.IPs,
	}
	for _, u := range o.URIs {
		parsed, err := url.Parse(u)
		if err != nil {
			return nil, nil, fmt.Errorf("uri SAN %q: %w", u, err)
		}
		tmpl.URIs = append(tmpl.URIs, parsed)
	}
	if o.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if o.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pemBlock("CERTIFICATE", der), pemBlock("PRIVATE KEY", keyDER), nil
}

// WriteFiles issues a certificate and writes it and its key to certPath and keyPath.
func (ca *CA) WriteFiles(o CertOptions, certPath, keyPath string) error {
	c, k, err := ca.Issue(o)
	if err != nil {
		return err
	}
	if err := os.WriteFile(certPath, c, 0o644); err != nil {
		return err
	}
	return os.WriteFile(keyPath, k, 0o600)
}

// SelfSigned returns a self-signed server certificate for hosts, PEM.
func SelfSigned(hosts ...string) (certPEM, keyPEM []byte, err error) {
	ca, err := NewCA("sluice-test-self-signed")
	if err != nil {
		return nil, nil, err
	}
	o := CertOptions{CommonName: hosts[0], Server: true}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			o.IPs = append(o.IPs, ip)
		} else {
			o.DNSNames = append(o.DNSNames, h)
		}
	}
	return ca.Issue(o)
}

func ecKeyPEM() ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pemBlock("EC PRIVATE KEY", der), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(fmt.Sprintf("pki: random serial: %v", err))
	}
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// ServiceAccountKeyPEM returns a fresh key for signing ServiceAccount tokens (PEM).
func ServiceAccountKeyPEM() ([]byte, error) { return ecKeyPEM() }
