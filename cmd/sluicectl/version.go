package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/version"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// serverVersionUnknown is what version says of a server that does not name its build (every
// Sluice process does, in the sluice-version and sluice-revision response headers; an older
// one or another server does not), and of a pusher that reported none.
const serverVersionUnknown = "unknown"

// versionInfo is version's answer in JSON and YAML.
type versionInfo struct {
	Client buildInfo   `json:"client"`
	Server *serverInfo `json:"server,omitempty"`
}

// buildInfo names a build. Its fields are not "version" and "revision", which are numbers
// everywhere else (a config's version, a watch stream's revision): one shape per field.
type buildInfo struct {
	Version   string `json:"softwareVersion"`
	Revision  string `json:"sourceRevision"`
	GoVersion string `json:"goVersion"`
}

type serverInfo struct {
	Address   string `json:"address"`
	Reachable bool   `json:"reachable"`
	// Version and Revision are what the server's response headers name ("unknown" if none).
	Version  string `json:"softwareVersion,omitempty"`
	Revision string `json:"sourceRevision,omitempty"`
	Error    string `json:"error,omitempty"`
	// Pushers are the software versions the translator's pushers said in their Hello.
	Pushers []pusherVersion `json:"pushers,omitempty"`
}

type pusherVersion struct {
	ID      string `json:"pusherId"`
	Version string `json:"softwareVersion"`
}

func newVersionCmd(out *outputFlag) *cobra.Command {
	var cf clientFlags
	var clientOnly bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "version",
		Short: "print sluicectl's version and, when reachable, the server's",
		Long: `version prints sluicectl's version, source revision and Go release. Unless --client is
given it also asks the process at --addr (the translator by default): whether it is
reachable, its version and revision (every Sluice process names its build in the response
headers of each call; "unknown" for a server that does not) and, for a translator, the
versions its pushers reported. A process also prints its version with --version, logs it at
start and exposes it as the sluice_build_info metric. An unreachable server is reported, not
a failure: the exit code is 0 either way.
` + connectionHelp,
		Example: `  sluicectl version
  sluicectl version --client -o json
  sluicectl version --addr 127.0.0.1:18010 --tls-ca ca.crt --tls-cert operator.crt --tls-key operator.key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := versionInfo{Client: buildInfo{Version: version.Version, Revision: version.Rev(), GoVersion: version.GoVersion()}}
			if !clientOnly {
				ctx, cancel := timeoutContext(cmd, timeout)
				defer cancel()
				info.Server = &serverInfo{Address: cf.addr}
				if err := askServer(ctx, cf, info.Server); err != nil {
					info.Server.Error = err.Error()
				}
			}
			if f := out.format(); f != formatTable {
				return writeValue(cmd.OutOrStdout(), f, info)
			}
			printVersion(cmd.OutOrStdout(), info)
			return nil
		},
	}
	cf.register(cmd.Flags(), "127.0.0.1:18010")
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print only sluicectl's version; do not contact a server")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for the server")
	return cmd
}

// askServer fills s from the server at cf.addr: reachable when its health service answers,
// pushers' versions when it is a translator.
func askServer(ctx context.Context, cf clientFlags, s *serverInfo) error {
	conn, err := cf.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	var md metadata.MD
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md)); err != nil {
		return err
	}
	s.Reachable, s.Version, s.Revision = true, serverVersionUnknown, serverVersionUnknown
	if v := md.Get(grpcx.VersionHeader); len(v) > 0 {
		s.Version = v[0]
	}
	if r := md.Get(grpcx.RevisionHeader); len(r) > 0 {
		s.Revision = r[0]
	}
	st, err := configv1.NewConfigServiceClient(conn).GetStatus(ctx, &configv1.GetStatusRequest{})
	switch {
	case status.Code(err) == codes.Unimplemented:
		return nil // not a translator (a watcher): no pushers to ask about
	case err != nil:
		return fmt.Errorf("status: %w", err)
	}
	for _, p := range st.GetPushers() {
		v := p.GetSoftwareVersion()
		if v == "" {
			v = serverVersionUnknown
		}
		s.Pushers = append(s.Pushers, pusherVersion{ID: p.GetPusherId(), Version: v})
	}
	return nil
}

func printVersion(w io.Writer, info versionInfo) {
	c := info.Client
	fmt.Fprintf(w, "client: sluicectl %s (revision %s, %s)\n", c.Version, c.Revision, c.GoVersion)
	s := info.Server
	switch {
	case s == nil:
	case !s.Reachable:
		fmt.Fprintf(w, "server %s: unreachable: %s\n", s.Address, s.Error)
	default:
		fmt.Fprintf(w, "server %s: reachable, server version: %s (revision %s)\n", s.Address, s.Version, s.Revision)
		if s.Error != "" {
			fmt.Fprintf(w, "  %s\n", s.Error)
		}
		for _, p := range s.Pushers {
			fmt.Fprintf(w, "  pusher %s: %s\n", p.ID, p.Version)
		}
	}
}
