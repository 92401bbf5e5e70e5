package cli

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/identity"
)

// The connection bounds default to an hour of age, a minute of grace and 100 streams per
// connection; a bound that is not positive is refused, naming its setting.
func TestConnectionBoundsDefaultsAndValidation(t *testing.T) {
	parse := func(args ...string) *ConnectionBounds {
		t.Helper()
		var b ConnectionBounds
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		b.Register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return &b
	}
	if b := parse(); *b != (ConnectionBounds{MaxConnectionAge: time.Hour, MaxConnectionAgeGrace: time.Minute, MaxStreamsPerConnection: 100}) || b.Validate() != nil {
		t.Fatalf("defaults %+v (valid: %v), want 1h, 1m and 100", *b, b.Validate())
	}
	for _, c := range []struct {
		args    []string
		setting string
	}{
		{[]string{"--max-connection-age", "0s"}, "max-connection-age"},
		{[]string{"--max-connection-age", "-1m"}, "max-connection-age"},
		{[]string{"--max-connection-age-grace", "0s"}, "max-connection-age-grace"},
		{[]string{"--max-streams-per-connection", "0"}, "max-streams-per-connection"},
	} {
		var cfgErr *config.Error
		if err := parse(c.args...).Validate(); !errors.As(err, &cfgErr) || cfgErr.Setting != c.setting {
			t.Errorf("%v: %v, want an error naming %s", c.args, err, c.setting)
		}
	}
	var cfgErr *config.Error
	if err := CheckMaxOperatorStreams(0); !errors.As(err, &cfgErr) || cfgErr.Setting != "max-operator-streams" {
		t.Errorf("--max-operator-streams 0: %v, want an error naming it", err)
	}
}

// A stream refused by the stream limits is counted in sluice_grpc_streams_limited_total
// with its method and the caller's role.
func TestServingCountsLimitedStreams(t *testing.T) {
	s, err := NewServing(ServingConfig{Logger: hclog.NewNullLogger(), Listen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0",
		StreamLimits: map[string]grpcx.StreamLimit{identity.HealthWatch: {Default: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeAll(s.httpLis) })
	go s.GRPC.Server.Serve(s.grpcLis)
	t.Cleanup(s.GRPC.Stop)
	conn, err := grpcx.Dial(s.grpcLis.Addr().String(), grpcx.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for range 2 {
		w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = w.Recv()
		}
		errs = append(errs, err)
	}
	if errs[0] != nil || status.Code(errs[1]) != codes.ResourceExhausted {
		t.Fatalf("streams ended %v, want the second refused", errs)
	}
	mfs, err := s.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got float64
	for _, mf := range mfs {
		if mf.GetName() != "sluice_grpc_streams_limited_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["method"] == identity.HealthWatch && labels["role"] == "anonymous" {
				got = m.GetCounter().GetValue()
			}
		}
	}
	if got != 1 {
		t.Fatalf("sluice_grpc_streams_limited_total{method=%q,role=\"anonymous\"} = %v, want 1", identity.HealthWatch, got)
	}
}
