package smoke_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"

	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/internal/promtext"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

// Each binary, started as a real process, serves gRPC health and its services to a client in
// another package that imports only the generated code, serves /healthz and /metrics, and
// stops cleanly (exit 0) on SIGTERM.
func TestEachBinaryServesHealthAndStopsOnSIGTERM(t *testing.T) {
	c := testenv.SharedCluster(t)
	cases := []struct {
		bin      string
		args     []string
		services []string
	}{
		{"watcher", []string{"--kubeconfig", c.AdminKubeconfig}, []string{watchv1.WatchService_ServiceDesc.ServiceName}},
		{"translator", nil, []string{configv1.ConfigService_ServiceDesc.ServiceName}},
		{"pusher", []string{"--caddy-admin", "http://127.0.0.1:1"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.bin, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			bin, err := testenv.Binary(tc.bin)
			if err != nil {
				t.Fatal(err)
			}
			grpcAddr, _ := testenv.FreeAddr()
			httpAddr, _ := testenv.FreeAddr()
			p, err := testenv.StartProcess(testenv.ProcessConfig{Name: tc.bin, Path: bin,
				Args: append([]string{"--listen", grpcAddr, "--http-listen", httpAddr}, tc.args...)})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Kill()
			conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
			if err != nil {
				t.Fatalf("health: %v\n%s", err, p.LogTail(20))
			}
			if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("health status %s", resp.GetStatus())
			}
			listed := listServices(t, ctx, conn)
			for _, s := range tc.services {
				if !strings.Contains(listed, s) {
					t.Errorf("service %s not served; reflection lists %s", s, listed)
				}
			}
			for _, path := range []string{"/healthz", "/metrics"} {
				if code, body := httpGet(t, "http://"+httpAddr+path); code != http.StatusOK {
					t.Errorf("%s: %d %s", path, code, body)
				}
			}
			if err := p.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code, err := p.Wait(ctx); err != nil || code != 0 {
				t.Fatalf("exit after SIGTERM: code %d, %v\n%s", code, err, p.LogTail(20))
			}
		})
	}
}

