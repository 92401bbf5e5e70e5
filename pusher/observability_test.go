package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/internal/promtext"
)

// docs/operations.md, "Metrics", a data plane you can see into: with --proxy-metrics-listen and
// --proxy-access-log, the Caddy the pusher drives (the module and stock /load alike) answers
// /healthz and serves its own Prometheus metrics on that address, counting the requests it
// proxied, and writes one JSON access line per proxied request to its standard output.
func TestCaddyMetricsAndAccessLog(t *testing.T) {
	for _, target := range []string{"module", "load"} {
		t.Run(target, func(t *testing.T) {
			n := testenv.SharedNet(t)
			b, err := n.StartBackend("seen")
			if err != nil {
				t.Fatal(err)
			}
			metricsAddr := testenv.Addrs(t, 1)[0]
			fake, addr := startFake(t)
			e := startPusherOn(t, target == "load", addr, "--proxy-metrics-listen", metricsAddr, "--proxy-access-log")
			s := fake.nextStream(t)
			_ = s.send(marker("e1", 1))
			_ = s.send(configMsg(simpleConfig("e1", 1, "seen.example.com", b)))
			err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
				return get(t, e.caddy.HTTPPort, "seen.example.com", "/observed") == "seen", nil
			})
			if err != nil {
				t.Fatalf("the route was not served: %v", err)
			}

			resp, err := http.Get("http://" + metricsAddr + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("/healthz answered %d %q, want 200", resp.StatusCode, body)
			}

			mfs, err := promtext.Scrape(metricsAddr)
			if err != nil {
				t.Fatal(err)
			}
			var requests float64
			for _, m := range mfs["caddy_http_requests_total"].GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "server" && (l.GetValue() == "http") {
						requests += m.GetCounter().GetValue()
					}
				}
			}
			if requests < 1 {
				t.Errorf("caddy_http_requests_total{server=\"http\"} = %v, want the proxied requests counted; families: %v", requests, names(mfs))
			}

			// The wait above logged a 404 for every request made before the route was applied;
			// the line of the request that was served is the one to read.
			var line map[string]any
			err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				for _, l := range strings.Split(e.caddy.Process().Logs(), "\n") {
					i := strings.Index(l, "{")
					if i < 0 || !strings.Contains(l, `"/observed"`) {
						continue
					}
					var m map[string]any
					if json.Unmarshal([]byte(l[i:]), &m) == nil && m["logger"] == "http.log.access.sluice-access" {
						line = m
						if fmt.Sprint(m["status"]) == "200" {
							return true, nil
						}
					}
				}
				return false, nil
			})
			if err != nil {
				t.Fatalf("no JSON access log line of the served request (status 200) for /observed in Caddy's output:\n%s", tail(e.caddy.Process().Logs(), 20))
			}
			req, _ := line["request"].(map[string]any)
			if req["host"] != "seen.example.com" || fmt.Sprint(line["status"]) != "200" {
				t.Errorf("access log line %v: want host seen.example.com and status 200", line)
			}
		})
	}
}

func names(mfs map[string]*dto.MetricFamily) []string {
	var out []string
	for n := range mfs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
