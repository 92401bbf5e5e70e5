// Package cli is the shared entry point of Sluice's processes: it loads the settings, builds
// the logger, runs the process until it fails or is told to stop (SIGINT, SIGTERM), and maps
// the outcome to an exit code. Each process's main.go only hands it a Spec.
package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/identity"
	"github.com/sluice-io/sluice/internal/logging"
	"github.com/sluice-io/sluice/internal/version"
)

// Exit codes.
const (
	ExitOK      = 0
	ExitFailure = 1 // the process failed while running
	ExitUsage   = 2 // bad settings: nothing was started
)

// Settings are a process's own settings.
type Settings interface {
	// Register adds the settings to fs, with their defaults.
	Register(fs *pflag.FlagSet)
	// Validate checks the loaded settings; a bad one is reported as *config.Error.
	Validate() error
}

// Spec describes a process.
type Spec struct {
	Name     string
	Settings Settings
	// Run runs the process until ctx is done (nil error) or it fails.
	Run func(ctx context.Context, log hclog.Logger) error
	// Stdout receives the answers to --version and --help (os.Stdout when nil).
	Stdout io.Writer
}

// Common are the settings every process has.
type Common struct {
	ConfigFile string
	LogLevel   string
	LogFormat  string
}

func (c *Common) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.ConfigFile, "config", "", "optional settings file (YAML, JSON or TOML); keys are the flag names")
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: trace, debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", "text", "log format: text or json")
}

func (c *Common) validate() error {
	if err := config.CheckOneOf("log-level", c.LogLevel, logging.Levels); err != nil {
		return err
	}
	return config.CheckOneOf("log-format", c.LogFormat, logging.Formats)
}

// Main runs spec with args (without the program name) and returns the exit code.
func Main(spec Spec, args []string, stderr io.Writer) int {
	fs := pflag.NewFlagSet(spec.Name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = true
	var common Common
	common.register(fs)
	spec.Settings.Register(fs)
	stdout := spec.Stdout
	if stdout == nil {
		stdout = os.Stdout
	}
	// --help answers on stdout, as the user asked for it (`translator --help | less`); a
	// usage error goes to stderr.
	usage := func() {
		fmt.Fprintf(stdout, "Usage of %s (%s):\n", spec.Name, version.Version)
		fmt.Fprintf(stdout, "Every flag can also be set as %s_<NAME> in the environment or in --config.\n", config.EnvPrefix)
		fmt.Fprintf(stdout, "      --version                 print the version, source revision and Go release, and exit\n")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
	}
	// --version is answered before the settings are loaded, so that it works whatever else
	// is set (and is not a setting an environment variable or a file could turn on).
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--version" || a == "-version" {
			fmt.Fprintln(stdout, version.String(spec.Name))
			return ExitOK
		}
	}
	// pflag prints its own error and usage on a bad flag; Sluice prints one line instead.
	fs.Usage = func() {}
	if err := config.Load(fs, args, os.LookupEnv); err != nil {
		if errors.Is(err, config.ErrHelp) {
			usage()
			return ExitOK
		}
		fmt.Fprintf(stderr, "%s: %v\n", spec.Name, err)
		return ExitUsage
	}
	if err := common.validate(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", spec.Name, err)
		return ExitUsage
	}
	if err := spec.Settings.Validate(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", spec.Name, err)
		return ExitUsage
	}
	log, err := logging.New(logging.Options{Name: spec.Name, Level: common.LogLevel, Format: common.LogFormat, Output: stderr})
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", spec.Name, err)
		return ExitUsage
	}
	logging.RouteLibraryLogs(log)
	setMemoryLimit(log, memlimit.FromCgroup, binaryResident)
	startMemory(os.LookupEnv)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log.Info("starting", "version", version.Version, "revision", version.Rev(), "go_version", version.GoVersion(), "pid", os.Getpid())
	for _, u := range config.UnknownEnv(fs, os.Environ()) {
		log.Warn("environment variable names no setting; ignored", "variable", u.Name, "did_you_mean", u.Suggestion)
	}
	if err := spec.Run(ctx, log); err != nil {
		var cfgErr *config.Error
		if errors.As(err, &cfgErr) {
			log.Error("bad setting", "error", err)
			return ExitUsage
		}
		log.Error("exiting on error", "error", err)
		return ExitFailure
	}
	log.Info("stopped")
	return ExitOK
}

// Listen opens a TCP listener for a setting, reporting a failure as that setting's error.
func Listen(setting, addr string) (net.Listener, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &config.Error{Setting: setting, Value: addr, Cause: errors.Unwrap(err)}
	}
	return lis, nil
}

