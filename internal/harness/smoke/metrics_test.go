package smoke_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/internal/promtext"
)

// Observability (docs/operations.md, "Metrics"): each binary answers --version, and its /metrics carries
// sluice_build_info and the gRPC server metrics (a health check it answered is counted with
// its method and code); the translator and the pusher, which dial upstream, also carry the
// gRPC client metrics of their streams.
func TestEachBinaryExposesBuildInfoAndRPCMetrics(t *testing.T) {
	c := testenv.SharedCluster(t)
	// The three as a chain (watcher <- translator <- pusher, with its Caddy), so that the
	// translator and the pusher hold a stream upstream.
	cd, err := testenv.StartCaddy(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer cd.Kill()
	grpcAddr := map[string]string{}
	for _, b := range []string{"watcher", "translator", "pusher"} {
		grpcAddr[b], _ = testenv.FreeAddr()
	}
	for _, tc := range []struct {
		bin    string
		args   []string
		client bool
	}{
		{"watcher", []string{"--kubeconfig", c.AdminKubeconfig}, false},
		{"translator", []string{"--watcher-addr", grpcAddr["watcher"]}, true},
		{"pusher", []string{"--caddy-admin", cd.AdminURL, "--translator-addr", grpcAddr["translator"],
			"--proxy-http-listen", fmt.Sprintf("127.0.0.1:%d", cd.HTTPPort), "--proxy-https-listen", fmt.Sprintf("127.0.0.1:%d", cd.HTTPSPort)}, true},
	} {
		bin, err := testenv.Binary(tc.bin)
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "--version").Output()
		if err != nil || !strings.HasPrefix(string(out), tc.bin+" ") || !strings.Contains(string(out), "revision") {
			t.Errorf("%s --version = %q, %v; want its name, version and revision", tc.bin, out, err)
		}

		httpAddr, _ := testenv.FreeAddr()
		p, err := testenv.StartProcess(testenv.ProcessConfig{Name: tc.bin, Path: bin,
			Args: append([]string{"--listen", grpcAddr[tc.bin], "--http-listen", httpAddr}, tc.args...)})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Kill()
		conn, err := grpc.NewClient(grpcAddr[tc.bin], grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true)); err != nil {
			t.Fatalf("%s health: %v\n%s", tc.bin, err, p.LogTail(20))
		}

		want := []struct {
			name   string
			labels map[string]string
		}{
			{"sluice_build_info", map[string]string{"version": "", "revision": "", "go_version": ""}},
			{"grpc_server_handled_total", map[string]string{"grpc_method": "Check", "grpc_code": "OK"}},
		}
		if tc.client {
			want = append(want, struct {
				name   string
				labels map[string]string
			}{"grpc_client_started_total", map[string]string{"grpc_type": "bidi_stream"}})
		}
		testenv.Eventually(t, 30*time.Second, tc.bin+"'s metrics", func() (bool, error) {
			mfs, err := promtext.Scrape(httpAddr)
			if err != nil {
				return false, err
			}
			for _, w := range want {
				if !has(mfs[w.name], w.labels) {
					return false, fmt.Errorf("no %s%v", w.name, w.labels)
				}
			}
			return true, nil
		})
	}
}

// has reports whether mf has a series with the labels (an empty value: any, but present).
func has(mf *dto.MetricFamily, labels map[string]string) bool {
series:
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if g, ok := got[k]; !ok || v != "" && g != v {
				continue series
			}
		}
		return true
	}
	return false
}
