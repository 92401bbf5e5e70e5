// Command certs writes a local CA and the certificates of Sluice's components for mTLS, and
// of the local kube-apiserver for the compose setup (`make certs`). Each component's
// certificate names its identity (spiffe://<trust-domain>/sluice/<role>, the translator's
// with its IngressClass), which the servers authorize every call by, and its container host
// name, localhost and 127.0.0.1; operator.crt is sluicectl's.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"

	"github.com/sluice-io/sluice/internal/identity"
	"github.com/sluice-io/sluice/internal/kubeconfig"
	"github.com/sluice-io/sluice/internal/pki"
)

func main() {
	out := flag.String("out", "deploy/compose/certs", "directory to write into")
	days := flag.Int("days", 365, "validity in days")
	td := flag.String("trust-domain", identity.DefaultTrustDomain, "SPIFFE trust domain of the identities")
	class := flag.String("ingress-class", "sluice", "the IngressClass the translator's identity serves")
	flag.Parse()
	if err := generate(*out, time.Duration(*days)*24*time.Hour, *td, *class); err != nil {
		fmt.Fprintf(os.Stderr, "certs: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("certs: wrote a CA and certificates for watcher, translator, pusher, operator (sluicectl), kube-apiserver and an admin client into %s\n", *out)
}

func generate(dir string, validity time.Duration, td, class string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ca, err := pki.NewCAValid("sluice-local-ca", validity)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca.CertPEM, 0o644); err != nil {
		return err
	}
	loop := []net.IP{net.ParseIP("127.0.0.1")}
	notAfter := time.Now().Add(validity)
	uri := func(r identity.Role, class string) []string {
		return []string{identity.Identity{TrustDomain: td, Role: r, Class: class}.URI()}
	}
	if err := (identity.Identity{TrustDomain: td, Role: identity.Translator, Class: class}).Validate(); err != nil {
		return err
	}
	certs := map[string]pki.CertOptions{
		"watcher":    {CommonName: "sluice-watcher", DNSNames: []string{"watcher", "sluice-watcher", "localhost"}, IPs: loop, URIs: uri(identity.Watcher, "")},
		"translator": {CommonName: "sluice-translator", DNSNames: []string{"translator", "sluice-translator", "localhost"}, IPs: loop, URIs: uri(identity.Translator, class)},
		"pusher":     {CommonName: "sluice-pusher", DNSNames: []string{"pusher", "sluice-pusher", "localhost"}, IPs: loop, URIs: uri(identity.Pusher, "")},
		"operator":   {CommonName: "sluice-operator", URIs: uri(identity.Operator, "")},
		"apiserver": {CommonName: "kube-apiserver", DNSNames: []string{"kube-apiserver", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "localhost"},
			IPs: append(loop, net.ParseIP("10.0.0.1"))},
		// The compose watcher's identity; the local profile binds it to deploy/'s ClusterRole.
		"watcher-client": {CommonName: "sluice-watcher"},
		"admin":          {CommonName: "sluice-admin", Organization: []string{"system:masters"}},
	}
	for name, o := range certs {
		o.Server, o.Client, o.NotAfter = true, true, notAfter
		if err := ca.WriteFiles(o, filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")); err != nil {
			return err
		}
	}
	// The compose containers run as a non-root user: let them read their keys.
	matches, _ := filepath.Glob(filepath.Join(dir, "*.key"))
	for _, m := range matches {
		if err := os.Chmod(m, 0o644); err != nil {
			return err
		}
	}
	sa, err := pki.ServiceAccountKeyPEM()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), sa, 0o644); err != nil {
		return err
	}
	// The compose watcher's kubeconfig for the local profile's apiserver.
	crt, err := os.ReadFile(filepath.Join(dir, "watcher-client.crt"))
	if err != nil {
		return err
	}
	key, err := os.ReadFile(filepath.Join(dir, "watcher-client.key"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "local"), 0o755); err != nil {
		return err
	}
	kc := filepath.Join(dir, "local", "kubeconfig")
	if err := kubeconfig.Write(&rest.Config{Host: "https://kube-apiserver:6443",
		TLSClientConfig: rest.TLSClientConfig{CAData: ca.CertPEM, CertData: crt, KeyData: key}}, kc); err != nil {
		return err
	}
	return os.Chmod(kc, 0o644)
}
