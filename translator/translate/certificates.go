package translate

// Certificates: each TLS Secret read and checked once (memoised until the Secret changes or
// the certificate expires), read ahead on every core when many changed, and the default
// certificate.

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/parallel"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

type certOut struct {
	cert     *configv1.Certificate // nil when unusable
	reason   string
	why      string
	notAfter time.Time
}

// certificate loads and checks the TLS Secret k (memoised until the Secret changes or the
// certificate expires).
func (t *Translator) certificate(k nsName) *certOut {
	if c, ok := t.certs[k]; ok {
		return c
	}
	c, ok := t.readAhead[k]
	if ok {
		delete(t.readAhead, k)
	} else {
		c = readCertificate(k, t.secrets[k], t.opts.Now)
	}
	if f, ok := t.quarantines()["Secret/"+k.ns+"/"+k.name]; ok && c.cert != nil {
		c = &certOut{reason: ReasonRejectedByDataPlane, why: fmt.Sprintf("TLS Secret %s/%s %s; its hosts are not served over HTTPS", k.ns, k.name, f.GetCause())}
	}
	t.certs[k] = c
	if c.cert != nil && (t.nextExpiry.IsZero() || c.notAfter.Before(t.nextExpiry)) {
		t.nextExpiry = c.notAfter
	}
	return c
}

// parallelCertificates is the number of changed Secrets below which their certificates
// are read one by one, when translation asks for them.
const parallelCertificates = 64

// readCertificates reads the certificates of the Secrets changed since the last Build on
// every core, ahead of the translation that asks for them (certificate): checking a key pair
// is most of the cost of a TLS Secret, and a cold start has thousands (docs/design.md, "Cold
// start"). readCertificate is pure, so the result is what reading each when asked gives.
func (t *Translator) readCertificates() {
	clear(t.readAhead)
	if len(t.dirtySecrets) < parallelCertificates {
		return
	}
	keys := make([]nsName, 0, len(t.dirtySecrets))
	for k := range t.dirtySecrets {
		keys = append(keys, k)
	}
	out := make([]*certOut, len(keys))
	parallel.Ranges(len(keys), parallelCertificates, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			out[i] = readCertificate(keys[i], t.secrets[keys[i]], t.opts.Now)
		}
	})
	if t.readAhead == nil {
		t.readAhead = make(map[nsName]*certOut, len(keys))
	}
	for i, k := range keys {
		t.readAhead[k] = out[i]
	}
}

func readCertificate(k nsName, s *corev1.Secret, now time.Time) *certOut {
	name := k.ns + "/" + k.name
	fail := func(reason, why string) *certOut {
		return &certOut{reason: reason, why: fmt.Sprintf("TLS Secret %s %s; its hosts are not served over HTTPS", name, why)}
	}
	if s == nil {
		return fail("SecretNotFound", "not found among Secrets of type kubernetes.io/tls")
	}
	if s.Type != corev1.SecretTypeTLS {
		// The watcher keeps only the certificates of an Opaque Secret (ingress-nginx reads
		// tls.crt and tls.key from one): its key never leaves the watcher.
		return fail("SecretNotFound", fmt.Sprintf("is of type %q, not kubernetes.io/tls: its private key is not read (recreate it with type kubernetes.io/tls)", s.Type))
	}
	// The chain is checked whole and only its certificates are emitted: junk beside the
	// leaf never reaches a data plane.
	checked, err := contract.CheckCertificate(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return fail("InvalidCertificate", "holds no valid certificate and key: "+err.Error())
	}
	leaf, crt, key := checked.Leaf, checked.CertificatePEM, checked.PrivateKeyPEM
	if !now.IsZero() && now.After(leaf.NotAfter) {
		return fail("InvalidCertificate", fmt.Sprintf("holds a certificate that expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339)))
	}
	names := append([]string(nil), leaf.DNSNames...)
	sort.Strings(names)
	return &certOut{notAfter: leaf.NotAfter, cert: &configv1.Certificate{
		Name:           name,
		Source:         &configv1.ObjectRef{Kind: "Secret", Namespace: s.Namespace, Name: s.Name, Uid: string(s.UID), ResourceVersion: s.ResourceVersion},
		CertificatePem: crt, PrivateKeyPem: key, DnsNames: names, NotAfter: timestamppb.New(leaf.NotAfter),
	}}
}

// expire re-checks the certificates whose notAfter has passed since they were read.
func (t *Translator) expire() {
	now := t.opts.Now
	if now.IsZero() || t.nextExpiry.IsZero() || !now.After(t.nextExpiry) {
		return
	}
	t.nextExpiry = time.Time{}
	for k, c := range t.certs {
		switch {
		case c.cert != nil && now.After(c.notAfter):
			t.dirtySecrets.add(k)
		case c.cert != nil && (t.nextExpiry.IsZero() || c.notAfter.Before(t.nextExpiry)):
			t.nextExpiry = c.notAfter
		}
	}
}

// defaultCertificate is the name of Options.DefaultCertificate's certificate when its Secret
// is usable, else "".
func (t *Translator) defaultCertificate() string {
	ns, name, ok := strings.Cut(t.opts.DefaultCertificate, "/")
	if !ok {
		return ""
	}
	if c := t.certificate(nsName{ns, name}); c.cert != nil {
		return t.opts.DefaultCertificate
	}
	return ""
}

// defaultCertificateFindings are the findings of the default certificate's Secret, when key
// is that Secret's findings key and it cannot be served.
func (t *Translator) defaultCertificateFindings(key string) []*configv1.Finding {
	if t.opts.DefaultCertificate == "" || key != "Secret/"+t.opts.DefaultCertificate {
		return nil
	}
	ns, name, _ := strings.Cut(t.opts.DefaultCertificate, "/")
	c := t.certificate(nsName{ns, name})
	if c.cert != nil {
		return nil
	}
	return []*configv1.Finding{{Object: &configv1.ObjectRef{Kind: "Secret", Namespace: ns, Name: name}, Severity: sevError, Reason: c.reason,
		Cause: "the default certificate (--default-certificate): " + c.why + "; a handshake for a name without a certificate of its own fails"}}
}
