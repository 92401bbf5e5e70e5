package grpcx

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sluice-io/sluice/internal/identity"
)

// DefaultReloadInterval is how often, at most, the TLS files are read again to pick up a
// rotation (cert-manager rewrites a mounted Secret in place).
const DefaultReloadInterval = time.Second

// TLSFiles names PEM files. With Cert and Key a server serves TLS; with CA as well it demands
// and verifies client certificates (mTLS) and authorizes callers by their identity. A client
// with CA verifies the server against it (and, with ExpectRole, that the server is that
// component), and with Cert and Key presents its own certificate.
//
// The files are read again, at most every ReloadInterval, when a handshake needs them: a
// rotated certificate or CA is used by the next connection, and open connections keep going.
// A rotation caught half-written (a key that does not match the certificate) keeps the
// previous files until the pair is whole again.
type TLSFiles struct {
	Cert string
	Key  string
	CA   string
	// ServerName overrides the name a client verifies; empty means the dialled host.
	ServerName string
	// TrustDomain is the SPIFFE trust domain of identities; empty means
	// identity.DefaultTrustDomain.
	TrustDomain string
	// ExpectRole, on a client with a CA, is the role the server's certificate must name.
	ExpectRole identity.Role
	// ReloadInterval bounds how often the files are read again; 0 means
	// DefaultReloadInterval, negative means at every handshake.
	ReloadInterval time.Duration
	// Logger reports reloads and failed reloads; nil is silent.
	Logger hclog.Logger
	// Now is the clock of ReloadInterval; nil means time.Now.
	Now func() time.Time
}

// Enabled reports whether any TLS file is set.
func (t TLSFiles) Enabled() bool { return t.Cert != "" || t.Key != "" || t.CA != "" }

// Mutual reports whether a server built from t verifies client certificates, so that it can
// authorize callers.
func (t TLSFiles) Mutual() bool { return t.Cert != "" && t.Key != "" && t.CA != "" }

func (t TLSFiles) trustDomain() string {
	if t.TrustDomain == "" {
		return identity.DefaultTrustDomain
	}
	return t.TrustDomain
}

// ServerConfig builds the server-side tls.Config; nil when TLS is off.
func (t TLSFiles) ServerConfig() (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	if t.Cert == "" || t.Key == "" {
		return nil, errors.New("a TLS server needs both a certificate and a key")
	}
	src, err := newFileSource(t)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Every handshake gets the current files.
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cur := src.current()
			// No session tickets: every connection (a new one at least every
			// --max-connection-age) makes a full handshake, verifying the client's certificate
			// against the CA bundle of the moment, rather than resuming a session whose
			// certificate was verified once.
			cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cur.cert}, NextProtos: []string{"h2"}, SessionTicketsDisabled: true}
			if cur.pool != nil {
				cfg.ClientCAs, cfg.ClientAuth = cur.pool, tls.RequireAndVerifyClientCert
			}
			return cfg, nil
		},
	}, nil
}

// ClientConfig builds the client-side tls.Config; nil when TLS is off.
func (t TLSFiles) ClientConfig() (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	if (t.Cert == "") != (t.Key == "") {
		return nil, errors.New("a TLS client certificate needs both a certificate and a key")
	}
	src, err := newFileSource(t)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.Cert != "" {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return src.current().cert, nil
		}
	}
	if t.CA == "" {
		return cfg, nil // the system's roots, verified by crypto/tls itself
	}
	// The CA can rotate, and a tls.Config's RootCAs cannot: verify against the current pool
	// here, exactly as crypto/tls would (chain and host name), then check the server's role.
	cfg.InsecureSkipVerify = true
	td := t.trustDomain()
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the server presented no certificate")
		}
		opts := x509.VerifyOptions{Roots: src.current().pool, DNSName: cs.ServerName, Intermediates: x509.NewCertPool()}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
			return fmt.Errorf("verify the server's certificate: %w", err)
		}
		if t.ExpectRole != "" {
			id, err := identity.FromCertificate(cs.PeerCertificates[0], td)
			if err != nil {
				return fmt.Errorf("the server at %s is not a Sluice %s: %w", cs.ServerName, t.ExpectRole, err)
			}
			if id.Role != t.ExpectRole {
				return fmt.Errorf("the server at %s is %s, not a Sluice %s", cs.ServerName, id, t.ExpectRole)
			}
		}
		return nil
	}
	return cfg, nil
}

// loaded is one reading of the files.
type loaded struct {
	cert                   *tls.Certificate // nil without Cert
	pool                   *x509.CertPool   // nil without CA
	certPEM, keyPEM, caPEM []byte
}

// fileSource keeps the files' current reading.
type fileSource struct {
	files    TLSFiles
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	cur     *loaded
	checked time.Time
	failing string // the error last logged, so a broken rotation is logged once
}

func newFileSource(t TLSFiles) (*fileSource, error) {
	s := &fileSource{files: t, interval: t.ReloadInterval, now: t.Now}
	if s.interval == 0 {
		s.interval = DefaultReloadInterval
	}
	if s.now == nil {
		s.now = time.Now
	}
	l, err := s.read(nil)
	if err != nil {
		return nil, err
	}
	s.cur, s.checked = l, s.now()
	return s, nil
}

// current returns the files as they are now, reading them again when the interval passed.
func (s *fileSource) current() *loaded {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.interval > 0 && now.Sub(s.checked) < s.interval {
		return s.cur
	}
	s.checked = now
	l, err := s.read(s.cur)
	log := s.files.Logger
	switch {
	case err != nil:
		if log != nil && err.Error() != s.failing {
			log.Warn("tls files changed but do not load; keeping the previous ones", "error", err)
		}
		s.failing = err.Error()
	case l != s.cur:
		if log != nil {
			log.Info("tls files reloaded", "cert", s.files.Cert, "ca", s.files.CA)
		}
		s.cur, s.failing = l, ""
	}
	return s.cur
}

// read reads the files; it returns prev itself when nothing changed.
func (s *fileSource) read(prev *loaded) (*loaded, error) {
	l := &loaded{}
	var err error
	if s.files.Cert != "" {
		if l.certPEM, err = os.ReadFile(s.files.Cert); err != nil {
			return nil, fmt.Errorf("read certificate: %w", err)
		}
		if l.keyPEM, err = os.ReadFile(s.files.Key); err != nil {
			return nil, fmt.Errorf("read key: %w", err)
		}
	}
	if s.files.CA != "" {
		if l.caPEM, err = os.ReadFile(s.files.CA); err != nil {
			return nil, fmt.Errorf("read CA bundle: %w", err)
		}
	}
	if prev != nil && bytes.Equal(prev.certPEM, l.certPEM) && bytes.Equal(prev.keyPEM, l.keyPEM) && bytes.Equal(prev.caPEM, l.caPEM) {
		return prev, nil
	}
	if s.files.Cert != "" {
		cert, err := tls.X509KeyPair(l.certPEM, l.keyPEM)
		if err != nil {
			return nil, fmt.Errorf("load certificate %s and key %s: %w", s.files.Cert, s.files.Key, err)
		}
		l.cert = &cert
	}
	if s.files.CA != "" {
		l.pool = x509.NewCertPool()
		if !l.pool.AppendCertsFromPEM(l.caPEM) {
			return nil, fmt.Errorf("CA bundle %s holds no PEM certificate", s.files.CA)
		}
	}
	return l, nil
}
