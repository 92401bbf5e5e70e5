package translate

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// This file reads ingress-nginx's proxy-ssl-* annotations: how an Ingress whose
// backend-protocol is HTTPS or GRPCS verifies its endpoints and what it presents to them
// (docs/translation.md, "Upstream TLS"). The result is a backend of the Ingress's own
// (verifiedSep) whose Backend.tls says it.

// defaultProxySSLVerifyDepth is ingress-nginx's default proxy-ssl-verify-depth.
const defaultProxySSLVerifyDepth = 1

// proxySSL is what an Ingress's proxy-ssl-* annotations ask for, as read; the Secret's
// contents are resolved with the Ingress's objects (resolveProxySSL).
type proxySSL struct {
	secret nsName // proxy-ssl-secret; empty name when unset
	verify bool   // proxy-ssl-verify: on
	name   string // proxy-ssl-name
	sni    bool   // proxy-ssl-server-name: on
	depth  uint32 // proxy-ssl-verify-depth

	// From the Secret (resolveProxySSL).
	ca, cert, key []byte
}

// readProxySSL reads the proxy-ssl-* annotations; nil when they ask for nothing Sluice does
// anyway. tls is whether backend-protocol makes the endpoints speak TLS: without it, nginx
// never applies them. A verification that cannot be made as asked keeps the Ingress from
// being served (refused): serving it would trust any endpoint.
func readProxySSL(ing *networkingv1.Ingress, tls bool, get func(string) (string, bool), field func(string) string, add func(string, configv1.FindingSeverity, string, string), refused *bool) *proxySSL {
	p := &proxySSL{depth: defaultProxySSLVerifyDepth}
	first := "" // the first annotation set, for a finding on them all
	onOff := func(name string) (on, ok bool) {
		v, set := get(name)
		if !set || v == "" {
			return false, true
		}
		if first == "" {
			first = name
		}
		switch strings.ToLower(v) {
		case "on":
			return true, true
		case "off":
			return false, true
		}
		return false, false
	}
	verify, ok := onOff("proxy-ssl-verify")
	if !ok {
		*refused = true
		v, _ := get("proxy-ssl-verify")
		add(field("proxy-ssl-verify"), sevError, "InvalidAnnotation", fmt.Sprintf("%q is not on or off; the Ingress is not served, since serving it might trust any endpoint", v))
		return nil
	}
	p.verify = verify
	sni, ok := onOff("proxy-ssl-server-name")
	if !ok {
		v, _ := get("proxy-ssl-server-name")
		add(field("proxy-ssl-server-name"), sevWarn, "InvalidAnnotation", fmt.Sprintf("%q is not on or off; off applies: no server name is sent", v))
	}
	p.sni = sni
	if v, set := get("proxy-ssl-name"); set && v != "" {
		if first == "" {
			first = "proxy-ssl-name"
		}
		if err := checkHost(v); err != "" || strings.HasPrefix(v, "*.") {
			add(field("proxy-ssl-name"), sevError, "InvalidAnnotation", fmt.Sprintf("%q is not a host name; the Service's own name applies", v))
		} else {
			p.name = strings.ToLower(v)
		}
	}
	p.depth = readVerifyDepth(get, field, add)
	if v, set := get("proxy-ssl-secret"); set && v != "" {
		if first == "" {
			first = "proxy-ssl-secret"
		}
		// The watcher streams exactly the Secret this rule names (contract.ProxySSLSecret).
		ns, name, why := contract.ProxySSLSecret(ing.Namespace, v)
		if why != "" {
			// As ingress-nginx, whose locations then answer 503.
			*refused = true
			add(field("proxy-ssl-secret"), sevError, "InvalidAnnotation", fmt.Sprintf("%q %s; the Ingress is not served", v, why))
			return nil
		}
		p.secret = nsName{ns, name}
	}
	if first == "" {
		return nil
	}
	if !tls {
		add(field(first), sevWarn, "AnnotationNotApplied", "the proxy-ssl-* annotations apply to endpoints spoken to over TLS (backend-protocol HTTPS or GRPCS); they are ignored, as ingress-nginx ignores them")
		return nil
	}
	if p.verify && p.secret.name == "" {
		*refused = true
		add(field("proxy-ssl-verify"), sevError, "InvalidAnnotation", "proxy-ssl-verify: on needs proxy-ssl-secret, whose ca.crt holds the certificates to trust; the Ingress is not served rather than served trusting any endpoint")
		return nil
	}
	if p.verify && p.name == "" {
		add(field("proxy-ssl-verify"), sevWarn, "ProxySSLNameDefault", "no proxy-ssl-name: the endpoints' certificates are verified for the Service's DNS name, SERVICE.NAMESPACE.svc (ingress-nginx verifies them for its internal name upstream_balancer, which fails); set proxy-ssl-name to the name they hold")
	}
	return p
}

