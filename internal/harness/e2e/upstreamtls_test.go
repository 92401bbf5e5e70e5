package e2e_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sluice-io/sluice/internal/harness/stack"
	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/internal/pki"
)

// docs/translation.md, "Upstream TLS", end to end: Pods that serve HTTPS with a certificate
// of the cluster's own CA, an Ingress that verifies them with ingress-nginx's proxy-ssl-*
// annotations against an Opaque Secret holding that CA (which the watcher lists and streams
// only its certificates of), another that presents a client certificate from a
// kubernetes.io/tls Secret. Replacing the trusted CA makes the proxy refuse the endpoints
// (502), and putting it back serves them again: the Secret's changes reach the proxy.
func TestUpstreamTLSVerifiesEndpointsAndPresentsTheClientCertificate(t *testing.T) {
	w := newWorld(t, true, stack.Config{})
	ctx := context.Background()
	ca, err := pki.NewCA("upstream-ca")
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("other-ca")
	if err != nil {
		t.Fatal(err)
	}
	serverCrt, serverKey, err := ca.Issue(pki.CertOptions{CommonName: "secure", DNSNames: []string{"secure.internal"}, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	clientCrt, clientKey, err := ca.Issue(pki.CertOptions{CommonName: "sluice-proxy", Client: true})
	if err != nil {
		t.Fatal(err)
	}

	// The backend Pods serve HTTPS on a port of their own, and ask for a client certificate.
	d := testenv.BackendDeployment("secure", 1, 0)
	c := &d.Spec.Template.Spec.Containers[0]
	c.Ports = append(c.Ports, corev1.ContainerPort{Name: "https", ContainerPort: 8443})
	c.Env = append(c.Env, corev1.EnvVar{Name: "TLS_CERT", Value: string(serverCrt)}, corev1.EnvVar{Name: "TLS_KEY", Value: string(serverKey)},
		corev1.EnvVar{Name: "CLIENT_CA", Value: string(ca.CertPEM)})
	if _, err := w.c.Client.AppsV1().Deployments(w.ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := testenv.BackendService("secure")
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "https", Port: 443, TargetPort: intstr.FromString("https")})
	if _, err := w.c.Client.CoreV1().Services(w.ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := w.c.WaitDeploymentReady(ctx, w.ns, "secure", "secure"); err != nil {
		t.Fatal(err)
	}

	secrets := w.c.Client.CoreV1().Secrets(w.ns)
	caSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "upstream-ca"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"ca.crt": ca.CertPEM, "unrelated": []byte("never leaves the watcher")}}
	if _, err := secrets.Create(ctx, caSecret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "upstream-client"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"ca.crt": ca.CertPEM, "tls.crt": clientCrt, "tls.key": clientKey}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	upstream := func(name, host, secret string) *networkingv1.Ingress {
		ing := ingress(name, host, "secure")
		ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port = networkingv1.ServiceBackendPort{Name: "https"}
		ing.Annotations = map[string]string{
			"nginx.ingress.kubernetes.io/backend-protocol":      "HTTPS",
			"nginx.ingress.kubernetes.io/proxy-ssl-secret":      w.ns + "/" + secret,
			"nginx.ingress.kubernetes.io/proxy-ssl-verify":      "on",
			"nginx.ingress.kubernetes.io/proxy-ssl-name":        "secure.internal",
			"nginx.ingress.kubernetes.io/proxy-ssl-server-name": "on",
		}
		return ing
	}
	verified, mutual := "verified."+w.ns+".example.com", "mutual."+w.ns+".example.com"
	for _, ing := range []*networkingv1.Ingress{upstream("verified", verified, "upstream-ca"), upstream("mutual", mutual, "upstream-client")} {
		if _, err := w.c.Client.NetworkingV1().Ingresses(w.ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// ask is what a request for host gets: "secure over TLS as CLIENT", or the status.
	ask := func(host string) string {
		req, _ := http.NewRequest(http.MethodGet, "http://"+w.st.HTTPAddr()+"/", nil)
		req.Host = host
		resp, err := (&http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{}}}).Do(req)
		if err != nil {
			return "error: " + err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Sprint(resp.StatusCode)
		}
		var a testenv.BackendAnswer
		if err := json.Unmarshal(body, &a); err != nil {
			return "unparsable"
		}
		return fmt.Sprintf("%s tls=%t client=%q", a.Backend, a.TLS, a.Client)
	}
	wait := func(host, want string) {
		t.Helper()
		testenv.Eventually(t, 60*time.Second, host+" to answer "+want, func() (bool, error) {
			if got := ask(host); got != want {
				return false, fmt.Errorf("got %s", got)
			}
			return true, nil
		})
	}
	wait(verified, `secure tls=true client=""`)
	wait(mutual, `secure tls=true client="sluice-proxy"`)

	// Another CA trusted: the endpoints are not, and get no request.
	caSecret.Data["ca.crt"] = other.CertPEM
	if _, err := secrets.Update(ctx, caSecret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait(verified, "502")
	wait(mutual, `secure tls=true client="sluice-proxy"`) // its own Secret did not change
	caSecret.Data["ca.crt"] = ca.CertPEM
	if _, err := secrets.Update(ctx, caSecret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait(verified, `secure tls=true client=""`)
}
