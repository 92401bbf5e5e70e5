package main_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/internal/identity"
	"github.com/sluice-io/sluice/internal/pki"
	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// identities writes a CA and the watcher's, a translator's and an operator's certificates
// into dir, and returns the watcher's TLS flags and the clients' TLS settings.
func identities(t *testing.T, dir string) (watcherArgs []string, translator, operator grpcx.TLSFiles) {
	t.Helper()
	ca, err := pki.NewCA("sluice-test-ca")
	if err != nil {
		t.Fatal(err)
	}
	caPath := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caPath, ca.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	issue := func(name string, id identity.Identity) grpcx.TLSFiles {
		o := pki.CertOptions{CommonName: "sluice-" + name, DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")},
			URIs: []string{id.URI()}, Server: true, Client: true}
		f := grpcx.TLSFiles{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key"), CA: caPath, ExpectRole: identity.Watcher}
		if err := ca.WriteFiles(o, f.Cert, f.Key); err != nil {
			t.Fatal(err)
		}
		return f
	}
	td := identity.DefaultTrustDomain
	w := issue("watcher", identity.Identity{TrustDomain: td, Role: identity.Watcher})
	translator = issue("translator", identity.Identity{TrustDomain: td, Role: identity.Translator, Class: "sluice"})
	operator = issue("operator", identity.Identity{TrustDomain: td, Role: identity.Operator})
	return []string{"--tls-cert", w.Cert, "--tls-key", w.Key, "--tls-ca", w.CA}, translator, operator
}

// streamSecrets are the Secrets a follower's mirror holds, as "namespace/name", sorted, and
// whether each carries a private key.
func streamSecrets(t *testing.T, f *follower) map[string]bool {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]bool{}
	for _, o := range f.mirror.Objects() {
		if o.GetKind().GetKind() != "Secret" {
			continue
		}
		obj, err := watchstream.Decode(o)
		if err != nil {
			t.Fatal(err)
		}
		out[o.GetNamespace()+"/"+o.GetName()] = len(obj.(*corev1.Secret).Data[corev1.TLSPrivateKeyKey]) > 0
	}
	return out
}

// position is the index in f.msgs of the first upsert or delete of kind namespace/name, -1
// when there is none.
func (f *follower) position(upsert bool, kind, ns, name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, m := range f.msgs {
		o := m.GetDelete().GetObject()
		if upsert {
			o = m.GetUpsert().GetObject()
		}
		if o != nil && o.GetKind().GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name {
			return i
		}
	}
	return -1
}

// everSeen reports whether any message of f named the Secret ns/name.
func (f *follower) everSeen(ns, name string) bool {
	return f.position(true, "Secret", ns, name) >= 0 || f.position(false, "Secret", ns, name) >= 0
}

