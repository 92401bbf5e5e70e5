package gateway_test

// The Gateway API conformance suite, run against Sluice. This test does not start anything:
// internal/harness/conformance starts the cluster in a box, Sluice and Caddy, then runs it
// with the environment below. The suite lives in this module so that its dependencies never
// enter the main module's graph.

import (
	"bytes"
	"context"
	"io/fs"
	"net"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"golang.org/x/net/websocket"

	v1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/conformance"
	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/gateway-api/conformance/utils/config"
	"sigs.k8s.io/gateway-api/conformance/utils/roundtripper"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/gateway-api/pkg/features"
)

// env returns a required variable of the driver's.
func env(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: this test is run by internal/harness/conformance (make conformance, make test)", name)
	}
	return v
}

func list(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// baseManifests is the suite's base/manifests.yaml without the coredns Deployment, Service and
// ConfigMap: only the UDPRoute tests, outside the GATEWAY-HTTP profile, use them, and the pod
// runner has no binary for the coredns image (the Pod would never be Ready and the suite's set
// up waits for every Pod of the namespace).
func baseManifests(t *testing.T) fs.FS {
	t.Helper()
	b, err := fs.ReadFile(&conformance.Manifests, "base/manifests.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var kept [][]byte
	dropped := 0
	for _, doc := range bytes.Split(b, []byte("\n---")) {
		if bytes.Contains(doc, []byte("coredns")) {
			dropped++
			continue
		}
		kept = append(kept, doc)
	}
	if dropped == 0 {
		t.Fatal("the suite's base manifests have no coredns objects any more: review baseManifests")
	}
	return fstest.MapFS{"sluice/base-manifests.yaml": &fstest.MapFile{Data: bytes.Join(kept, []byte("\n---"))}}
}

// TestSluiceConformance runs the suite's GATEWAY-HTTP profile against Sluice. Each Gateway's
// address is a documentation address of the translator's pool, which nothing listens on; the
// round tripper (and the WebSocket dialer) send what the suite addresses to ADDRESS:PORT to
// Caddy's listener of that name on loopback (SLUICE_CONFORMANCE_LISTENERS), keeping the Host
// header and SNI as they are.
func TestSluiceConformance(t *testing.T) {
	t.Setenv("KUBECONFIG", env(t, "SLUICE_CONFORMANCE_KUBECONFIG"))
	listeners := map[string]string{}
	for _, l := range list(env(t, "SLUICE_CONFORMANCE_LISTENERS")) {
		name, bind, _ := strings.Cut(l, "=")
		listeners[name] = bind
	}
	opts := conformance.DefaultOptions(t)
	opts.GatewayClassName = env(t, "SLUICE_CONFORMANCE_GATEWAY_CLASS")
	opts.ConformanceProfiles = []suite.ConformanceProfileName{suite.GatewayHTTPConformanceProfileName}
	opts.SupportedFeatures = []features.FeatureName{features.SupportGateway, features.SupportHTTPRoute, features.SupportReferenceGrant}
	for _, f := range list(os.Getenv("SLUICE_CONFORMANCE_EXTENDED")) {
		opts.SupportedFeatures = append(opts.SupportedFeatures, features.FeatureName(f))
	}
	opts.SkipTests = list(os.Getenv("SLUICE_CONFORMANCE_SKIP"))
	opts.RunTest = os.Getenv("SLUICE_CONFORMANCE_RUN_TEST")
	opts.ReportOutputPath = env(t, "SLUICE_CONFORMANCE_REPORT")
	opts.Implementation = confv1.Implementation{
		Organization: "sluice-io", Project: "sluice", URL: "https://github.com/sluice-io/sluice",
		Version: env(t, "SLUICE_CONFORMANCE_VERSION"), Contact: []string{"@sluice-io/maintainers"},
	}
	opts.ManifestFS = []fs.FS{baseManifests(t), &conformance.Manifests}
	opts.BaseManifests = "sluice/base-manifests.yaml"
	opts.TimeoutConfig = config.DefaultTimeoutConfig()
	opts.UsableNetworkAddresses = []v1.GatewaySpecAddress{{Type: ptr(v1.IPAddressType), Value: env(t, "SLUICE_CONFORMANCE_USABLE_ADDRESS")}}
	opts.UnusableNetworkAddresses = []v1.GatewaySpecAddress{{Type: ptr(v1.IPAddressType), Value: env(t, "SLUICE_CONFORMANCE_UNUSABLE_ADDRESS")}}
	// A Gateway's ADDRESS:PORT is served by Caddy's listener of that name on loopback; an
	// address without port is port 80's. Anything else is dialled as it is, and fails.
	remap := func(addr string) string {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			addr = net.JoinHostPort(addr, "80")
		}
		if bind, ok := listeners[addr]; ok {
			return bind
		}
		return addr
	}
	opts.RoundTripper = h2cRemap{remap: remap, DefaultRoundTripper: &roundtripper.DefaultRoundTripper{Debug: opts.Debug, TimeoutConfig: opts.TimeoutConfig,
		CustomDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, remap(addr))
		}}}
	opts.WebSocketDialer = wsDialer{remap: remap}
	conformance.RunConformanceWithOptions(t, opts)
}

// h2cRemap sends the suite's HTTP/2 prior-knowledge requests, whose transport dials the URL's
// address itself, to the mapped address, keeping the Host the suite meant.
type h2cRemap struct {
	*roundtripper.DefaultRoundTripper
	remap func(string) string
}

func (r h2cRemap) CaptureRoundTrip(req roundtripper.Request) (*roundtripper.CapturedRequest, *roundtripper.CapturedResponse, error) {
	if req.Protocol == roundtripper.H2CPriorKnowledgeProtocol {
		if req.Host == "" {
			req.Host = req.URL.Host
		}
		req.URL.Host = r.remap(req.URL.Host)
	}
	return r.DefaultRoundTripper.CaptureRoundTrip(req)
}

// wsDialer opens the suite's WebSocket connections to the mapped address: the handshake
// still names the address the suite meant.
type wsDialer struct{ remap func(string) string }

func (d wsDialer) Dial(url, protocol, origin string) (*websocket.Conn, error) {
	cfg, err := websocket.NewConfig(url, origin)
	if err != nil {
		return nil, err
	}
	if protocol != "" {
		cfg.Protocol = []string{protocol}
	}
	conn, err := net.Dial("tcp", d.remap(cfg.Location.Host))
	if err != nil {
		return nil, err
	}
	ws, err := websocket.NewClient(cfg, conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return ws, nil
}

func ptr[T any](v T) *T { return &v }
