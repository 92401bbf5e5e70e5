// Command watch-inventory is a runnable example of Sluice's public client package: it follows
// a watcher's Watch stream to its InitialSyncComplete marker, with every check Sluice's own
// translator makes (gap-free revisions, one epoch, the marker's inventory against the
// objects received), and prints the inventory it verified, one line per kind.
//
//	go run ./examples/watch-inventory --addr 127.0.0.1:18000
//
// Off loopback a watcher answers only mutual TLS: give --tls-ca, --tls-cert and --tls-key
// (the operator's certificate). It exits 0 once the inventory is verified, 1 when the
// stream breaks or a check fails, 2 on a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluice-io/sluice/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole program, so that its test runs it as a user would.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("watch-inventory", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:18000", "the watcher's gRPC address")
	var tls client.TLS
	fs.StringVar(&tls.CA, "tls-ca", "", "PEM CA bundle to verify the watcher with")
	fs.StringVar(&tls.Cert, "tls-cert", "", "PEM client certificate (the operator's)")
	fs.StringVar(&tls.Key, "tls-key", "", "PEM client key")
	timeout := fs.Duration("timeout", time.Minute, "how long to wait for the watcher to serve and sync")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := follow(ctx, *addr, tls, *timeout, stdout); err != nil {
		fmt.Fprintln(stderr, "watch-inventory:", err)
		return 1
	}
	return 0
}

func follow(ctx context.Context, addr string, tls client.TLS, timeout time.Duration, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := client.Dial(addr, tls)
	if err != nil {
		return err
	}
	defer conn.Close()
	w := client.NewWatch(conn, client.WatchOptions{ClientName: "watch-inventory", ConnectTimeout: timeout})
	for {
		if err := w.Open(ctx); err != nil {
			return err
		}
		for {
			_, event, err := w.Next()
			if errors.Is(err, client.ErrStreamEnded) {
				break // the watcher ended the stream: the next one resumes, or starts a fresh snapshot
			}
			if err != nil {
				return err
			}
			if event == client.EventSynced {
				fmt.Fprintf(stdout, "watcher epoch %s, revision %d: %d objects, verified complete\n", w.Epoch(), w.Revision(), w.Len())
				for _, ki := range w.Inventory() {
					fmt.Fprintf(stdout, "%-45s %6d  sha256:%x\n", client.KindKey(ki.GetKind()), ki.GetCount(), ki.GetDigest())
				}
				return nil
			}
		}
	}
}
