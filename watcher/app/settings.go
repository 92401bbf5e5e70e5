package app

import (
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sluice-io/sluice/internal/cli"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/watcher/kinds"
)

// Settings are the watcher's settings.
type Settings struct {
	Kubeconfig    string
	Listen        string
	HTTPListen    string
	Namespaces    []string
	SyncTimeout   time.Duration
	Kinds         []string
	OptionalKinds []string
	// GatewayAPI is --gateway-api (auto, on, off); DiscoveryInterval how often optional kinds
	// are looked up again.
	GatewayAPI        string
	DiscoveryInterval time.Duration
	HistorySize       int
	ClientBuffer      int
	Heartbeat         time.Duration
	KubeQPS           float32
	KubeBurst         int
	KubeCompression   bool
	TLS               cli.TLSSettings
	MaxStreams        int
	Pprof             string
	SendTimeout       time.Duration
	MaxMessageSize    int

	// MaxOperatorStreams caps read-only callers' Watch streams, apart from MaxStreams; Bounds
	// bound the gRPC server's connections.
	MaxOperatorStreams int
	Bounds             cli.ConnectionBounds

	StatusWrites       bool
	StatusQPS          float32
	StatusBurst        int
	StatusWorkers      int
	ID                 string
	AdvertiseAddr      string
	PeerTLSServerName  string
	LeaderElect        bool
	LeaseNamespace     string
	LeaseName          string
	LeaseDuration      time.Duration
	LeaseRenewDeadline time.Duration
	LeaseRetryPeriod   time.Duration

	// ControllerName is the translators' Ingress controller name: a translator may have the
	// status of Ingresses of IngressClasses with it written (contract.MayReport).
	ControllerName string
	// GatewayControllerName is the Gateway controller whose Gateway API statuses are written.
	GatewayControllerName string
	// GatewayTranslatorClass is the IngressClass of the translator whose identity serves
	// GatewayControllerName: only its reports (over mTLS) may set Gateway API statuses.
	GatewayTranslatorClass string
	// DefaultCertificates are TLS Secrets ("namespace/name") the stream carries whether or
	// not a route object references them: the translators' --default-certificate.
	DefaultCertificates []string

	// Env is what the Pod tells the watcher outside its settings; main fills it (EnvFromOS)
	// before the settings are registered, so that nothing here reads the environment.
	Env Env
}

// Env is what the watcher takes from its Pod rather than from a setting of its own: some
// defaults, and the address its peers reach it at.
type Env struct {
	// Hostname is --id's default.
	Hostname string
	// PodNamespace ($POD_NAMESPACE) is --leader-elect-namespace's default.
	PodNamespace string
	// PodIP ($POD_IP) is the advertised host when --advertise-addr is empty and --listen's
	// host is unspecified (0.0.0.0).
	PodIP string
}

// EnvFromOS reads Env from the process: its host name and the downward API's variables.
func EnvFromOS() Env {
	host, _ := os.Hostname()
	return Env{Hostname: host, PodNamespace: os.Getenv("POD_NAMESPACE"), PodIP: os.Getenv("POD_IP")}
}

