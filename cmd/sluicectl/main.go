// Command sluicectl is the reference gRPC client of Sluice's streams: it checks health,
// consumes the watch stream (verifying revisions and the marker's inventory), prints the
// translator's config and pushers' state, explains what one Ingress or HTTPRoute became,
// and translates manifests offline. Every command prints a table (the default), JSON or
// YAML (-o), and exits 0 when it did what was asked, 1 when it failed, 2 on a usage error.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/version"
)

// Exit codes, the same for every command (and written in every command's --help).
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

const exitCodesHelp = `
Exit codes:
  0  success
  1  failure (the server is unreachable, answered an error, or the check failed)
  2  usage error (unknown command, bad flag or argument, bad --output)
`

// connectionHelp says how every networked command reaches a process; it is appended to
// their long help.
const connectionHelp = `
Connection: --addr is the process's gRPC address (host:port; a comma-separated list tries
replicas in order). Off loopback Sluice requires mutual TLS: --tls-ca verifies the server,
--tls-cert and --tls-key are the operator's client certificate (spiffe://<td>/sluice/operator),
--tls-server-name is the name to check in the server's certificate when it differs from the
host dialled. To reach an in-cluster translator, copy the operator certificate out of the
sluice-operator-tls Secret and port-forward (docs/operations.md, "Reaching an in-cluster
translator with sluicectl"):

  kubectl -n sluice-system port-forward svc/sluice-translator 18010 &
  sluicectl config --addr 127.0.0.1:18010 --tls-ca ca.crt --tls-cert operator.crt \
    --tls-key operator.key --tls-server-name sluice-translator
`

// usageError is a mistake in the command line: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(execute(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// execute runs one command line and returns its exit code.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	name := "sluicectl"
	if cmd != nil && cmd != root {
		name = cmd.CommandPath()
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "%s: %v\n(see %s --help)\n", name, err, name)
		return exitUsage
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return exitFailure
}

// newRoot builds the command tree, printing to stdout and stderr.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	var out outputFlag
	root := &cobra.Command{
		Use:   "sluicectl",
		Short: "the reference client of Sluice's gRPC streams",
		Long: `sluicectl talks to Sluice's processes over gRPC: it checks their health, follows the
watcher's and the translator's streams, prints the translator's config and what each pusher
applied, explains what one Ingress or HTTPRoute became, and translates manifests offline.
Every command prints a table (the default), JSON or YAML: -o table|json|yaml.
` + connectionHelp,
		Example: `  sluicectl config --addr 127.0.0.1:18010
  sluicectl explain ingress default/web -o yaml
  sluicectl version
  source <(sluicectl completion bash)`,
		// --version, as every Sluice process has it; `sluicectl version` also asks a server.
		Version:       version.String("sluicectl"),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		// Without a command: the help on stderr and exit 2, as before cobra.
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q%s", args[0], didYouMean(args[0], commandNames(cmd)))
			}
			cmd.SetOut(cmd.ErrOrStderr())
			_ = cmd.Help()
			return usagef("no command given")
		},
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			return out.validate()
		},
	}
	// Before the completion command is made: it keeps the writer it finds then.
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().VarP(&out, "output", "o", "output format: table, json or yaml (text, the name before, is table)")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{flagError(c, err)} })
	root.SetUsageTemplate(root.UsageTemplate() + exitCodesHelp)

	root.AddCommand(
		newHealthCmd(&out),
		newConfigCmd(&out),
		newExplainCmd(&out),
		newTranslateCmd(&out),
		newWatchCmd(&out),
		newVersionCmd(&out),
	)
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		switch c.Name() {
		case "help":
			c.Example = "  sluicectl help explain"
		case "completion":
			c.Example = `  source <(sluicectl completion bash)
  sluicectl completion zsh > "${fpath[1]}/_sluicectl"`
			for _, sh := range c.Commands() {
				sh.Example = "  sluicectl completion " + sh.Name() + " > sluicectl." + sh.Name()
			}
		}
	}
	walk(root, func(c *cobra.Command) {
		if c == root {
			return
		}
		if c.HasSubCommands() && !c.Runnable() {
			// A group (completion): without a known subcommand it is a usage error, not
			// cobra's help and exit 0.
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(cmd *cobra.Command, args []string) error {
				if len(args) > 0 {
					return usagef("unknown command %q for %q%s", args[0], cmd.CommandPath(), didYouMean(args[0], commandNames(cmd)))
				}
				cmd.SetOut(cmd.ErrOrStderr())
				_ = cmd.Help()
				return usagef("%s needs a subcommand", cmd.CommandPath())
			}
			return
		}
		c.Args = usageArgs(c.Args)
	})
	return root
}

// commandNames are c's subcommands and their aliases, the words a mistyped one is compared with.
func commandNames(c *cobra.Command) []string {
	var out []string
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() || s.Name() == "help" {
			out = append(out, s.Name())
			out = append(out, s.Aliases...)
		}
	}
	return out
}

// didYouMean is ", did you mean X?" for the closest of candidates to typed (as kubectl and git
// suggest: within two edits, or a prefix), or "" when none is close.
func didYouMean(typed string, candidates []string) string {
	best := config.Closest(typed, candidates)
	if best == "" {
		return ""
	}
	return fmt.Sprintf(", did you mean %q?", best)
}

// flagError adds to pflag's "unknown flag: --adr" the closest flag the command has.
func flagError(c *cobra.Command, err error) error {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "unknown flag: --")
	if !ok {
		return err
	}
	var flags []string
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			flags = append(flags, f.Name)
		}
	})
	if s := didYouMean(name, flags); s != "" {
		return fmt.Errorf("%w%s", err, strings.Replace(s, `"`, `"--`, 1))
	}
	return err
}

func walk(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, s := range c.Commands() {
		walk(s, f)
	}
}

// usageArgs makes a wrong argument count (or an unknown subcommand) a usage error (exit 2);
// cobra's own argument checks return plain errors.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if check == nil {
			return nil
		}
		if err := check(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// format is an output format.
type format string

const (
	formatTable format = "table"
	formatJSON  format = "json"
	formatYAML  format = "yaml"
)

// outputFlag is -o/--output. "text", the name before cobra, is accepted as table.
type outputFlag struct {
	value string
}

func (o *outputFlag) String() string {
	if o.value == "" {
		return string(formatTable)
	}
	return o.value
}
func (o *outputFlag) Set(s string) error { o.value = s; return nil }
func (o *outputFlag) Type() string       { return "table|json|yaml" }

// validate is called before every command, so that a bad -o is a usage error (exit 2) and
// not a flag parse error that hides which values are allowed.
func (o *outputFlag) validate() error {
	switch strings.ToLower(o.String()) {
	case "table", "text", "json", "yaml":
		return nil
	}
	return usagef("--output %q: want table, json or yaml", o.value)
}

func (o *outputFlag) format() format {
	switch strings.ToLower(o.String()) {
	case "json":
		return formatJSON
	case "yaml":
		return formatYAML
	}
	return formatTable
}