func listServices(t *testing.T, ctx context.Context, conn *grpc.ClientConn) string {
	t.Helper()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	return strings.Join(names, ",")
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Bad settings exit with code 2 and one line that names the setting, before anything starts.
func TestBadSettingsExitWithOneLineNamingTheSetting(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		bin  string
		args []string
		env  []string
		want string
	}{
		{"watcher", []string{"--no-such-flag"}, nil, "unknown flag: --no-such-flag"},
		{"watcher", []string{"--listen", "localhost"}, nil, `--listen (SLUICE_LISTEN) "localhost"`},
		{"translator", []string{"--watcher-addr", "a:b:c"}, nil, "--watcher-addr"},
		{"translator", nil, []string{"SLUICE_HOLDOFF=soon"}, `--holdoff (SLUICE_HOLDOFF) "soon"`},
		{"pusher", []string{"--tls-cert", dir + "/missing.pem", "--tls-key", dir + "/missing.key"}, nil, "--tls-cert (SLUICE_TLS_CERT)"},
		{"pusher", []string{"--caddy-admin", "ftp://x"}, nil, "--caddy-admin"},
		{"pusher", []string{"--config", dir + "/nope.yaml"}, nil, "--config"},
		// No accidental exposure (docs/operations.md, "Security model").
		{"pusher", []string{"--caddy-admin", "http://10.0.0.1:2019"}, nil, "must be a loopback address (http://127.0.0.1:2019) or a unix socket"},
		{"translator", []string{"--pprof", "0.0.0.0:6060"}, nil, `--pprof (SLUICE_PPROF) "0.0.0.0:6060": must be a loopback address`},
		{"translator", []string{"--listen", "0.0.0.0:0"}, nil, `--listen (SLUICE_LISTEN) "0.0.0.0:0": serving gRPC off loopback without mutual TLS`},
		{"pusher", []string{"--translator-addr", "10.0.0.9:18010"}, nil, `--translator-addr (SLUICE_TRANSLATOR_ADDR) "10.0.0.9:18010": connecting off loopback without mutual TLS`},
	}
	for i, tc := range cases {
		t.Run(fmt.Sprintf("%s-%d", tc.bin, i), func(t *testing.T) {
			bin, err := testenv.Binary(tc.bin)
			if err != nil {
				t.Fatal(err)
			}
			p, err := testenv.StartProcess(testenv.ProcessConfig{Name: tc.bin, Path: bin, Args: tc.args, Env: tc.env, Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			code, err := p.Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out := strings.TrimSpace(p.Logs())
			lines := strings.Split(out, "\n")
			// The first line of the log file is testenv's own command line.
			msg := strings.Join(lines[1:], "\n")
			if code != 2 || len(lines) != 2 || !strings.Contains(msg, tc.want) || !strings.HasPrefix(msg, tc.bin+": ") {
				t.Fatalf("exit %d, output:\n%s\nwant exit 2 and one line containing %q", code, msg, tc.want)
			}
		})
	}
}

// Scenario (docs/design.md, "Cold start": memory): each binary, started in a memory cgroup
// as a container with a memory limit would be, reads that limit from the kernel and sets
// the Go runtime's soft limit to 90% of what it leaves beside the pages of the binary the
// process has mapped (it logs how many), so that near its budget it collects garbage harder
// rather than being killed or reclaiming its own code; AUTOMEMLIMIT=off leaves the runtime
// without one. The runtime's own figure is read from /metrics (go_gc_gomemlimit_bytes).
func TestEachBinaryTakesItsContainersMemoryLimit(t *testing.T) {
	c := testenv.SharedCluster(t)
	const limit uint64 = 256 << 20
	ratio := 0.9 // the share internal/cli gives the runtime
	cases := []struct {
		bin  string
		args []string
	}{
		{"watcher", []string{"--kubeconfig", c.AdminKubeconfig}},
		{"translator", nil},
		{"pusher", []string{"--caddy-admin", "http://127.0.0.1:1"}},
	}
	for _, tc := range cases {
		for _, off := range []bool{false, true} {
			name, env := tc.bin, []string(nil)
			if off {
				name, env = tc.bin+"/AUTOMEMLIMIT=off", []string{"AUTOMEMLIMIT=off"}
			}
			t.Run(name, func(t *testing.T) {
				bin, err := testenv.Binary(tc.bin)
				if err != nil {
					t.Fatal(err)
				}
				grpcAddr, _ := testenv.FreeAddr()
				httpAddr, _ := testenv.FreeAddr()
				p, err := testenv.StartProcess(testenv.ProcessConfig{Name: tc.bin, Path: bin, Env: append(env, "GOMEMLIMIT="), MemoryLimit: limit,
					Args: append([]string{"--listen", grpcAddr, "--http-listen", httpAddr}, tc.args...)})
				if err != nil {
					t.Fatal(err)
				}
				defer p.Kill()
				var got float64
				testenv.Eventually(t, time.Minute, tc.bin+" to serve /metrics", func() (bool, error) {
					if p.Exited() {
						return false, testenv.Permanent(fmt.Errorf("%s exited with code %d:\n%s", tc.bin, p.ExitCode(), p.LogTail(20)))
					}
					fams, err := promtext.Scrape(httpAddr)
					if err != nil {
						return false, err
					}
					if _, ok := fams["go_gc_gomemlimit_bytes"]; !ok {
						return false, testenv.Permanent(errors.New("/metrics has no go_gc_gomemlimit_bytes"))
					}
					got = promtext.Sum(fams, "go_gc_gomemlimit_bytes", nil)
					return true, nil
				})
				want := float64(math.MaxInt64) // no limit
				if !off {
					// What the process had mapped of its binary is its own reading: taken from its log.
					m := regexp.MustCompile(`binary_resident_bytes=(\d+)`).FindStringSubmatch(p.Logs())
					if m == nil {
						t.Fatalf("no binary_resident_bytes logged:\n%s", p.LogTail(20))
					}
					mapped, _ := strconv.ParseUint(m[1], 10, 64)
					if mapped == 0 || mapped > limit/2 {
						t.Fatalf("binary_resident_bytes=%d: want some, under half the limit", mapped)
					}
					want = float64(uint64(float64(limit-mapped) * ratio))
				}
				if got != want {
					t.Errorf("go_gc_gomemlimit_bytes = %.0f in a cgroup limited to %d bytes, want %.0f\n%s", got, limit, want, p.LogTail(20))
				}
				if st, err := p.MemoryStats(); err != nil {
					t.Errorf("memory cgroup: %v", err)
				} else if st.OOMKills != 0 || st.Peak == 0 {
					t.Errorf("memory cgroup counted %+v: want a peak and no OOM kill", st)
				}
			})
		}
	}
}