// Register adds the settings to fs.
func (s *Settings) Register(fs *pflag.FlagSet) {
	fs.StringVar(&s.Kubeconfig, "kubeconfig", "", "kubeconfig file (empty: in-cluster configuration)")
	fs.StringVar(&s.Listen, "listen", "127.0.0.1:18000", "gRPC address of the Watch service")
	fs.StringVar(&s.HTTPListen, "http-listen", "127.0.0.1:18001", "address of /healthz, /readyz and /metrics")
	fs.StringSliceVar(&s.Namespaces, "namespaces", nil, "namespaces to watch, comma-separated (empty: all)")
	fs.DurationVar(&s.SyncTimeout, "sync-timeout", 2*time.Minute, "how long the initial sync may take before the watcher gives up and exits non-zero")
	fs.StringSliceVar(&s.Kinds, "kinds", kinds.DefaultRequired, "required kinds, as group/version/resource[?fieldSelector] (v1/resource for the core group; field=value alternatives of one field separated by |, each watched on its own)")
	fs.StringSliceVar(&s.OptionalKinds, "optional-kinds", nil, "optional kinds: watched while discovery serves them, skipped (and logged) otherwise; a change starts a new epoch")
	fs.StringVar(&s.GatewayAPI, "gateway-api", string(kinds.GatewayAPIAuto), "Gateway API kinds (GatewayClass, Gateway, HTTPRoute, ReferenceGrant): auto (watched while their CRDs are served), on (required: no marker without them), off (never watched)")
	fs.DurationVar(&s.DiscoveryInterval, "discovery-interval", 15*time.Second, "how often discovery is asked again whether optional kinds (and --gateway-api=auto's) appeared or disappeared; a change starts a new epoch")
	fs.IntVar(&s.HistorySize, "history-size", 16384, "changes kept so that a reconnecting client can resume without a snapshot")
	fs.IntVar(&s.ClientBuffer, "client-buffer", 16384, "changes made after the initial sync a client may lag behind before it is dropped with RESOURCE_EXHAUSTED")
	fs.DurationVar(&s.Heartbeat, "heartbeat", 10*time.Second, "heartbeat interval on idle streams")
	fs.Float32Var(&s.KubeQPS, "kube-qps", 50, "client-side queries per second to the apiserver")
	fs.IntVar(&s.KubeBurst, "kube-burst", 100, "client-side burst to the apiserver")
	fs.BoolVar(&s.KubeCompression, "kube-compression", false, "ask the apiserver to gzip its responses (lists of thousands of objects): worth it only on a slow link between the watcher and the apiserver; each side spends CPU on every list")
	s.TLS.Register(fs, false)
	fs.IntVar(&s.MaxStreams, "max-streams", 64, "concurrent Watch streams, and concurrent status streams, that the callers of one role with full access (translators; watcher replicas relaying status) may hold together; more get RESOURCE_EXHAUSTED")
	cli.RegisterMaxOperatorStreams(fs, &s.MaxOperatorStreams, "Watch")
	s.Bounds.Register(fs)
	cli.RegisterPprof(fs, &s.Pprof)
	cli.RegisterMaxMessageSize(fs, &s.MaxMessageSize)
	fs.DurationVar(&s.SendTimeout, "send-timeout", 30*time.Second, "longest one send on a Watch stream may take; a client that stopped reading for longer is dropped (RESOURCE_EXHAUSTED) and must reconnect")
	fs.BoolVar(&s.StatusWrites, "status-writes", true, "write the statuses and Events that translators report (only the leader writes when --leader-elect is on)")
	fs.Float32Var(&s.StatusQPS, "status-qps", 10, "client-side queries per second for status writes and Events, apart from --kube-qps")
	fs.IntVar(&s.StatusBurst, "status-burst", 20, "client-side burst for status writes and Events")
	fs.IntVar(&s.StatusWorkers, "status-workers", 2, "concurrent status writes")
	fs.StringVar(&s.ControllerName, "controller-name", "sluice.io/ingress-controller", "Ingress controller name (as the translators' --controller-name): with mTLS, a translator may have the status of Ingresses of IngressClasses with it written, besides its own class's")
	fs.StringVar(&s.GatewayControllerName, "gateway-controller-name", "sluice.io/gateway-controller", "Gateway controller name (as the translator's): only GatewayClasses with it, their Gateways and our HTTPRoute parents entries get the Gateway API statuses translators report, and only reports naming it are taken (empty: none)")
	fs.StringSliceVar(&s.DefaultCertificates, "default-certificate", nil, "namespace/name of a TLS Secret the Watch stream carries although no route object references it: each translator's --default-certificate (comma-separated or repeated)")
	fs.StringVar(&s.GatewayTranslatorClass, "gateway-translator-class", "sluice", "IngressClass of the translator that serves --gateway-controller-name: with mTLS, only a translator whose identity names it (spiffe://<trust-domain>/sluice/translator/<class>) may have Gateway API statuses written; another's are refused (counted, logged once)")
	fs.StringVar(&s.ID, "id", s.Env.Hostname, "this replica's name in the Lease")
	fs.StringVar(&s.AdvertiseAddr, "advertise-addr", "", "address where the other replicas reach this one's gRPC to relay status streams (default: --listen, or $POD_IP with --listen's port when --listen is 0.0.0.0)")
	fs.StringVar(&s.PeerTLSServerName, "peer-tls-server-name", "", "name to verify in the leader's certificate when relaying to it (default: the dialled host)")
	fs.BoolVar(&s.LeaderElect, "leader-elect", false, "elect one replica with a Lease to write statuses; every replica serves Watch streams")
	fs.StringVar(&s.LeaseNamespace, "leader-elect-namespace", or(s.Env.PodNamespace, "sluice-system"), "namespace of the Lease")
	fs.StringVar(&s.LeaseName, "leader-elect-lease-name", "sluice-watcher", "name of the Lease")
	fs.DurationVar(&s.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long followers wait before taking a lease that is not renewed")
	fs.DurationVar(&s.LeaseRenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader tries to renew before it stops writing")
	fs.DurationVar(&s.LeaseRetryPeriod, "leader-elect-retry-period", 2*time.Second, "interval between attempts to acquire or renew the lease")
}

func or(v, def string) string {
	if v != "" {
		return v
	}
	return def
}

// Validate checks the settings. It changes nothing and reads nothing but the settings (and
// the files they name): what Run needs of them it derives again (kindPlan, advertiseAddr).
func (s *Settings) Validate() error {
	if err := config.CheckHostPort("listen", s.Listen, false); err != nil {
		return err
	}
	if err := config.CheckHostPort("http-listen", s.HTTPListen, false); err != nil {
		return err
	}
	if err := config.CheckReadable("kubeconfig", s.Kubeconfig); err != nil {
		return err
	}
	if s.SyncTimeout <= 0 {
		return config.Errorf("sync-timeout", s.SyncTimeout.String(), "must be positive")
	}
	if _, err := s.kindPlan(); err != nil {
		return err
	}
	if s.DiscoveryInterval <= 0 {
		return config.Errorf("discovery-interval", s.DiscoveryInterval.String(), "must be positive")
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"history-size", s.HistorySize}, {"client-buffer", s.ClientBuffer}, {"kube-burst", s.KubeBurst}, {"max-streams", s.MaxStreams}} {
		if n.v <= 0 {
			return config.Errorf(n.name, fmt.Sprint(n.v), "must be positive")
		}
	}
	if s.Heartbeat <= 0 {
		return config.Errorf("heartbeat", s.Heartbeat.String(), "must be positive")
	}
	if s.KubeQPS <= 0 {
		return config.Errorf("kube-qps", fmt.Sprint(s.KubeQPS), "must be positive")
	}
	if s.StatusQPS <= 0 {
		return config.Errorf("status-qps", fmt.Sprint(s.StatusQPS), "must be positive")
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"status-burst", s.StatusBurst}, {"status-workers", s.StatusWorkers}} {
		if n.v <= 0 {
			return config.Errorf(n.name, fmt.Sprint(n.v), "must be positive")
		}
	}
	if s.GatewayControllerName != "" && (s.GatewayTranslatorClass == "" || strings.Contains(s.GatewayTranslatorClass, "/")) {
		return config.Errorf("gateway-translator-class", s.GatewayTranslatorClass, "must name the IngressClass of the translator that serves --gateway-controller-name (non-empty, no /)")
	}
	for _, c := range s.DefaultCertificates {
		if err := config.CheckNamespacedName("default-certificate", c); err != nil {
			return err
		}
	}
	advertise := s.advertiseAddr()
	if err := config.CheckHostPort("advertise-addr", advertise, false); err != nil {
		return err
	}
	if s.LeaderElect {
		if s.ID == "" || strings.Contains(s.ID, "@") {
			return config.Errorf("id", s.ID, "must be set and must not contain @")
		}
		if ip := net.ParseIP(hostOf(advertise)); ip != nil && ip.IsUnspecified() {
			return config.Errorf("advertise-addr", advertise, "must be an address the other replicas can reach (set it, or $POD_IP)")
		}
		if s.LeaseNamespace == "" || s.LeaseName == "" {
			return config.Errorf("leader-elect-lease-name", s.LeaseNamespace+"/"+s.LeaseName, "namespace and name must be set")
		}
		// client-go's own rule: renewals must fail before followers may take over.
		if s.LeaseDuration <= s.LeaseRenewDeadline {
			return config.Errorf("leader-elect-lease-duration", s.LeaseDuration.String(), "must be longer than --leader-elect-renew-deadline (%s)", s.LeaseRenewDeadline)
		}
		if s.LeaseRetryPeriod <= 0 || float64(s.LeaseRenewDeadline) <= 1.2*float64(s.LeaseRetryPeriod) {
			return config.Errorf("leader-elect-renew-deadline", s.LeaseRenewDeadline.String(), "must be longer than 1.2 x --leader-elect-retry-period (%s)", s.LeaseRetryPeriod)
		}
	}
	if err := cli.CheckPprof(s.Pprof); err != nil {
		return err
	}
	if err := cli.CheckMaxMessageSize(s.MaxMessageSize); err != nil {
		return err
	}
	if err := cli.CheckMaxOperatorStreams(s.MaxOperatorStreams); err != nil {
		return err
	}
	if err := s.Bounds.Validate(); err != nil {
		return err
	}
	if err := s.TLS.CheckServing("listen", s.Listen); err != nil {
		return err
	}
	if s.SendTimeout <= 0 {
		return config.Errorf("send-timeout", s.SendTimeout.String(), "must be positive")
	}
	return s.TLS.Validate()
}

