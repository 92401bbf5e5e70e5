package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluice-io/sluice/internal/grpcx"
)

// clientFlags are the connection flags every subcommand shares.
type clientFlags struct {
	addr string
	tls  grpcx.TLSFiles
}

func (c *clientFlags) register(fs *pflag.FlagSet, defaultAddr string) {
	fs.StringVar(&c.addr, "addr", defaultAddr, "gRPC address of the process")
	fs.StringVar(&c.tls.CA, "tls-ca", "", "PEM CA bundle to verify the server with")
	fs.StringVar(&c.tls.Cert, "tls-cert", "", "PEM client certificate (mTLS)")
	fs.StringVar(&c.tls.Key, "tls-key", "", "PEM client key (mTLS)")
	fs.StringVar(&c.tls.ServerName, "tls-server-name", "", "name to verify in the server's certificate")
}

func runHealth(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("health", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs, "127.0.0.1:18000")
	service := fs.String("service", "", "health service name (empty: the whole server)")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	conn, err := grpcx.Dial(cf.addr, grpcx.ClientConfig{TLS: cf.tls})
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: *service})
	if err != nil {
		return fmt.Errorf("%s: %w", cf.addr, err)
	}
	fmt.Fprintln(stdout, resp.GetStatus())
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("%s is %s", cf.addr, resp.GetStatus())
	}
	return nil
}
