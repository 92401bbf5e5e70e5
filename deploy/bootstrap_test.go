package deploy_test

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/sluice-io/sluice/pusher/caddy"
)

// docs/operations.md, "Endpoints": Caddy's probes and scrapers use a metrics server that exists from Caddy's start
// (the bootstrap config) and that every config the pusher loads keeps unchanged
// (--proxy-metrics-listen renders the same server), so that probes never fail across a load.
func TestCaddyBootstrapHasThePushersMetricsServer(t *testing.T) {
	raw, err := os.ReadFile("base/pusher.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var bootstrap string
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var cm struct {
			Kind string            `json:"kind"`
			Data map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal([]byte(doc), &cm); err != nil {
			t.Fatal(err)
		}
		if cm.Kind == "ConfigMap" {
			bootstrap = cm.Data["caddy.json"]
		}
	}
	var cfg struct {
		Apps struct {
			HTTP struct {
				Metrics *json.RawMessage          `json:"metrics"`
				Servers map[string]map[string]any `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal([]byte(bootstrap), &cfg); err != nil {
		t.Fatalf("the bootstrap caddy.json does not parse: %v", err)
	}
	want, _ := json.Marshal(caddy.MetricsServer(":9180"))
	var wantObj map[string]any
	_ = json.Unmarshal(want, &wantObj)
	if !reflect.DeepEqual(cfg.Apps.HTTP.Servers["metrics"], wantObj) {
		t.Errorf("the bootstrap's metrics server\n%v\ndiffers from the pusher's\n%v", cfg.Apps.HTTP.Servers["metrics"], wantObj)
	}
	if cfg.Apps.HTTP.Metrics == nil {
		t.Error("the bootstrap does not turn Caddy's HTTP metrics on")
	}
	if !strings.Contains(string(raw), "--proxy-metrics-listen=:9180") {
		t.Error("the pusher is not run with --proxy-metrics-listen=:9180")
	}
}