// kindPlan is what the settings say to watch: the kinds listed, and what to do with the
// Gateway API's.
type kindPlan struct {
	specs []kinds.Spec
	mode  kinds.GatewayAPIMode
}

// kindPlan parses --kinds, --optional-kinds and --gateway-api; a bad one is a *config.Error.
func (s *Settings) kindPlan() (kindPlan, error) {
	specs, err := kinds.ParseSpecs(s.Kinds, s.OptionalKinds)
	if err != nil {
		return kindPlan{}, &config.Error{Setting: "kinds", Cause: err}
	}
	if len(specs) == 0 {
		return kindPlan{}, config.Errorf("kinds", "", "no kind to watch")
	}
	for _, l := range []struct {
		setting string
		names   []string
	}{{"kinds", s.Kinds}, {"optional-kinds", s.OptionalKinds}} {
		listed, _ := kinds.ParseSpecs(l.names, nil) // parsed above
		if err := kinds.CheckNoGatewayKinds(listed); err != nil {
			return kindPlan{}, &config.Error{Setting: l.setting, Cause: err}
		}
	}
	mode, err := kinds.ParseGatewayAPIMode(s.GatewayAPI)
	if err != nil {
		return kindPlan{}, config.Errorf("gateway-api", s.GatewayAPI, "%v", err)
	}
	return kindPlan{specs: specs, mode: mode}, nil
}

