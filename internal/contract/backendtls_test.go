package contract

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"strings"
	"testing"
	"time"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// chainOf issues a root and n intermediates below it, then a leaf for name: the leaf and
// intermediates (leaf first), and the root.
func chainOf(t *testing.T, n int, name string) (certs []*x509.Certificate, root *x509.Certificate) {
	t.Helper()
	issue := func(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if parent == nil {
			parent, parentKey = tmpl, key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c, key
	}
	ca := func(cn string, serial int64) *x509.Certificate {
		return &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour),
			NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	}
	root, key := issue(ca("root", 1), nil, nil)
	parent := root
	for i := range n {
		var inter *x509.Certificate
		inter, key = issue(ca("intermediate", int64(2+i)), parent, key)
		certs = append([]*x509.Certificate{inter}, certs...)
		parent = inter
	}
	leaf, _ := issue(&x509.Certificate{SerialNumber: big.NewInt(100), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, parent, key)
	return append([]*x509.Certificate{leaf}, certs...), root
}

// Upstream TLS (docs/translation.md): an endpoint is verified against the trusted
// certificates for the name, and the depth bounds the intermediates between the endpoint's
// certificate and the trusted one as OpenSSL's verify depth does (nginx's default, 1, admits
// one).
func TestVerifyEndpointChecksChainNameAndDepth(t *testing.T) {
	for _, c := range []struct {
		name          string
		intermediates int
		verifyName    string
		depth         int
		want          string // "" for verified
	}{
		{"issued by the root", 0, "app.internal", 1, ""},
		{"one intermediate, depth 1", 1, "app.internal", 1, ""},
		{"two intermediates, depth 1", 2, "app.internal", 1, "more than 1 certificates between"},
		{"two intermediates, depth 2", 2, "app.internal", 2, ""},
		{"two intermediates, no bound", 2, "app.internal", 0, ""},
		{"another name", 0, "db.internal", 1, "not db.internal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			certs, root := chainOf(t, c.intermediates, "app.internal")
			roots := x509.NewCertPool()
			roots.AddCert(root)
			err := VerifyEndpoint(certs, roots, c.verifyName, c.depth)
			if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("VerifyEndpoint: %v, want %q", err, c.want)
			}
		})
	}
	certs, _ := chainOf(t, 0, "app.internal")
	other, _ := chainOf(t, 0, "app.internal")
	roots := x509.NewCertPool()
	roots.AddCert(other[0])
	if err := VerifyEndpoint(certs, roots, "app.internal", 1); err == nil {
		t.Fatal("an endpoint of another CA was verified")
	}
}

// The Gateway API's subjectAltNames: the endpoint's certificate must carry one of them, a
// DNS name (wildcards as in a hostname check) or a URI exactly; the hostname then counts for
// nothing.
func TestSubjectAltNamesReplaceTheName(t *testing.T) {
	certs, root := chainOf(t, 0, "app.internal")
	uri, _ := url.Parse("spiffe://cluster.local/ns/app/sa/web")
	certs[0].URIs = []*url.URL{uri} // read by the check as parsed; the signature is not re-checked for it
	rootPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Raw})
	for _, c := range []struct {
		sans []string
		ok   bool
	}{
		{[]string{"dns:app.internal"}, true},
		{[]string{"dns:other.internal", "uri:spiffe://cluster.local/ns/app/sa/web"}, true},
		{[]string{"uri:spiffe://cluster.local/ns/app/sa/other"}, false},
		{[]string{"dns:other.internal"}, false},
	} {
		cfg, err := BackendTLSConfig(&configv1.BackendTLS{Verify: true, CaPem: rootPEM, VerifyName: "app.internal", SubjectAltNames: c.sans})
		if err != nil {
			t.Fatal(err)
		}
		err = cfg.VerifyConnection(tls.ConnectionState{PeerCertificates: certs})
		if (err == nil) != c.ok {
			t.Errorf("%v: %v, want verified %t", c.sans, err, c.ok)
		}
	}
	if err := CheckBackendTLS(&configv1.BackendTLS{Verify: true, VerifyName: "a.internal", SubjectAltNames: []string{"ip:10.0.0.1"}}); err == nil {
		t.Error("a subject alternative name of an unknown type was accepted")
	}
}

// Settings that cannot be used are refused with the cause, before any data plane sees them.
func TestBackendTLSConfigRefusesUnusableSettings(t *testing.T) {
	_, root := chainOf(t, 0, "x")
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Raw})
	for _, c := range []struct {
		name string
		bt   *configv1.BackendTLS
		want string
	}{
		{"no name to verify", &configv1.BackendTLS{Verify: true, CaPem: caPEM}, "without a name"},
		{"not a CA bundle", &configv1.BackendTLS{Verify: true, CaPem: []byte("junk"), VerifyName: "a.internal"}, "no certificate"},
		{"a key among the CAs", &configv1.BackendTLS{Verify: true, CaPem: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}), VerifyName: "a.internal"}, "not a CERTIFICATE"},
		{"a bad server name", &configv1.BackendTLS{ServerName: "a b"}, "server name"},
		{"a client certificate without key", &configv1.BackendTLS{ClientCertificatePem: caPEM}, "client certificate"},
		{"trust without verification", &configv1.BackendTLS{CaPem: caPEM}, "without verification"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := CheckBackendTLS(c.bt); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("CheckBackendTLS: %v, want %q", err, c.want)
			}
		})
	}
	cfg, err := BackendTLSConfig(&configv1.BackendTLS{Verify: true, CaPem: caPEM, VerifyName: "a.internal", ServerName: "a.internal"})
	if err != nil || cfg.ServerName != "a.internal" || cfg.VerifyConnection == nil {
		t.Fatalf("BackendTLSConfig: %+v, %v", cfg, err)
	}
}

// The operator's view never holds the key a backend presents to its endpoints.
func TestRedactionRemovesTheBackendsClientKey(t *testing.T) {
	b := &configv1.Backend{Name: "b", Tls: &configv1.BackendTLS{ClientCertificatePem: []byte("crt"), ClientKeyPem: []byte("key")}}
	r := RedactResources(&configv1.Resources{Backends: []*configv1.Backend{b}})
	if got := string(r.GetBackends()[0].GetTls().GetClientKeyPem()); got != string(RedactedKey) {
		t.Fatalf("redacted key %q", got)
	}
	if string(b.GetTls().GetClientKeyPem()) != "key" {
		t.Fatal("the original was changed")
	}
}
