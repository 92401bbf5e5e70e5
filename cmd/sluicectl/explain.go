package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

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

// explainedRoute names its path as the config does ({type, value}): one shape per field.
type explainedRoute struct {
	Name       string        `json:"name"`
	Path       explainedPath `json:"path"`
	Conditions string        `json:"conditions,omitempty"`
	Action     string        `json:"action"`
}

type explainedPath struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

type explainedFinding struct {
	Severity string `json:"severity"`
	Reason   string `json:"reason,omitempty"`
	Field    string `json:"field"`
	Cause    string `json:"cause"`
}

// explainedPusher has the fields of config's pushers, named alike, and whether it serves
// the object.
type explainedPusher struct {
	PusherID  string `json:"pusherId"`
	DataPlane string `json:"dataPlane"`
	Connected bool   `json:"connected"`
	// UpToDate is true when the pusher acknowledged the config that holds the object (or a
	// newer one of the same epoch).
	UpToDate bool          `json:"upToDate"`
	Applied  *explainedRef `json:"applied,omitempty"`
	// Rejected is set when the pusher refused a config after the one it applied.
	Rejected      *explainedRef `json:"rejected,omitempty"`
	RejectedError string        `json:"rejectedError,omitempty"`
}

type explainedRef struct {
	Epoch   string `json:"epoch"`
	Version uint64 `json:"version"`
	Hash    string `json:"hash,omitempty"`
}

func refOf(r *configv1.ConfigRef) *explainedRef {
	if r == nil {
		return nil
	}
	return &explainedRef{Epoch: r.GetEpoch(), Version: r.GetVersion(), Hash: r.GetHash()}
}

func newExplainCmd(out *outputFlag) *cobra.Command {
	var cf clientFlags
	var timeout time.Duration
	var namespace string
	cmd := &cobra.Command{
		Use:   "explain KIND NAME | KIND NAMESPACE/NAME | KIND/NAME  (KIND: ingress or httproute)",
		Short: "explain what one Ingress or HTTPRoute became: hosts, routes, findings, config version, pushers",
		Long: `explain asks the translator for its current config and tells what one object became:
whether the translator serves it (of its class), which hosts and routes it produced, its
findings, which config version holds it, and which pushers have applied that version.

The object is named as kubectl names it: ingress web -n shop, ingress/web -n shop, or
ingress shop/web; without a namespace, "default". Names complete from the translator's
config (source <(sluicectl completion bash)).

The translator's config names an object only by what it produced, so an object with neither
a route nor a finding is reported as not served: it is not of our class, does not exist, or
was not translated yet (the exit code is 0: the answer is the explanation).
` + connectionHelp,
		Example: `  sluicectl explain ingress default/web
  sluicectl explain ing checkout -n shop -o yaml
  sluicectl explain ingress/web
  sluicectl explain httproute default/store -o json --addr 127.0.0.1:18010`,
		Args: cobra.RangeArgs(1, 2),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return completeObjects(cmd, &cf, namespace, args, toComplete)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, ns, name, err := objectArgs(args, namespace, cmd.Flags().Changed("namespace"))
			if err != nil {
				return err
			}
			conn, err := cf.dial()
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
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "the object's namespace, when NAME does not say it")
	_ = cmd.RegisterFlagCompletionFunc("namespace", func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return completeNamespaces(cmd, &cf, args)
	})
	return cmd
}

// objectArgs reads an object named as kubectl does: KIND NAME (namespace from -n, or
// "default"), KIND NAMESPACE/NAME, or KIND/NAME. A namespace in NAME and a different -n is
// a usage error, not a guess.
func objectArgs(args []string, namespace string, nsGiven bool) (kind, ns, name string, err error) {
	kindArg, nameArg := args[0], ""
	if len(args) == 2 {
		nameArg = args[1]
	} else if k, n, ok := strings.Cut(args[0], "/"); ok {
		kindArg, nameArg = k, n
	}
	kind, ok := explainKinds[strings.ToLower(kindArg)]
	if !ok {
		return "", "", "", usagef("cannot explain %q: want ingress or httproute%s", kindArg, didYouMean(strings.ToLower(kindArg), keys(explainKinds)))
	}
	if nameArg == "" {
		return "", "", "", usagef("%s: which one? want %s NAME, %s NAMESPACE/NAME or %s/NAME", kindArg, kindArg, kindArg, kindArg)
	}
	ns, name = namespace, nameArg
	if n, rest, ok := strings.Cut(nameArg, "/"); ok {
		if len(args) == 1 {
			return "", "", "", usagef("%q: want %s/NAME, with the namespace in -n", args[0], kindArg)
		}
		if nsGiven && n != namespace {
			return "", "", "", usagef("%q names namespace %q, but --namespace says %q", nameArg, n, namespace)
		}
		ns, name = n, rest
	}
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return "", "", "", usagef("%q: want NAME or NAMESPACE/NAME", nameArg)
	}
	return kind, ns, name, nil
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// completionTimeout bounds asking the translator for names while the user presses tab.
const completionTimeout = 2 * time.Second

