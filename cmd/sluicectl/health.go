package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluice-io/sluice/internal/grpcx"
)

// clientFlags are the connection flags every networked command shares.
type clientFlags struct {
	addr string
	tls  grpcx.TLSFiles
}

func (c *clientFlags) register(fs *pflag.FlagSet, defaultAddr string) {
	fs.StringVar(&c.addr, "addr", defaultAddr, "gRPC address of the process (host:port; a comma-separated list tries replicas in order)")
	fs.StringVar(&c.tls.CA, "tls-ca", "", "PEM CA bundle to verify the server with")
	fs.StringVar(&c.tls.Cert, "tls-cert", "", "PEM client certificate (mTLS; the operator's, operator.crt)")
	fs.StringVar(&c.tls.Key, "tls-key", "", "PEM client key (mTLS; operator.key)")
	fs.StringVar(&c.tls.ServerName, "tls-server-name", "", "name to verify in the server's certificate (e.g. sluice-translator through a port-forward)")
}

// dial connects to --addr. Off loopback Sluice requires mutual TLS; grpcx's refusal names
// the processes' --insecure, which sluicectl does not have, so it says what sluicectl can do.
func (c *clientFlags) dial() (*grpc.ClientConn, error) {
	conn, err := grpcx.Dial(c.addr, grpcx.ClientConfig{TLS: c.tls})
	if errors.Is(err, grpcx.ErrInsecure) {
		return nil, usagef("--addr %s is off loopback, where Sluice answers only mutual TLS: give --tls-ca, --tls-cert and --tls-key (the operator's certificate), or port-forward and use --addr 127.0.0.1:PORT", c.addr)
	}
	return conn, err
}

// healthResult is health's answer in JSON and YAML.
type healthResult struct {
	Address string `json:"address"`
	// Service is the gRPC service asked about ("service" is a Kubernetes Service elsewhere).
	Service string `json:"grpcService"`
	Status  string `json:"status"`
}

func newHealthCmd(out *outputFlag) *cobra.Command {
	var cf clientFlags
	var service string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "health",
		Short: "check the gRPC health service of a Sluice process",
		Long: `health asks a process's gRPC health service (watcher 18000, translator 18010 by default)
and exits 0 only when it answers SERVING.
` + connectionHelp,
		Example: `  sluicectl health --addr 127.0.0.1:18000
  sluicectl health --addr 127.0.0.1:18010 --service sluice.config.v1.ConfigService -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			conn, err := cf.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx, cancel := timeoutContext(cmd, timeout)
			defer cancel()
			resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
			if err != nil {
				return fmt.Errorf("%s: %w", cf.addr, err)
			}
			w := cmd.OutOrStdout()
			if f := out.format(); f != formatTable {
				if err := writeValue(w, f, healthResult{Address: cf.addr, Service: service, Status: resp.GetStatus().String()}); err != nil {
					return err
				}
			} else {
				fmt.Fprintln(w, resp.GetStatus())
			}
			if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				return fmt.Errorf("%s is %s", cf.addr, resp.GetStatus())
			}
			return nil
		},
	}
	cf.register(cmd.Flags(), "127.0.0.1:18000")
	cmd.Flags().StringVar(&service, "service", "", "health service name (empty: the whole server)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	return cmd
}