// docs/design.md, the watch stream: a TLS Secret is on the stream only while a watched route
// object references it. Against the real apiserver, read with a translator's certificate
// (private keys included) and an operator's (keys removed): an unreferenced Secret, a CA
// like the one the cert-manager overlay creates, and a Secret of another namespace that a
// Gateway names without a grant never appear; a referenced one does, with its key; one that
// becomes referenced after the marker comes before the event that references it; removing
// the reference or the grant deletes it from the stream; the marker counts exactly the
// Secrets served.
func TestTLSSecretsOnlyWhileReferenced(t *testing.T) {
	c := testenv.SharedCluster(t)
	withoutGatewayAPI(t, c)
	testenv.InstallGatewayAPICRDs(t, c)
	ctx := context.Background()
	app, other, system := c.Namespace(t), c.Namespace(t), c.Namespace(t)
	secret := func(ns, name string, certPEM, keyPEM []byte) {
		t.Helper()
		if _, err := c.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	crt, key, err := pki.SelfSigned("app.example.test")
	if err != nil {
		t.Fatal(err)
	}
	ownCA, err := pki.NewCA("sluice-ca")
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(ownCA.Key)
	if err != nil {
		t.Fatal(err)
	}
	caKey := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	secret(app, "used", crt, key)
	secret(app, "later", crt, key)
	secret(other, "shared", crt, key)
	secret(system, "sluice-ca", ownCA.CertPEM, caKey) // the CA the cert-manager overlay keeps, isCA
	ingress := func(name string, secrets ...string) *networkingv1.Ingress {
		class := "sluice"
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.IngressSpec{IngressClassName: &class,
			DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "svc", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}
		for _, s := range secrets {
			ing.Spec.TLS = append(ing.Spec.TLS, networkingv1.IngressTLS{Hosts: []string{"app.example.test"}, SecretName: s})
		}
		return ing
	}
	if _, err := c.Client.NetworkingV1().Ingresses(app).Create(ctx, ingress("web", "used"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gw := unstructuredOf(map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": "gw", "namespace": app},
		"spec": map[string]any{"gatewayClassName": "sluice", "listeners": []any{
			map[string]any{"name": "https", "protocol": "HTTPS", "port": int64(443), "hostname": "gw.example.test",
				"tls": map[string]any{"certificateRefs": []any{map[string]any{"name": "shared", "namespace": other}}}}}}})
	if _, err := c.Dynamic().Resource(gatewayGVR).Namespace(app).Create(ctx, gw, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	tlsArgs, translatorTLS, operatorTLS := identities(t, t.TempDir())
	w := startWatcher(t, c.AdminKubeconfig, append([]string{"--namespaces", strings.Join([]string{app, other, system}, ","),
		"--kinds", namespacedKinds, "--gateway-api", "on"}, tlsArgs...)...)
	tr := followAs(t, w.addr, translatorTLS, &watchv1.WatchRequest{ClientName: "translator"})
	tr.waitMarker(time.Minute)
	op := followAs(t, w.addr, operatorTLS, &watchv1.WatchRequest{ClientName: "operator"})
	op.waitMarker(time.Minute)

	usedKey := app + "/used"
	if got := streamSecrets(t, tr); len(got) != 1 || !got[usedKey] {
		t.Fatalf("the translator's stream holds Secrets %v at the marker; want only %s, with its key", got, usedKey)
	}
	if got := streamSecrets(t, op); len(got) != 1 || got[usedKey] {
		t.Fatalf("the operator's stream holds Secrets %v (true: with a key) at the marker; want only %s, without its key", got, usedKey)
	}
	for _, f := range []*follower{tr, op} {
		f.mu.Lock()
		for _, inv := range f.msgs[f.markerAt].GetInitialSyncComplete().GetInventory() {
			if inv.GetKind().GetKind() == "Secret" && inv.GetCount() != 1 {
				t.Errorf("the marker counts %d Secrets; one is served", inv.GetCount())
			}
		}
		f.mu.Unlock()
	}

	// A reference made after the marker: the Secret comes before the Ingress naming it.
	if _, err := c.Client.NetworkingV1().Ingresses(app).Create(ctx, ingress("late", "later"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr.waitFor(time.Minute, "the Ingress naming app/later", func(m *watchstream.Mirror) bool {
		return m.Object(watchstream.ObjectKey{Kind: "networking.k8s.io/v1/Ingress", Namespace: app, Name: "late"}) != nil
	})
	if s, i := tr.position(true, "Secret", app, "later"), tr.position(true, "Ingress", app, "late"); s < 0 || s > i {
		t.Fatalf("Secret %s/later at message %d, the Ingress naming it at %d: the Secret must come first", app, s, i)
	}

	// A grant in the Secret's namespace: the Secret comes before the grant.
	grant := unstructuredOf(map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "ReferenceGrant",
		"metadata": map[string]any{"name": "allow-app", "namespace": other},
		"spec": map[string]any{"from": []any{map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": app}},
			"to": []any{map[string]any{"group": "", "kind": "Secret"}}}})
	if _, err := c.Dynamic().Resource(referenceGrantGVR).Namespace(other).Create(ctx, grant, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr.waitFor(time.Minute, "the ReferenceGrant", func(m *watchstream.Mirror) bool {
		return m.Object(watchstream.ObjectKey{Kind: "gateway.networking.k8s.io/v1/ReferenceGrant", Namespace: other, Name: "allow-app"}) != nil
	})
	if s, g := tr.position(true, "Secret", other, "shared"), tr.position(true, "ReferenceGrant", other, "allow-app"); s < 0 || s > g {
		t.Fatalf("Secret %s/shared at message %d, the grant allowing it at %d: the Secret must come first", other, s, g)
	}
	if got := streamSecrets(t, tr); !got[other+"/shared"] {
		t.Fatalf("granted Secret %s/shared not held with its key: %v", other, got)
	}

	// The grant goes: the Secret's delete follows it.
	if err := c.Dynamic().Resource(referenceGrantGVR).Namespace(other).Delete(ctx, "allow-app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tr.waitFor(time.Minute, "the grant's Secret deleted", func(m *watchstream.Mirror) bool {
		return m.Object(watchstream.ObjectKey{Kind: "/v1/Secret", Namespace: other, Name: "shared"}) == nil
	})
	if g, s := tr.position(false, "ReferenceGrant", other, "allow-app"), tr.position(false, "Secret", other, "shared"); g < 0 || s < g {
		t.Fatalf("the grant's delete at message %d, the Secret's at %d: the Secret's must follow", g, s)
	}
	// The last reference goes: the Secret's delete follows the Ingress's change.
	if _, err := c.Client.NetworkingV1().Ingresses(app).Update(ctx, withRV(t, c, app, ingress("late")), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr.waitFor(time.Minute, "app/later deleted from the stream", func(m *watchstream.Mirror) bool {
		return m.Object(watchstream.ObjectKey{Kind: "/v1/Secret", Namespace: app, Name: "later"}) == nil
	})
	// A last change, so that everything before it has reached both followers.
	if _, err := c.Client.NetworkingV1().Ingresses(app).Create(ctx, ingress("last"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []*follower{tr, op} {
		f.waitFor(time.Minute, "the last Ingress", func(m *watchstream.Mirror) bool {
			return m.Object(watchstream.ObjectKey{Kind: "networking.k8s.io/v1/Ingress", Namespace: app, Name: "last"}) != nil
		})
		if f.everSeen(system, "sluice-ca") {
			t.Fatal("the CA's Secret, which no route references, reached a Watch stream")
		}
		want := []string{usedKey}
		var got []string
		for k := range streamSecrets(t, f) {
			got = append(got, k)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("Secrets held at the end: %v; want %v", got, want)
		}
	}
	if !op.everSeen(other, "shared") || !op.everSeen(app, "later") {
		t.Fatal("the operator's redacted stream did not follow the same Secrets as the translator's")
	}
}

var referenceGrantGVR = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "referencegrants"}

// withRV sets ing's resourceVersion to the stored one, for an Update.
func withRV(t *testing.T, c *testenv.Cluster, ns string, ing *networkingv1.Ingress) *networkingv1.Ingress {
	t.Helper()
	cur, err := c.Client.NetworkingV1().Ingresses(ns).Get(context.Background(), ing.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ing.ResourceVersion = cur.ResourceVersion
	return ing
}
