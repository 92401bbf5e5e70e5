package app

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/sluice-io/sluice/internal/config"
)

// settingsFrom registers the settings (with env as the Pod's) and parses args, as cli.Main
// does before it validates.
func settingsFrom(t *testing.T, env Env, args ...string) *Settings {
	t.Helper()
	s := &Settings{Env: env}
	fs := pflag.NewFlagSet("watcher", pflag.ContinueOnError)
	s.Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return s
}

// Bad settings are refused before anything starts (exit 2), each with one error that names the
// setting at fault.
func TestValidateNamesTheSettingAtFault(t *testing.T) {
	leader := []string{"--leader-elect", "--id", "w-0", "--advertise-addr", "10.0.0.1:18000"}
	for _, tc := range []struct {
		name    string
		args    []string
		setting string
	}{
		{"listen not host:port", []string{"--listen", "nowhere"}, "listen"},
		{"http-listen not host:port", []string{"--http-listen", "nowhere"}, "http-listen"},
		{"kubeconfig unreadable", []string{"--kubeconfig", "/nonexistent/kubeconfig"}, "kubeconfig"},
		{"sync-timeout zero", []string{"--sync-timeout", "0s"}, "sync-timeout"},
		{"no kind", []string{"--kinds="}, "kinds"},
		{"kind malformed", []string{"--kinds", "not a kind"}, "kinds"},
		{"gateway kind in --kinds", []string{"--kinds", "gateway.networking.k8s.io/v1/httproutes"}, "kinds"},
		{"gateway kind in --optional-kinds", []string{"--optional-kinds", "gateway.networking.k8s.io/v1/gateways"}, "optional-kinds"},
		{"gateway-api unknown", []string{"--gateway-api", "maybe"}, "gateway-api"},
		{"gateway-translator-class empty", []string{"--gateway-translator-class", ""}, "gateway-translator-class"},
		{"gateway-translator-class with a slash", []string{"--gateway-translator-class", "a/b"}, "gateway-translator-class"},
		{"discovery-interval zero", []string{"--discovery-interval", "0s"}, "discovery-interval"},
		{"history-size zero", []string{"--history-size", "0"}, "history-size"},
		{"client-buffer zero", []string{"--client-buffer", "0"}, "client-buffer"},
		{"kube-burst zero", []string{"--kube-burst", "0"}, "kube-burst"},
		{"max-streams zero", []string{"--max-streams", "0"}, "max-streams"},
		{"heartbeat zero", []string{"--heartbeat", "0s"}, "heartbeat"},
		{"kube-qps zero", []string{"--kube-qps", "0"}, "kube-qps"},
		{"status-qps zero", []string{"--status-qps", "0"}, "status-qps"},
		{"status-burst zero", []string{"--status-burst", "0"}, "status-burst"},
		{"status-workers zero", []string{"--status-workers", "0"}, "status-workers"},
		{"advertise-addr not host:port", []string{"--advertise-addr", "nowhere"}, "advertise-addr"},
		{"id with @", append(leader, "--id", "w@0"), "id"},
		{"id empty", append(leader, "--id", ""), "id"},
		{"advertise-addr unreachable with leader election", []string{"--leader-elect", "--id", "w-0", "--listen", "0.0.0.0:18000", "--insecure"}, "advertise-addr"},
		{"lease name empty", append(leader, "--leader-elect-lease-name", ""), "leader-elect-lease-name"},
		{"lease duration not above renew deadline", append(leader, "--leader-elect-lease-duration", "10s"), "leader-elect-lease-duration"},
		{"renew deadline not above 1.2 x retry period", append(leader, "--leader-elect-retry-period", "9s"), "leader-elect-renew-deadline"},
		{"pprof off loopback", []string{"--pprof", "0.0.0.0:6060"}, "pprof"},
		{"max-message-size tiny", []string{"--max-message-size", "1024"}, "max-message-size"},
		{"listen off loopback without mTLS", []string{"--listen", "0.0.0.0:18000"}, "listen"},
		{"send-timeout zero", []string{"--send-timeout", "0s"}, "send-timeout"},
		{"tls-cert without tls-key", []string{"--tls-cert", "/dev/null"}, "tls-key"},
		{"trust-domain with a slash", []string{"--trust-domain", "a/b"}, "trust-domain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := settingsFrom(t, Env{}, tc.args...).Validate()
			var cfgErr *config.Error
			if !errors.As(err, &cfgErr) {
				t.Fatalf("Validate() = %v, want a *config.Error naming --%s", err, tc.setting)
			}
			if cfgErr.Setting != tc.setting || !strings.Contains(err.Error(), "--"+tc.setting+" ") {
				t.Fatalf("Validate() = %q, want it to name --%s", err, tc.setting)
			}
		})
	}
}

