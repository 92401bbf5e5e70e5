package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// kubectl's habits: explain names an object as kubectl does (KIND NAMESPACE/NAME, KIND NAME
// -n NAMESPACE, KIND/NAME -n NAMESPACE, "default" without one), and a namespace given twice
// differently is a usage error.
func TestExplainNamesObjectsAsKubectlDoes(t *testing.T) {
	addr := startFake(t, fixtureStatus(t))
	explainJSON := func(args ...string) explanation {
		t.Helper()
		code, out, errs := run(t, append(append([]string{"explain"}, args...), "--addr", addr, "-o", "json")...)
		if code != exitOK {
			t.Fatalf("explain %v: exit %d:\n%s", args, code, errs)
		}
		var e explanation
		if err := json.Unmarshal([]byte(out), &e); err != nil {
			t.Fatal(err)
		}
		return e
	}
	want := explainJSON("ingress", "shop/broken")
	if !want.Served || len(want.Findings) != 1 {
		t.Fatalf("explain ingress shop/broken = %+v, want served with its finding", want)
	}
	for _, args := range [][]string{
		{"ingress", "broken", "-n", "shop"},
		{"ingress/broken", "-n", "shop"},
		{"ing/broken", "--namespace", "shop"},
		{"Ingress", "shop/broken", "-n", "shop"},
		{"ingresses", "broken", "--namespace=shop"},
	} {
		got := explainJSON(args...)
		if got.Namespace != "shop" || got.Name != "broken" || got.Kind != "Ingress" || !got.Served || len(got.Findings) != 1 {
			t.Errorf("explain %v = %s %s/%s served=%v, want what explain ingress shop/broken says", args, got.Kind, got.Namespace, got.Name, got.Served)
		}
	}
	if got := explainJSON("ingress/broken"); got.Namespace != "default" || got.Served {
		t.Errorf("explain ingress/broken (no namespace) = %s/%s served=%v, want default/broken, not served", got.Namespace, got.Name, got.Served)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ingress", "shop/broken", "-n", "other"}, `"shop/broken" names namespace "shop", but --namespace says "other"`},
		{[]string{"ingress"}, "which one?"},
		{[]string{"ingress/shop/broken"}, "with the namespace in -n"},
		{[]string{"ingres", "shop/broken"}, `did you mean "ingress"?`},
		{[]string{"ingress", "a", "b"}, "accepts between 1 and 2 arg(s)"},
	} {
		code, _, errs := run(t, append(append([]string{"explain"}, c.args...), "--addr", addr)...)
		if code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("explain %v: exit %d, want 2 saying %q:\n%s", c.args, code, c.want, errs)
		}
	}
}

// kubectl's habits: a mistyped command or flag gets the closest one suggested, and is a usage
// error; a word close to nothing gets no suggestion.
func TestMistypedCommandsAndFlagsGetASuggestion(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"confg"}, `unknown command "confg", did you mean "config"?`},
		{[]string{"explian", "ingress", "a/b"}, `did you mean "explain"?`},
		{[]string{"ver"}, `did you mean "version"?`},
		{[]string{"completion", "bsh"}, `did you mean "bash"?`},
		{[]string{"config", "--adr", "127.0.0.1:1"}, `unknown flag: --adr, did you mean "--addr"?`},
		{[]string{"translate", "--fail-onn", "error"}, `did you mean "--fail-on"?`},
		{[]string{"watch", "--output", "json", "--until-sync"}, `did you mean "--until-synced"?`},
	} {
		code, _, errs := run(t, c.args...)
		if code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("sluicectl %v: exit %d, want 2 saying %q:\n%s", c.args, code, c.want, errs)
		}
	}
	if code, _, errs := run(t, "zzzzzzzz"); code != exitUsage || strings.Contains(errs, "did you mean") {
		t.Errorf("a word close to no command: exit %d:\n%s", code, errs)
	}
}

// kubectl's habits: completion offers the kinds, the names the translator serves (as
// NAMESPACE/NAME, or NAME with -n, or KIND/NAME), the namespaces, and the values of -o and
// --fail-on.
func TestCompletionOffersNamesNamespacesAndFlagValues(t *testing.T) {
	addr := startFake(t, fixtureStatus(t))
	complete := func(args ...string) []string {
		t.Helper()
		code, out, errs := run(t, append([]string{cobra.ShellCompRequestCmd}, args...)...)
		if code != exitOK {
			t.Fatalf("completion of %v: exit %d:\n%s", args, code, errs)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if !strings.HasPrefix(l, ":") {
				got = append(got, strings.SplitN(l, "\t", 2)[0])
			}
		}
		return got
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"explain", ""}, "ingress httproute"},
		{[]string{"explain", "--addr", addr, "ingress", ""}, "shop/broken shop/web"},
		{[]string{"explain", "--addr", addr, "-n", "shop", "ingress", ""}, "broken web"},
		{[]string{"explain", "--addr", addr, "-n", "shop", "ingress/"}, "ingress/broken ingress/web"},
		{[]string{"explain", "--addr", addr, "httproute", ""}, ""},
		{[]string{"explain", "--addr", addr, "-n", ""}, "shop"},
		{[]string{"config", "-o", ""}, "table json yaml"},
		{[]string{"translate", "--fail-on", ""}, "none warning error"},
		{[]string{"con"}, "config"},
	} {
		if got := strings.Join(complete(c.args...), " "); got != c.want {
			t.Errorf("completion of %q = %q, want %q", c.args, got, c.want)
		}
	}
}

// Errors name only flags the command has: every --flag an error or a hint mentions is one of
// its own (grpcx's refusal names the processes' --insecure, which sluicectl lacks).
func TestErrorsNameOnlyFlagsTheCommandHas(t *testing.T) {
	down := closedAddr(t)
	flagRe := regexp.MustCompile(`--[a-z][a-z-]+`)
	for _, args := range [][]string{
		{"config", "--addr", "192.0.2.1:18010"},
		{"explain", "ingress", "a/b", "--addr", "192.0.2.1:18010"},
		{"health", "--addr", "192.0.2.1:18000"},
		{"watch", "--addr", "192.0.2.1:18000"},
		{"version", "--addr", "192.0.2.1:18010", "-o", "json"},
		{"config", "--addr", down, "--timeout", "1s"},
		{"translate"},
		{"translate", "-f", "x", "--fail-on", "sometimes"},
		{"config", "-o", "xml"},
		{"explain", "ingress", "a/b", "-n", "c"},
	} {
		_, out, errs := run(t, args...)
		cmd, _, err := newRoot(nil, nil).Find(args)
		if err != nil {
			t.Fatal(err)
		}
		known := map[string]bool{"--help": true, "--version": true}
		for _, fs := range []*pflag.FlagSet{cmd.Flags(), cmd.InheritedFlags()} {
			fs.VisitAll(func(f *pflag.Flag) { known["--"+f.Name] = true })
		}
		for _, f := range flagRe.FindAllString(out+errs, -1) {
			if !known[f] {
				t.Errorf("sluicectl %v names %s, a flag %s does not have:\n%s%s", args, f, cmd.CommandPath(), out, errs)
			}
		}
	}
}
