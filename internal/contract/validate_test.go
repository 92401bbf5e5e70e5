package contract

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"
)

func selfSigned(t *testing.T) (crt, key []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "a.example.com"}, DNSNames: []string{"a.example.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
}

// A TLS Secret's chain and key are checked whole, each bound named in the refusal; what
// passes is re-encoded, without the text outside its PEM blocks.
func TestCheckCertificate(t *testing.T) {
	crt, key := selfSigned(t)
	_, otherKey := selfSigned(t)
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	block := func(typ string, b []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}) }
	ecParams := block("EC PARAMETERS", []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07})
	for _, c := range []struct {
		name     string
		crt, key []byte
		want     string // "" when taken
	}{
		{"leaf", crt, key, ""},
		{"chain of two", cat(crt, crt), key, ""},
		{"text around the blocks", cat([]byte("subject=CN = a\n"), crt, []byte("trailing words\n")), key, ""},
		{"openssl's EC PARAMETERS beside the key", crt, cat(ecParams, key), ""},
		{"no certificate", []byte("not a certificate"), key, "no certificate"},
		{"junk block after the leaf", cat(crt, block("GARBAGE", []byte("junk"))), key, `block 2 is a "GARBAGE"`},
		{"unparsable certificate after the leaf", cat(crt, block("CERTIFICATE", []byte("junk"))), key, "block 2 does not parse"},
		{"chain over the size bound", cat(crt, bytes.Repeat([]byte{'\n'}, MaxCertificateChainBytes)), key, "at most 65536"},
		{"chain over the length bound", bytes.Repeat(crt, MaxCertificateChainLength+1), key, "more than 10 certificates"},
		{"key over the size bound", crt, cat(key, bytes.Repeat([]byte{'\n'}, MaxPrivateKeyBytes)), "at most 16384"},
		{"key of another certificate", crt, otherKey, "does not match"},
		{"two keys", crt, cat(key, key), "more than one private key"},
		{"no key", crt, []byte("nothing"), "no private key"},
		{"a certificate as the key", crt, crt, "not a private key"},
		{"encrypted key", crt, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED"}, Bytes: []byte{1}}), "encrypted"},
	} {
		got, err := CheckCertificate(c.crt, c.key)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		case c.want == "":
			if bytes.Contains(got.CertificatePEM, []byte("subject=")) || bytes.Contains(got.CertificatePEM, []byte("trailing")) {
				t.Errorf("%s: text outside the blocks kept: %q", c.name, got.CertificatePEM)
			}
			if !bytes.HasPrefix(got.CertificatePEM, crt) || got.Leaf.Subject.CommonName != "a.example.com" || !bytes.Equal(got.PrivateKeyPEM, key) {
				t.Errorf("%s: %q %q", c.name, got.CertificatePEM, got.PrivateKeyPEM)
			}
		}
	}
}
