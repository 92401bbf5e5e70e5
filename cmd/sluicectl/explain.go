package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-io/sluice/internal/grpcx"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// explainKinds maps the names explain accepts to the kind the config names sources by.
var explainKinds = map[string]string{
	"ingress": "Ingress", "ingresses": "Ingress", "ing": "Ingress",
	"httproute": "HTTPRoute", "httproutes": "HTTPRoute",
}

// explanation is what one object became in the translator's current config.
type explanation struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Served is true when the current config holds a route or a finding of the object: the
	// translator took it as its own (of its class, or attached to its Gateway).
	Served bool `json:"served"`
	// Class says how Served was decided, in words.
	Class    string             `json:"class"`
	Config   *explainedConfig   `json:"config,omitempty"`
	Hosts    []explainedHost    `json:"hosts"`
	Findings []explainedFinding `json:"findings"`
	Pushers  []explainedPusher  `json:"pushers"`
}

type explainedConfig struct {
	Epoch           string `json:"epoch"`
	Version         uint64 `json:"version"`
	Hash            string `json:"hash"`
	WatcherEpoch    string `json:"watcherEpoch"`
	WatcherRevision uint64 `json:"watcherRevision"`
}

type explainedHost struct {
	Hostname    string           `json:"hostname"`
	Certificate string           `json:"certificate,omitempty"`
	Routes      []explainedRoute `json:"routes"`
}

type explainedRoute struct {
	Name       string `json:"name"`
	Match      string `json:"match"`
	Path       string `json:"path"`
	Conditions string `json:"conditions,omitempty"`
	Action     string `json:"action"`
}

type explainedFinding struct {
	Severity string `json:"severity"`
	Reason   string `json:"reason,omitempty"`
	Field    string `json:"field"`
	Cause    string `json:"cause"`
}

type explainedPusher struct {
	ID        string `json:"id"`
	DataPlane string `json:"dataPlane"`
	Connected bool   `json:"connected"`
	// Applied is true when the pusher acknowledged the config that holds the object (or a
	// newer one of the same epoch).
	Applied        bool   `json:"applied"`
	AppliedEpoch   string `json:"appliedEpoch,omitempty"`
	AppliedVersion uint64 `json:"appliedVersion"`
	// Rejected is set when the pusher refused a config after the one it applied.
	RejectedVersion uint64 `json:"rejectedVersion,omitempty"`
	RejectedError   string `json:"rejectedError,omitempty"`
}

func newExplainCmd(out *outputFlag) *cobra.Command {
	var cf clientFlags
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "explain ingress|httproute NAMESPACE/NAME",
		Short: "explain what one Ingress or HTTPRoute became: hosts, routes, findings, config version, pushers",
		Long: `explain asks the translator for its current config and tells what one object became:
whether the translator serves it (of its class), which hosts and routes it produced, its
findings, which config version holds it, and which pushers have applied that version.

The translator's config names an object only by what it produced, so an object with neither
a route nor a finding is reported as not served: it is not of our class, does not exist, or
was not translated yet (the exit code is 0: the answer is the explanation).
` + connectionHelp,
		Example: `  sluicectl explain ingress default/web
  sluicectl explain ing shop/checkout -o yaml
  sluicectl explain httproute default/store -o json --addr 127.0.0.1:18010`,
		Args:      cobra.ExactArgs(2),
		ValidArgs: []string{"ingress", "httproute"},
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, ok := explainKinds[strings.ToLower(args[0])]
			if !ok {
				return usagef("cannot explain %q: want ingress or httproute", args[0])
			}
			ns, name, ok := strings.Cut(args[1], "/")
			if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
				return usagef("%q: want NAMESPACE/NAME", args[1])
			}
			conn, err := grpcx.Dial(cf.addr, grpcx.ClientConfig{TLS: cf.tls})
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx, cancel := timeoutContext(cmd, timeout)
			defer cancel()
			st, err := configv1.NewConfigServiceClient(conn).GetStatus(ctx, &configv1.GetStatusRequest{IncludeResources: true})
			if err != nil {
				return fmt.Errorf("%s: %w", cf.addr, err)
			}
			e := explain(st, kind, ns, name)
			if f := out.format(); f != formatTable {
				return writeValue(cmd.OutOrStdout(), f, e)
			}
			printExplanation(cmd.OutOrStdout(), e)
			return nil
		},
	}
	cf.register(cmd.Flags(), "127.0.0.1:18010")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "how long to wait for the answer")
	return cmd
}