// readVerifyDepth reads proxy-ssl-verify-depth: the default when it is unset or invalid.
func readVerifyDepth(get func(string) (string, bool), field func(string) string, add func(string, configv1.FindingSeverity, string, string)) uint32 {
	depth := uint32(defaultProxySSLVerifyDepth)
	if v, set := get("proxy-ssl-verify-depth"); set && v != "" {
		d, err := strconv.ParseUint(v, 10, 8)
		if err != nil || d == 0 {
			add(field("proxy-ssl-verify-depth"), sevWarn, "InvalidAnnotation", fmt.Sprintf("%q is not a depth (a number from 1); the default %d applies, as in ingress-nginx", v, defaultProxySSLVerifyDepth))
		} else {
			depth = uint32(d)
		}
	}
	return depth
}

// resolveProxySSL reads the proxy-ssl-secret of lo's Ingress: its ca.crt (from a Secret of
// any type) and, from a kubernetes.io/tls Secret, the client certificate. It reports false
// when the Ingress cannot be served as asked (a finding says why).
func (t *Translator) resolveProxySSL(lo *ingressOut, p *proxySSL) bool {
	if p.secret.name == "" {
		return true
	}
	ing := lo.ing
	field := "metadata.annotations[" + NginxAnnotationPrefix + "proxy-ssl-secret]"
	lo.secrets = append(lo.secrets, p.secret)
	s := t.secrets[p.secret]
	name := p.secret.ns + "/" + p.secret.name
	fail := func(reason, cause string) bool {
		if p.verify {
			lo.findings = append(lo.findings, finding(ing, field, sevError, reason, cause+"; the Ingress is not served rather than served trusting any endpoint"))
			return false
		}
		lo.findings = append(lo.findings, finding(ing, field, sevError, reason, cause+"; no client certificate is presented to the endpoints"))
		return true
	}
	if s == nil {
		return fail("SecretNotFound", fmt.Sprintf("Secret %s not found among the Secrets of type kubernetes.io/tls or Opaque", name))
	}
	if ca := s.Data[contract.CAKey]; len(ca) > 0 {
		checked, err := contract.CheckTrustedCAs(ca)
		if err != nil {
			return fail("InvalidCertificate", fmt.Sprintf("Secret %s: ca.crt: %v", name, err))
		}
		p.ca = checked.PEM
	} else if p.verify {
		return fail("InvalidCertificate", fmt.Sprintf("Secret %s has no ca.crt, the certificates to verify the endpoints with", name))
	}
	if s.Type != corev1.SecretTypeTLS {
		if len(s.Data[corev1.TLSCertKey]) > 0 {
			// The watcher reads only ca.crt and tls.crt of a Secret of another type: a private
			// key leaves it only from a kubernetes.io/tls Secret.
			lo.findings = append(lo.findings, finding(ing, field, sevError, "SecretNotFound", fmt.Sprintf("Secret %s is of type %q: its ca.crt is used, but a client certificate is read only from a Secret of type kubernetes.io/tls (recreate it with that type); none is presented to the endpoints", name, s.Type)))
		}
		return true
	}
	checked, err := contract.CheckCertificate(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return fail("InvalidCertificate", fmt.Sprintf("Secret %s holds no valid client certificate and key: %v", name, err))
	}
	p.cert, p.key = checked.CertificatePEM, checked.PrivateKeyPEM
	return true
}

// backendTLS is the Backend.tls of lo's Ingress for Service svc, or nil when its
// proxy-ssl-* annotations ask for nothing beyond unverified TLS. Without proxy-ssl-name,
// the name verified is the Service's DNS name: ingress-nginx's is its upstream's internal
// name, upstream_balancer, which no endpoint's certificate holds.
func (p *proxySSL) backendTLS(svc nsName) *configv1.BackendTLS {
	if p == nil || (!p.verify && !p.sni && p.cert == nil) {
		return nil
	}
	name := p.name
	if name == "" {
		name = svc.name + "." + svc.ns + ".svc"
	}
	bt := &configv1.BackendTLS{ClientCertificatePem: p.cert, ClientKeyPem: p.key}
	if p.sni {
		bt.ServerName = name
	}
	if p.verify {
		bt.Verify, bt.CaPem, bt.VerifyName, bt.MaxDepth = true, p.ca, name, p.depth
	}
	return bt
}