// TLSSettings are the TLS files of a process: its own certificate and key (served as a
// server, presented as a client) and the CA that peers must be signed by. With a CA set, a
// server refuses clients without a valid certificate (mTLS).
type TLSSettings struct {
	Cert        string
	Key         string
	CA          string
	ServerName  string
	TrustDomain string
	// Insecure allows gRPC off loopback without mutual TLS, served or dialled.
	Insecure bool
}

// Register adds the TLS settings to fs.
func (t *TLSSettings) Register(fs *pflag.FlagSet, client bool) {
	fs.StringVar(&t.Cert, "tls-cert", "", "PEM certificate this process serves and presents to peers")
	fs.StringVar(&t.Key, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&t.CA, "tls-ca", "", "PEM CA bundle peers must be signed by; a server then requires client certificates (mTLS) and authorizes each call by the caller's identity")
	fs.StringVar(&t.TrustDomain, "trust-domain", identity.DefaultTrustDomain, "SPIFFE trust domain of the components' identities (URI SAN spiffe://<trust-domain>/sluice/<role>)")
	fs.BoolVar(&t.Insecure, "insecure", false, "allow gRPC off loopback without mutual TLS (anyone who reaches it may read every TLS key); refused otherwise")
	if client {
		fs.StringVar(&t.ServerName, "tls-server-name", "", "name to verify in the upstream's certificate (default: the dialled host)")
	}
}

// Validate checks that the files exist and load.
func (t *TLSSettings) Validate() error {
	for _, s := range []struct{ name, path string }{{"tls-cert", t.Cert}, {"tls-key", t.Key}, {"tls-ca", t.CA}} {
		if err := config.CheckReadable(s.name, s.path); err != nil {
			return err
		}
	}
	if t.TrustDomain == "" || strings.ContainsAny(t.TrustDomain, "/:@ ") {
		return config.Errorf("trust-domain", t.TrustDomain, "must be a host name such as cluster.local")
	}
	if (t.Cert == "") != (t.Key == "") {
		if t.Cert == "" {
			return config.Errorf("tls-cert", "", "must be set with --tls-key")
		}
		return config.Errorf("tls-key", "", "must be set with --tls-cert")
	}
	files := t.Files()
	if _, err := files.ServerConfig(); err != nil && t.Cert != "" {
		return &config.Error{Setting: "tls-cert", Value: t.Cert, Cause: err}
	}
	if _, err := files.ClientConfig(); err != nil {
		return &config.Error{Setting: "tls-ca", Value: t.CA, Cause: err}
	}
	return nil
}

// CheckServing refuses, before anything starts, a gRPC server off loopback without mutual
// TLS unless --insecure (grpcx refuses it again when the server is built).
func (t *TLSSettings) CheckServing(setting, addr string) error {
	if t.Insecure || !grpcx.Exposed(t.Files(), addr) {
		return nil
	}
	return config.Errorf(setting, addr, "%s", grpcx.RefusedServing)
}

// CheckDialling refuses a connection off loopback without mutual TLS unless --insecure;
// addrs may be a comma-separated list.
func (t *TLSSettings) CheckDialling(setting, addrs string) error {
	if t.Insecure {
		return nil
	}
	for _, a := range strings.Split(addrs, ",") {
		if grpcx.Exposed(t.Files(), a) {
			return config.Errorf(setting, a, "%s", grpcx.RefusedDialling)
		}
	}
	return nil
}

// Files returns the settings as grpcx.TLSFiles.
func (t *TLSSettings) Files() grpcx.TLSFiles {
	return grpcx.TLSFiles{Cert: t.Cert, Key: t.Key, CA: t.CA, ServerName: t.ServerName, TrustDomain: t.TrustDomain}
}

// Client returns the settings of a connection to a peer that must be a role.
func (t *TLSSettings) Client(log hclog.Logger, role identity.Role) grpcx.ClientConfig {
	f := t.Files()
	f.ExpectRole = role
	return grpcx.ClientConfig{Logger: log, TLS: f, Insecure: t.Insecure}
}

// CheckIdentity checks that the process's own certificate names the identity it will be
// judged by, so that a certificate issued for another component fails at start, not at
// the first call. Without mutual TLS there is nothing to check.
func (t *TLSSettings) CheckIdentity(want identity.Identity) error {
	if t.Cert == "" || t.CA == "" {
		return nil
	}
	pair, err := tls.LoadX509KeyPair(t.Cert, t.Key)
	if err != nil {
		return &config.Error{Setting: "tls-cert", Value: t.Cert, Cause: err}
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return &config.Error{Setting: "tls-cert", Value: t.Cert, Cause: err}
	}
	got, err := identity.FromCertificate(leaf, t.TrustDomain)
	if err != nil {
		return &config.Error{Setting: "tls-cert", Value: t.Cert, Cause: err}
	}
	if got.Role != want.Role || (want.Class != "" && got.Class != want.Class) {
		return config.Errorf("tls-cert", t.Cert, "the certificate is %s; this process is %s", got, want)
	}
	return nil
}