// explain finds what the object kind namespace/name produced in st's current config.
func explain(st *configv1.GetStatusResponse, kind, ns, name string) explanation {
	e := explanation{Kind: kind, Namespace: ns, Name: name, Hosts: []explainedHost{}, Findings: []explainedFinding{}, Pushers: []explainedPusher{}}
	is := func(o *configv1.ObjectRef) bool {
		return o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name
	}
	cur := st.GetCurrent()
	routes := 0
	for _, vh := range cur.GetResources().GetVirtualHosts() {
		var h *explainedHost
		for _, rt := range vh.GetRoutes() {
			if !is(rt.GetSource()) {
				continue
			}
			if h == nil {
				e.Hosts = append(e.Hosts, explainedHost{Hostname: vh.GetHostname(), Certificate: vh.GetCertificate(), Routes: []explainedRoute{}})
				h = &e.Hosts[len(e.Hosts)-1]
			}
			h.Routes = append(h.Routes, explainedRoute{
				Name:       rt.GetName(),
				Match:      strings.TrimPrefix(rt.GetPath().GetType().String(), "PATH_MATCH_TYPE_"),
				Path:       rt.GetPath().GetValue(),
				Conditions: strings.TrimSuffix(strings.TrimPrefix(routeConditions(rt), " ["), "]"),
				Action:     routeAction(rt),
			})
			routes++
		}
	}
	for _, f := range cur.GetResources().GetFindings() {
		if !is(f.GetObject()) {
			continue
		}
		e.Findings = append(e.Findings, explainedFinding{
			Severity: strings.TrimPrefix(f.GetSeverity().String(), "FINDING_SEVERITY_"),
			Reason:   f.GetReason(), Field: f.GetField(), Cause: f.GetCause(),
		})
	}
	e.Served = routes > 0 || len(e.Findings) > 0
	switch {
	case cur == nil:
		e.Class = "unknown: the translator has no config yet"
	case e.Served:
		e.Class = fmt.Sprintf("ours: the config holds %s and %s of it", plural(routes, "route"), plural(len(e.Findings), "finding"))
	default:
		e.Class = "not served: the config holds no route and no finding of it (not of our class, not in the cluster, or not translated yet)"
	}
	if cur == nil {
		return e
	}
	e.Config = &explainedConfig{Epoch: cur.GetEpoch(), Version: cur.GetVersion(), Hash: cur.GetHash(), WatcherEpoch: cur.GetWatcherEpoch(), WatcherRevision: cur.GetWatcherRevision()}
	for _, p := range st.GetPushers() {
		a := p.GetApplied()
		ep := explainedPusher{
			ID: p.GetPusherId(), DataPlane: strings.TrimPrefix(p.GetDataPlane().String(), "DATA_PLANE_KIND_"), Connected: p.GetConnected(),
			Applied:      a.GetEpoch() == cur.GetEpoch() && a.GetVersion() >= cur.GetVersion(),
			AppliedEpoch: a.GetEpoch(), AppliedVersion: a.GetVersion(),
		}
		if r := p.GetRejected(); r != nil {
			ep.RejectedVersion, ep.RejectedError = r.GetVersion(), p.GetRejectedError()
		}
		e.Pushers = append(e.Pushers, ep)
	}
	return e
}

func printExplanation(w io.Writer, e explanation) {
	fmt.Fprintf(w, "%s %s/%s\n", e.Kind, e.Namespace, e.Name)
	fmt.Fprintf(w, "served:   %s\n", e.Class)
	if c := e.Config; c != nil {
		fmt.Fprintf(w, "config:   epoch %s version %d hash %.12s (from watcher %s revision %d)\n", c.Epoch, c.Version, c.Hash, c.WatcherEpoch, c.WatcherRevision)
	}
	if len(e.Hosts) > 0 {
		fmt.Fprintln(w, "hosts and routes:")
		for _, h := range e.Hosts {
			host := h.Hostname
			if host == "" {
				host = "(any host)"
			}
			if h.Certificate != "" {
				host += " tls=" + h.Certificate
			}
			fmt.Fprintf(w, "  %s\n", host)
			for _, r := range h.Routes {
				cond := ""
				if r.Conditions != "" {
					cond = " [" + r.Conditions + "]"
				}
				fmt.Fprintf(w, "    %-7s %-30s -> %s\n", r.Match, r.Path+cond, r.Action)
			}
		}
	}
	if len(e.Findings) > 0 {
		fmt.Fprintln(w, "findings:")
		for _, f := range e.Findings {
			fmt.Fprintf(w, "  %s %s %s: %s\n", f.Severity, f.Reason, f.Field, f.Cause)
		}
	}
	if e.Config == nil {
		return
	}
	fmt.Fprintf(w, "pushers (has each applied version %d?):\n", e.Config.Version)
	if len(e.Pushers) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for _, p := range e.Pushers {
		state := "applied"
		if !p.Applied {
			state = fmt.Sprintf("not applied (has epoch %s version %d)", p.AppliedEpoch, p.AppliedVersion)
		}
		fmt.Fprintf(w, "  %s (%s, connected=%v): %s", p.ID, p.DataPlane, p.Connected, state)
		if p.RejectedError != "" {
			fmt.Fprintf(w, "; rejected version %d: %s", p.RejectedVersion, p.RejectedError)
		}
		fmt.Fprintln(w)
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