// servedObjects lists the objects of kind (every kind when empty) that the translator's
// current config holds a route or a finding of, as namespace/name, sorted.
func servedObjects(cmd *cobra.Command, cf *clientFlags, kind string) ([]string, error) {
	conn, err := cf.dial()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	st, err := configv1.NewConfigServiceClient(conn).GetStatus(ctx, &configv1.GetStatusRequest{IncludeResources: true})
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	add := func(o *configv1.ObjectRef) {
		if o != nil && (kind == "" || o.GetKind() == kind) && o.GetNamespace() != "" {
			seen[o.GetNamespace()+"/"+o.GetName()] = true
		}
	}
	res := st.GetCurrent().GetResources()
	for _, vh := range res.GetVirtualHosts() {
		for _, rt := range vh.GetRoutes() {
			add(rt.GetSource())
		}
	}
	for _, f := range res.GetFindings() {
		add(f.GetObject())
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, nil
}

// completeObjects completes explain's arguments: the kind, then the names the translator
// serves (NAMESPACE/NAME, or NAME when -n is given), and KIND/NAME as typed.
func completeObjects(cmd *cobra.Command, cf *clientFlags, namespace string, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	const noFiles = cobra.ShellCompDirectiveNoFileComp
	nsGiven := cmd.Flags().Changed("namespace")
	names := func(kindArg string) []string {
		kind, ok := explainKinds[strings.ToLower(kindArg)]
		if !ok {
			return nil
		}
		objs, err := servedObjects(cmd, cf, kind)
		if err != nil {
			cobra.CompErrorln(err.Error())
			return nil
		}
		var out []string
		for _, o := range objs {
			ns, name, _ := strings.Cut(o, "/")
			switch {
			case nsGiven && ns == namespace:
				out = append(out, name)
			case !nsGiven:
				out = append(out, o)
			}
		}
		return out
	}
	switch len(args) {
	case 0:
		if kindArg, _, ok := strings.Cut(toComplete, "/"); ok {
			var out []string
			for _, n := range names(kindArg) {
				if !strings.Contains(n, "/") {
					out = append(out, kindArg+"/"+n)
				}
			}
			if !nsGiven { // KIND/NAME is of -n's namespace: "default"
				for _, n := range names(kindArg) {
					if ns, name, _ := strings.Cut(n, "/"); ns == namespace {
						out = append(out, kindArg+"/"+name)
					}
				}
			}
			return out, noFiles
		}
		return []string{"ingress", "httproute"}, noFiles
	case 1:
		return names(args[0]), noFiles
	}
	return nil, noFiles
}

// completeNamespaces completes -n with the namespaces of the objects the translator serves
// (of the kind already typed, if any).
func completeNamespaces(cmd *cobra.Command, cf *clientFlags, args []string) ([]cobra.Completion, cobra.ShellCompDirective) {
	kind := ""
	if len(args) > 0 {
		k, _, _ := strings.Cut(args[0], "/")
		kind = explainKinds[strings.ToLower(k)]
	}
	objs, err := servedObjects(cmd, cf, kind)
	if err != nil {
		cobra.CompErrorln(err.Error())
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	seen := map[string]bool{}
	var out []string
	for _, o := range objs {
		if ns, _, _ := strings.Cut(o, "/"); !seen[ns] {
			seen[ns] = true
			out = append(out, ns)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
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
				Path:       explainedPath{Type: short(rt.GetPath().GetType()), Value: rt.GetPath().GetValue()},
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
			Severity: short(f.GetSeverity()),
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
		e.Pushers = append(e.Pushers, explainedPusher{
			PusherID: p.GetPusherId(), DataPlane: short(p.GetDataPlane()), Connected: p.GetConnected(),
			UpToDate: a.GetEpoch() == cur.GetEpoch() && a.GetVersion() >= cur.GetVersion(),
			Applied:  refOf(a), Rejected: refOf(p.GetRejected()), RejectedError: p.GetRejectedError(),
		})
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
				fmt.Fprintf(w, "    %-7s %-30s -> %s\n", r.Path.Type, r.Path.Value+cond, r.Action)
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
		if !p.UpToDate {
			var a explainedRef
			if p.Applied != nil {
				a = *p.Applied
			}
			state = fmt.Sprintf("not applied (has epoch %s version %d)", a.Epoch, a.Version)
		}
		fmt.Fprintf(w, "  %s (%s, connected=%v): %s", p.PusherID, p.DataPlane, p.Connected, state)
		if p.Rejected != nil {
			fmt.Fprintf(w, "; rejected version %d: %s", p.Rejected.Version, p.RejectedError)
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