// The defaults are valid, and so is each setting's edge that Validate must let through.
func TestValidateAcceptsGoodSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  Env
		args []string
	}{
		{"defaults", Env{}, nil},
		{"leader election on loopback", Env{Hostname: "w-0"}, []string{"--leader-elect"}},
		{"leader election on 0.0.0.0 with the Pod's IP", Env{Hostname: "w-0", PodIP: "10.0.0.7"}, []string{"--leader-elect", "--listen", "0.0.0.0:18000", "--insecure"}},
		{"gateway api off, optional kinds", Env{}, []string{"--gateway-api", "off", "--optional-kinds", "example.com/v1/widgets"}},
		{"gateway translator class of another name", Env{}, []string{"--gateway-translator-class", "sluice-gateway"}},
		{"no gateway translator class while gateway statuses are off", Env{}, []string{"--gateway-controller-name", "", "--gateway-translator-class", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := settingsFrom(t, tc.env, tc.args...).Validate(); err != nil {
				t.Fatalf("Validate() = %v, want nil", err)
			}
		})
	}
}

// Validate has no side effects: the settings it was given are the settings Run gets. (It once
// wrote the derived --advertise-addr back, from $POD_IP.)
func TestValidateChangesNothing(t *testing.T) {
	s := settingsFrom(t, Env{Hostname: "w-0", PodIP: "10.0.0.7"}, "--leader-elect", "--listen", "0.0.0.0:18000", "--insecure")
	before := *s
	before.Namespaces = append([]string(nil), s.Namespaces...)
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, *s) {
		t.Fatalf("Validate changed the settings:\nbefore %+v\nafter  %+v", before, *s)
	}
	if got, want := s.advertiseAddr(), "10.0.0.7:18000"; got != want {
		t.Fatalf("advertised address %q, want %q (the Pod's IP with --listen's port)", got, want)
	}
}

// Registering and validating the settings read no environment: $POD_IP and $POD_NAMESPACE
// count only through Env, which main reads once (EnvFromOS).
func TestSettingsReadNoEnvironment(t *testing.T) {
	t.Setenv("POD_IP", "10.9.9.9")
	t.Setenv("POD_NAMESPACE", "from-environment")
	s := settingsFrom(t, Env{Hostname: "w-0"}, "--leader-elect", "--listen", "0.0.0.0:18000", "--insecure")
	err := s.Validate()
	var cfgErr *config.Error
	if !errors.As(err, &cfgErr) || cfgErr.Setting != "advertise-addr" {
		t.Fatalf("Validate() = %v with $POD_IP set but Env.PodIP empty, want the unreachable advertise-addr refused", err)
	}
	if s.LeaseNamespace != "sluice-system" {
		t.Fatalf("--leader-elect-namespace defaults to %q with $POD_NAMESPACE set but Env.PodNamespace empty, want sluice-system", s.LeaseNamespace)
	}
	if got := settingsFrom(t, Env{PodNamespace: "from-env-struct"}).LeaseNamespace; got != "from-env-struct" {
		t.Fatalf("--leader-elect-namespace defaults to %q, want Env.PodNamespace", got)
	}
	if env := EnvFromOS(); env.PodIP != "10.9.9.9" || env.PodNamespace != "from-environment" {
		t.Fatalf("EnvFromOS() = %+v, want the Pod's variables", env)
	}
}

// --gateway-translator-class defaults to the class the deploy manifests' translator serves
// (its --ingress-class default, and the class its certificate names), so that the shipped
// translator's Gateway API statuses are written.
func TestGatewayTranslatorClassDefaultsToTheShippedTranslatorsClass(t *testing.T) {
	s := settingsFrom(t, Env{})
	if s.GatewayTranslatorClass != "sluice" {
		t.Fatalf("--gateway-translator-class defaults to %q, want sluice", s.GatewayTranslatorClass)
	}
	if got := settingsFrom(t, Env{}, "--gateway-translator-class", "edge").GatewayTranslatorClass; got != "edge" {
		t.Fatalf("--gateway-translator-class edge gives %q", got)
	}
}