// advertiseAddr is where the other replicas reach this one: --advertise-addr, else --listen,
// with $POD_IP (Env.PodIP) for an unspecified host.
func (s *Settings) advertiseAddr() string {
	if s.AdvertiseAddr != "" {
		return s.AdvertiseAddr
	}
	host, port, _ := net.SplitHostPort(s.Listen)
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if s.Env.PodIP != "" {
			host = s.Env.PodIP
		}
	}
	return net.JoinHostPort(host, port)
}

func hostOf(addr string) string {
	h, _, _ := net.SplitHostPort(addr)
	return h
}

func (s *Settings) restConfig() (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if s.Kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, &config.Error{Setting: "kubeconfig", Cause: fmt.Errorf("empty, and not running in a cluster: %w", err)}
		}
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
		if err != nil {
			return nil, &config.Error{Setting: "kubeconfig", Value: s.Kubeconfig, Cause: err}
		}
	}
	cfg.QPS, cfg.Burst = s.KubeQPS, s.KubeBurst
	cfg.UserAgent = "sluice-watcher"
	// Protobuf to the apiserver for built-in kinds: smaller and faster to decode than JSON.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	// Uncompressed unless asked: inside a cluster the link is fast, and gzip was CPU on both
	// sides of every list (docs/design.md, "Cold start").
	cfg.DisableCompression = !s.KubeCompression
	return cfg, nil
}
