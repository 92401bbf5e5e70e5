package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/grpcx"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	"github.com/sluice-io/sluice/translator/translate"
)

// runConfig prints the translator's current config and what each pusher has applied.
func runConfig(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("config", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs, "127.0.0.1:18010")
	output := fs.String("output", "text", "text (summary) or json (the whole status, resources included; with --watch, one message per line)")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the answer (without --watch)")
	watch := fs.Bool("watch", false, "follow the config stream: print every version, its size on the wire and what changed, until interrupted")
	count := fs.Int("count", 0, "with --watch: stop after this many versions (0: never)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	conn, err := grpcx.Dial(cf.addr, grpcx.ClientConfig{TLS: cf.tls})
	if err != nil {
		return err
	}
	defer conn.Close()
	if *watch {
		return watchConfig(ctx, configv1.NewConfigServiceClient(conn), cf.addr, *output == "json", *count, stdout)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	st, err := configv1.NewConfigServiceClient(conn).GetStatus(ctx, &configv1.GetStatusRequest{IncludeResources: true})
	if err != nil {
		return fmt.Errorf("%s: %w", cf.addr, err)
	}
	if *output == "json" {
		return writeJSON(stdout, st)
	}
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
		fmt.Fprintf(stdout, "  %s (%s) connected=%v applied=%d", p.GetPusherId(), p.GetDataPlane(), p.GetConnected(), p.GetApplied().GetVersion())
		if p.GetRejected() != nil {
			fmt.Fprintf(stdout, " rejected=%d: %s", p.GetRejected().GetVersion(), p.GetRejectedError())
		}
		fmt.Fprintln(stdout)
	}
	return nil
}

// runTranslate translates manifests offline and prints the config and the findings.
func runTranslate(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("translate", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	files := fs.StringSliceP("filename", "f", nil, "manifest files or directories (*.yaml, *.yml, *.json)")
	class := fs.String("ingress-class", "sluice", "the IngressClass name served")
	controller := fs.String("controller-name", "sluice.io/ingress-controller", "the IngressClass controller served")
	withoutClass := fs.Bool("watch-ingress-without-class", false, "also serve Ingresses without a class")
	output := fs.String("output", "text", "text (summary and findings) or json (the whole config)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(*files) == 0 {
		return fmt.Errorf("no manifests: give -f FILE or -f DIR")
	}
	var in translate.Input
	for _, f := range *files {
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
	res := translate.Translate(in, translate.Options{IngressClass: *class, ControllerName: *controller, WatchIngressWithoutClass: *withoutClass, Now: time.Now()})
	if *output == "json" {
		return writeJSON(stdout, res)
	}
	fmt.Fprintf(stdout, "hash %.12s\n", translate.Hash(res))
	printResources(stdout, res)
	return nil
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
			fmt.Fprintf(w, "  %-7s %-30s -> %s\n", strings.TrimPrefix(rt.GetPath().GetType().String(), "PATH_MATCH_TYPE_"), rt.GetPath().GetValue()+routeConditions(rt), routeAction(rt))
		}
	}
	if len(r.GetFindings()) > 0 {
		fmt.Fprintln(w, "findings:")
		for _, f := range r.GetFindings() {
			fmt.Fprintf(w, "  %s %s %s/%s %s: %s\n", strings.TrimPrefix(f.GetSeverity().String(), "FINDING_SEVERITY_"), f.GetObject().GetKind(),
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
			parts = append(parts, strings.ToLower(strings.TrimPrefix(p.GetType().String(), "PATH_MODIFIER_TYPE_"))+" path "+p.GetValue())
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
			out += ", " + strings.ToLower(strings.TrimPrefix(p.GetType().String(), "PATH_MODIFIER_TYPE_")) + " path rewritten to " + p.GetValue()
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

func writeJSON(w io.Writer, m proto.Message) error {
	b, err := protojson.Marshal(m)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}

// watchConfig follows the config stream as a pusher does (the chain checked against every
// state hash) without applying anything, and prints each version and what it changed.
func watchConfig(ctx context.Context, c configv1.ConfigServiceClient, addr string, asJSON bool, count int, stdout io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.StreamConfig(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	host, _ := os.Hostname()
	if err := stream.Send(&configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Hello{Hello: &configv1.Hello{
		PusherId: fmt.Sprintf("sluicectl-%s-%d", host, os.Getpid()), DataPlane: configv1.DataPlaneKind_DATA_PLANE_KIND_NONE}}}); err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	var chain contract.Chain
	versions := 0
	for count == 0 || versions < count {
		m, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("%s: %w", addr, err)
		}
		if asJSON {
			if err := writeJSONLine(stdout, m); err != nil {
				return err
			}
		}
		v, err := chain.Receive(m)
		if err != nil {
			return err
		}
		if v != nil {
			versions++
		}
		if asJSON {
			continue
		}
		size := proto.Size(m)
		switch msg := m.GetMessage().(type) {
		case *configv1.StreamConfigResponse_InitialSyncComplete:
			mk := msg.InitialSyncComplete
			fmt.Fprintf(stdout, "marker: epoch %s, complete from version %d (watcher %s revision %d)\n", mk.GetEpoch(), mk.GetVersion(), mk.GetWatcherEpoch(), mk.GetWatcherRevision())
		case *configv1.StreamConfigResponse_Config:
			st := chain.State
			fmt.Fprintf(stdout, "version %d complete, hash %.12s, %d bytes: %d virtual hosts, %d backends, %d certificates, %d objects with findings\n",
				v.GetVersion(), v.GetHash(), size, st.Len(contract.VirtualHosts), st.Len(contract.Backends), st.Len(contract.Certificates), st.Len(contract.Findings))
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

func writeJSONLine(w io.Writer, m proto.Message) error {
	b, err := protojson.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
