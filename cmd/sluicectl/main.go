// Command sluicectl is the reference gRPC client of Sluice's streams: it checks health,
// consumes the watch stream (verifying revisions and the marker's inventory), and prints the
// translator's config and pushers' state.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
)

// command is one sluicectl subcommand.
type command struct {
	name  string
	short string
	run   func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = []command{
	{"health", "check the gRPC health service of a Sluice process", runHealth},
	{"config", "print the translator's current config and the pushers' ACK state", runConfig},
	{"translate", "translate manifests offline and print the config and findings", runTranslate},
	{"watch", "follow a watcher's stream, verifying revisions and the marker's inventory", runWatch},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, "usage: sluicectl COMMAND [flags]\n\ncommands:")
		for _, c := range commands {
			fmt.Fprintf(stderr, "  %-10s %s\n", c.name, c.short)
		}
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			if err := c.run(ctx, args[1:], stdout, stderr); err != nil {
				if err == pflag.ErrHelp {
					return 0
				}
				fmt.Fprintf(stderr, "sluicectl %s: %v\n", c.name, err)
				return 1
			}
			return 0
		}
	}
	fmt.Fprintf(stderr, "sluicectl: unknown command %q (see sluicectl help)\n", args[0])
	return 2
}
