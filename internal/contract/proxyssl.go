package contract

import "strings"

// This file is the rule the watcher and the translator share for ingress-nginx's
// proxy-ssl-secret: which Secret an Ingress's annotation names, so that the Secret the
// translator resolves is exactly the one the watcher streams (docs/design.md, "A TLS Secret
// is on the stream only while a watched route object references it").

// ProxySSLSecretAnnotation is ingress-nginx's proxy-ssl-secret: "namespace/name" (or a name)
// of the Secret whose ca.crt verifies an Ingress's TLS endpoints and whose tls.crt and
// tls.key it presents to them.
const ProxySSLSecretAnnotation = "nginx.ingress.kubernetes.io/proxy-ssl-secret"

// CAKey is the key of the trusted certificates in a Secret (ingress-nginx's proxy-ssl-secret)
// or a ConfigMap (a BackendTLSPolicy's caCertificateRefs).
const CAKey = "ca.crt"

// ProxySSLSecret reads the value of an Ingress's proxy-ssl-secret in namespace ingressNs:
// the Secret it names, or why it names none the Ingress may use ("" when it does). Only a
// Secret of the Ingress's own namespace may be used, as ingress-nginx allows by default.
func ProxySSLSecret(ingressNs, value string) (ns, name, why string) {
	value = strings.TrimSpace(value)
	ns, name, found := strings.Cut(value, "/")
	if !found {
		ns, name = ingressNs, value
	}
	switch {
	case ns != ingressNs:
		return "", "", "is a Secret of another namespace, which an Ingress may not use"
	case name == "" || strings.Contains(name, "/"):
		return "", "", "is not namespace/name"
	}
	return ns, name, ""
}
