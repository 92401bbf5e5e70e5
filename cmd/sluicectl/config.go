package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-io/sluice/client"
	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	"github.com/sluice-io/sluice/translator/translate"
)

func newConfigCmd(out *outputFlag) *cobra.Command {
	var cf clientFlags
	var timeout time.Duration
	var watch bool
	var count int
	var connectTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "config",
		Short: "print the translator's current config and the pushers' ACK state",
		Long: `config prints the translator's current config (epoch, version, hash, the view of the
cluster it was built from), its hosts, routes and findings, and what each pusher applied or
rejected. -o json and -o yaml give the whole status, resources included (private keys are
never sent to the operator).

With --watch it follows the config stream as a pusher does, checking every state hash,
without applying anything: one line per version with its size on the wire and what changed
(-o json: one message per line; -o yaml: one document per message).
` + connectionHelp,
		Example: `  sluicectl config --addr 127.0.0.1:18010
  sluicectl config -o yaml
  sluicectl config --watch --count 3 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			conn, err := cf.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			stdout := cmd.OutOrStdout()
			if watch {
				return watchConfig(cmd.Context(), conn, cf.addr, out.format(), count, connectTimeout, stdout)
			}
			ctx, cancel := timeoutContext(cmd, timeout)
			defer cancel()
			st, err := configv1.NewConfigServiceClient(conn).GetStatus(ctx, &configv1.GetStatusRequest{IncludeResources: true})
			if err != nil {
				return fmt.Errorf("%s: %w", cf.addr, err)
			}
			if f := out.format(); f != formatTable {
				return writeProto(stdout, f, st)
			}
			printStatus(stdout, st)
			return nil
		},
	}
	cf.register(cmd.Flags(), "127.0.0.1:18010")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "how long to wait for the answer (without --watch)")
	cmd.Flags().BoolVar(&watch, "watch", false, "follow the config stream: print every version, its size on the wire and what changed, until interrupted")
	cmd.Flags().IntVar(&count, "count", 0, "with --watch: stop after this many versions (0: never)")
	cmd.Flags().DurationVar(&connectTimeout, "connect-timeout", 30*time.Second, "with --watch: how long to wait for a translator that is not listening yet")
	return cmd
}

// printStatus is config's table.
func printStatus(stdout io.Writer, st *configv1.GetStatusResponse) {
	cur := st.GetCurrent()
	fmt.Fprintf(stdout, "synced: %v\n", st.GetSynced())
	if cur != nil {
		fmt.Fprintf(stdout, "config: epoch %s version %d hash %.12s (from watcher %s revision %d)\n",
			cur.GetEpoch(), cur.GetVersion(), cur.GetHash(), cur.GetWatcherEpoch(), cur.GetWatcherRevision())
		printResources(stdout, cur.GetResources())
	} else {
		fmt.Fprintln(stdout, "config: none yet")
	}
	fmt.Fprintln(stdout, "pushers:")
	for _, p := range st.GetPushers() {
		fmt.Fprintf(stdout, "  %s (%s) connected=%v applied=%d", p.GetPusherId(), short(p.GetDataPlane()), p.GetConnected(), p.GetApplied().GetVersion())
		if p.GetRejected() != nil {
			fmt.Fprintf(stdout, " rejected=%d: %s", p.GetRejected().GetVersion(), p.GetRejectedError())
		}
		fmt.Fprintln(stdout)
	}
}

func newTranslateCmd(out *outputFlag) *cobra.Command {
	var files []string
	var class, controller, defaultCert string
	var withoutClass, sslRedirect bool
	failOn := "none"
	cmd := &cobra.Command{
		Use:   "translate -f FILE|DIR...",
		Short: "translate manifests offline and print the config and findings",
		Long: `translate runs the translator on manifests (Ingresses, IngressClasses, Services,
EndpointSlices, Secrets; *.yaml, *.yml, *.json) without a cluster and prints the hosts,
routes and findings it would serve (-o json or yaml: the whole config). Other kinds are
skipped with a line on stderr. --fail-on error (or warning) exits 1 when a finding is that
severe or more, after printing everything, so that a pipeline can gate on it.`,
		Example: `  sluicectl translate -f examples/
  sluicectl translate -f cluster.yaml --ingress-class nginx --controller-name k8s.io/ingress-nginx
  sluicectl translate -f ingress.yaml -o yaml
  sluicectl translate -f manifests/ --fail-on error`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return usagef("no manifests: give -f FILE or -f DIR")
			}
			threshold, ok := failOnSeverity[failOn]
			if !ok {
				return usagef("--fail-on %q: want none, warning or error", failOn)
			}
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			var in translate.Input
			for _, f := range files {
				paths, err := manifestPaths(f)
				if err != nil {
					return err
				}
				for _, p := range paths {
					data, err := os.ReadFile(p)
					if err != nil {
						return err
					}
					got, skipped, err := translate.LoadManifests(p, data)
					if err != nil {
						return err
					}
					for _, s := range skipped {
						fmt.Fprintf(stderr, "skipped: %s\n", s)
					}
					in.Ingresses = append(in.Ingresses, got.Ingresses...)
					in.IngressClasses = append(in.IngressClasses, got.IngressClasses...)
					in.Services = append(in.Services, got.Services...)
					in.EndpointSlices = append(in.EndpointSlices, got.EndpointSlices...)
					in.Secrets = append(in.Secrets, got.Secrets...)
				}
			}
			res := translate.Translate(in, translate.Options{IngressClass: class, ControllerName: controller, WatchIngressWithoutClass: withoutClass, NoSSLRedirect: !sslRedirect, DefaultCertificate: defaultCert, Now: time.Now()})
			if f := out.format(); f != formatTable {
				if err := writeProto(stdout, f, res); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(stdout, "hash %.12s\n", translate.Hash(res))
				printResources(stdout, res)
			}
			return failOnFindings(res, threshold)
		},
	}
	cmd.Flags().StringSliceVarP(&files, "filename", "f", nil, "manifest files or directories (*.yaml, *.yml, *.json)")
	cmd.Flags().StringVar(&class, "ingress-class", "sluice", "the IngressClass name served")
	cmd.Flags().StringVar(&controller, "controller-name", "sluice.io/ingress-controller", "the IngressClass controller served")
	cmd.Flags().BoolVar(&withoutClass, "watch-ingress-without-class", false, "also serve Ingresses without a class")
	cmd.Flags().StringVar(&failOn, "fail-on", "none", "exit 1 when a finding is at least this severe: none, warning or error")
	_ = cmd.RegisterFlagCompletionFunc("fail-on", cobra.FixedCompletions([]string{"none", "warning", "error"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.Flags().StringVar(&defaultCert, "default-certificate", "", "namespace/name of the TLS Secret served for names without a certificate (the translator's --default-certificate)")
	cmd.Flags().BoolVar(&sslRedirect, "ssl-redirect", true, "redirect HTTP to HTTPS on the hosts of Ingresses that have a certificate (the translator's --ssl-redirect)")
	return cmd
}

func manifestPaths(f string) ([]string, error) {
	fi, err := os.Stat(f)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return []string{f}, nil
	}
	var out []string
	err = filepath.WalkDir(f, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch strings.ToLower(filepath.Ext(p)) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				out = append(out, p)
			}
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

func printResources(w io.Writer, r *configv1.Resources) {
	for _, vh := range r.GetVirtualHosts() {
		host := vh.GetHostname()
		if host == "" {
			host = "(any host)"
		}
		tls := ""
		if vh.GetCertificate() != "" {
			tls = " tls=" + vh.GetCertificate()
		}
		fmt.Fprintf(w, "%s%s\n", host, tls)
		for _, rt := range vh.GetRoutes() {
			fmt.Fprintf(w, "  %-7s %-30s -> %s\n", short(rt.GetPath().GetType()), rt.GetPath().GetValue()+routeConditions(rt), routeAction(rt))
		}
	}
	if len(r.GetFindings()) > 0 {
		fmt.Fprintln(w, "findings:")
		for _, f := range r.GetFindings() {
			fmt.Fprintf(w, "  %s %s %s/%s %s: %s\n", short(f.GetSeverity()), f.GetObject().GetKind(),
				f.GetObject().GetNamespace(), f.GetObject().GetName(), f.GetField(), f.GetCause())
		}
	}
}

// routeConditions describes what a route matches beside its path: listener scheme, method,
// headers and query parameters.
func routeConditions(rt *configv1.Route) string {
	var c []string
	switch rt.GetScheme() {
	case configv1.RouteScheme_ROUTE_SCHEME_HTTP:
		c = append(c, "http only")
	case configv1.RouteScheme_ROUTE_SCHEME_HTTPS:
		c = append(c, "https only")
	}
	if m := rt.GetMethod(); m != "" {
		c = append(c, m)
	}
	for _, h := range rt.GetHeaders() {
		op := "="
		if h.GetType() == configv1.HeaderMatchType_HEADER_MATCH_TYPE_REGEX {
			op = "~"
		}
		c = append(c, "header "+h.GetName()+op+h.GetValue())
	}
	for _, q := range rt.GetQuery() {
		op := "="
		if q.GetType() == configv1.QueryMatchType_QUERY_MATCH_TYPE_REGEX {
			op = "~"
		}
		c = append(c, "query "+q.GetName()+op+q.GetValue())
	}
	if f := rt.GetClientAddresses(); f != nil {
		if len(f.GetAllow()) > 0 {
			c = append(c, "clients in "+strings.Join(f.GetAllow(), " "))
		}
		if len(f.GetDeny()) > 0 {
			c = append(c, "clients not in "+strings.Join(f.GetDeny(), " "))
		}
	}
	if max := rt.GetMaxRequestBodyBytes(); max > 0 {
		c = append(c, fmt.Sprintf("body <= %d bytes", max))
	}
	if l := rt.GetRateLimit(); l != nil {
		var parts []string
		if r := l.GetRequestsPerSecond(); r > 0 {
			parts = append(parts, fmt.Sprintf("%d/s", r))
		}
		if r := l.GetRequestsPerMinute(); r > 0 {
			parts = append(parts, fmt.Sprintf("%d/min", r))
		}
		if m := l.GetBurstMultiplier(); m > 0 {
			parts = append(parts, fmt.Sprintf("burst x%d", m))
		}
		if n := l.GetConnections(); n > 0 {
			parts = append(parts, fmt.Sprintf("%d at once", n))
		}
		c = append(c, "per client "+strings.Join(parts, " "))
	}
	if a := rt.GetSessionAffinity(); a != nil {
		c = append(c, "sticky by cookie "+a.GetCookieName())
	}
	if a := rt.GetExternalAuth(); a != nil {
		c = append(c, "asks "+a.GetBackend()+a.GetPath())
	}
	if len(c) == 0 {
		return ""
	}
	return " [" + strings.Join(c, ", ") + "]"
}

// routeAction describes what a matching request gets: a redirect, or its backends (with a
// rewrite and header changes).
func routeAction(rt *configv1.Route) string {
	if r := rt.GetRedirect(); r != nil {
		code := r.GetStatusCode()
		if code == 0 {
			code = 302
		}
		var parts []string
		if r.GetScheme() != "" {
			parts = append(parts, "scheme "+r.GetScheme())
		}
		if r.GetHostname() != "" {
			parts = append(parts, "host "+r.GetHostname())
		}
		if r.GetPort() != 0 {
			parts = append(parts, fmt.Sprint("port ", r.GetPort()))
		}
		if p := r.GetPath(); p != nil {
			parts = append(parts, strings.ToLower(short(p.GetType()))+" path "+p.GetValue())
		}
		return fmt.Sprintf("redirect %d (%s)", code, strings.Join(parts, ", "))
	}
	var bs []string
	for _, b := range rt.GetBackends() {
		bs = append(bs, fmt.Sprintf("%s (weight %d)", b.GetBackend(), b.GetWeight()))
	}
	if len(rt.GetBackends()) == 1 {
		bs = []string{rt.GetBackends()[0].GetBackend()}
	}
	if len(bs) == 0 {
		return "(no backend: 503)"
	}
	out := strings.Join(bs, ", ")
	if rw := rt.GetRewrite(); rw != nil {
		if rw.GetHostname() != "" {
			out += ", host rewritten to " + rw.GetHostname()
		}
		if p := rw.GetPath(); p != nil {
			out += ", " + strings.ToLower(short(p.GetType())) + " path rewritten to " + p.GetValue()
		}
	}
	if rt.GetRequestHeaders() != nil {
		out += ", request headers changed"
	}
	if rt.GetResponseHeaders() != nil {
		out += ", response headers changed"
	}
	return out
}

// watchConfig follows the config stream as a pusher does (the chain checked against every
// state hash, a chunked complete state taken when whole) without applying anything, and
// prints each version and what it changed.
func watchConfig(ctx context.Context, conn grpc.ClientConnInterface, addr string, f format, count int, connectTimeout time.Duration, stdout io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	host, _ := os.Hostname()
	c, err := client.FollowConfig(ctx, conn, client.ConfigOptions{ID: fmt.Sprintf("sluicectl-%s-%d", host, os.Getpid()), ConnectTimeout: connectTimeout})
	if err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	versions := 0
	parts := 0 // bytes of the chunked complete state being received
	for count == 0 || versions < count {
		m, v, err := c.Next()
		if m == nil && err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("%s: %w", addr, err)
		}
		if f != formatTable {
			if err := writeStreamProto(stdout, f, m); err != nil {
				return err
			}
		}
		if err != nil {
			return err
		}
		if v != nil {
			versions++
		}
		if f != formatTable {
			continue
		}
		size := proto.Size(m)
		switch msg := m.GetMessage().(type) {
		case *configv1.StreamConfigResponse_InitialSyncComplete:
			mk := msg.InitialSyncComplete
			fmt.Fprintf(stdout, "marker: epoch %s, complete from version %d (watcher %s revision %d)\n", mk.GetEpoch(), mk.GetVersion(), mk.GetWatcherEpoch(), mk.GetWatcherRevision())
		case *configv1.StreamConfigResponse_ConfigStart, *configv1.StreamConfigResponse_ConfigChunk:
			parts += size
		case *configv1.StreamConfigResponse_Config, *configv1.StreamConfigResponse_ConfigEnd:
			chunks := ""
			if m.GetConfigEnd() != nil {
				size += parts
				parts = 0
				chunks = fmt.Sprintf(" in %d chunks", c.Chunks())
			}
			n := c.Counts()
			fmt.Fprintf(stdout, "version %d complete%s, hash %.12s, %d bytes: %d virtual hosts, %d backends, %d certificates, %d objects with findings\n",
				v.GetVersion(), chunks, v.GetHash(), size, n.VirtualHosts, n.Backends, n.Certificates, n.Findings)
		case *configv1.StreamConfigResponse_Delta:
			d := msg.Delta
			fmt.Fprintf(stdout, "version %d onto %d, hash %.12s, %d bytes:%s\n", d.GetVersion(), d.GetBaseVersion(), d.GetHash(), size, describeDelta(d))
		}
	}
	return nil
}

// describeDelta lists what a delta changes: +upserted, -removed, per type.
func describeDelta(d *configv1.ConfigDelta) string {
	var b strings.Builder
	part := func(what string, up, rm []string) {
		if len(up) == 0 && len(rm) == 0 {
			return
		}
		fmt.Fprintf(&b, " %s", what)
		for _, k := range up {
			fmt.Fprintf(&b, " +%q", k)
		}
		for _, k := range rm {
			fmt.Fprintf(&b, " -%q", k)
		}
		b.WriteString(";")
	}
	var vh, be, ce, fi, rfi []string
	for _, x := range d.GetVirtualHosts() {
		vh = append(vh, x.GetHostname())
	}
	for _, x := range d.GetBackends() {
		be = append(be, x.GetName())
	}
	for _, x := range d.GetCertificates() {
		ce = append(ce, x.GetName())
	}
	for _, x := range d.GetFindings() {
		fi = append(fi, contract.KeyOfObject(x.GetObject()))
	}
	for _, x := range d.GetRemovedFindings() {
		rfi = append(rfi, contract.KeyOfObject(x))
	}
	part("virtual hosts", vh, d.GetRemovedVirtualHosts())
	part("backends", be, d.GetRemovedBackends())
	part("certificates", ce, d.GetRemovedCertificates())
	part("findings", fi, rfi)
	return strings.TrimSuffix(b.String(), ";")
}

// failOnSeverity is --fail-on's values: the least severity that fails (none: never).
var failOnSeverity = map[string]configv1.FindingSeverity{
	"none":    configv1.FindingSeverity(1 << 30),
	"warning": configv1.FindingSeverity_FINDING_SEVERITY_WARNING,
	"error":   configv1.FindingSeverity_FINDING_SEVERITY_ERROR,
}

// failOnFindings is translate's verdict: an error counting the findings at least as severe as
// threshold, nil when there are none.
func failOnFindings(res *configv1.Resources, threshold configv1.FindingSeverity) error {
	n := 0
	for _, f := range res.GetFindings() {
		if f.GetSeverity() >= threshold {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%d finding(s) at --fail-on %s or above", n, strings.ToLower(short(threshold)))
}
