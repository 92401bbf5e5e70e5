package caddy

import (
	"encoding/json"
	"strings"
	"testing"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// Every redirect status the Gateway API allows (301, 302, 303, 307, 308) is rendered as a
// static_response with that status; any other is refused, naming the route.
func TestRenderRedirectStatusCodes(t *testing.T) {
	for _, code := range []uint32{301, 302, 303, 307, 308, 304} {
		res := &configv1.Resources{VirtualHosts: []*configv1.VirtualHost{{
			Hostname: "r.example.com",
			Routes: []*configv1.Route{{Name: "r", Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"},
				Redirect: &configv1.Redirect{Hostname: "to.example.com", StatusCode: code}}},
		}}}
		body, _, err := Render(&configv1.Config{Epoch: "e", Version: 1, Resources: res}, goldenOptions)
		if code == 304 {
			if err == nil || !strings.Contains(err.Error(), "route r") {
				t.Errorf("status %d: %v, want the route refused", code, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("status %d: %v", code, err)
		}
		var codes []int
		collectStatusCodes(t, body, &codes)
		if len(codes) == 0 {
			t.Fatalf("status %d: no static_response rendered", code)
		}
		for _, c := range codes {
			if c != int(code) {
				t.Errorf("status %d rendered as %d", code, c)
			}
		}
	}
}

// collectStatusCodes appends the status_code of every static_response handler in doc.
func collectStatusCodes(t *testing.T, doc []byte, out *[]int) {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["handler"] == "static_response" {
				if c, ok := v["status_code"].(float64); ok && c >= 300 && c < 400 {
					*out = append(*out, int(c))
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
}
