// Package client follows Sluice's two gRPC streams the way Sluice's own processes do, for
// programs that consume them: the watcher's Watch stream (a snapshot, gap-free revisions,
// and the InitialSyncComplete marker whose inventory proves the view complete) and the
// translator's config stream (a complete state, then deltas, each checked against its state
// hash). A consumer that reads the generated stubs directly must re-implement those checks
// to be able to trust what it holds; this package is the one implementation, the same code
// the translator and the pusher check with (docs/design.md, "The watch stream" and "The
// config stream"), and the one sluicectl uses.
//
// Every call is authorized by identity: off loopback a Sluice process answers only mutual
// TLS, and the Watch stream and a config stream without a data plane are open to the
// operator's certificate (docs/design.md, "Who may do what"). Dial makes such a connection.
package client

import (
	"errors"
	"fmt"

	"google.golang.org/grpc"

	"github.com/sluice-io/sluice/internal/grpcx"
)

// TLS names the PEM files of a mutual-TLS connection: the CA that verifies the server, and
// the client's own certificate and key (the operator's, for a program that only reads).
// ServerName, when set, is the name verified in the server's certificate instead of the
// address's host (for example sluice-translator, through a port-forward).
type TLS struct {
	CA, Cert, Key, ServerName string
}

// ErrInsecure is returned by Dial for an address off loopback without mutual TLS: Sluice
// would refuse the connection, and a plaintext one would expose what the streams carry.
var ErrInsecure = grpcx.ErrInsecure

// Dial returns a connection to a Sluice process at target ("host:port", or a comma-separated
// list of replicas tried in order), with the message size limit and reconnect settings
// Sluice's own processes use. Plaintext is allowed on loopback only. The connection is made
// on first use and re-made after failures; Close it when done.
func Dial(target string, tls TLS) (*grpc.ClientConn, error) {
	conn, err := grpcx.Dial(target, grpcx.ClientConfig{TLS: grpcx.TLSFiles{CA: tls.CA, Cert: tls.Cert, Key: tls.Key, ServerName: tls.ServerName}})
	if errors.Is(err, ErrInsecure) {
		// grpcx's text names the processes' flags; say what a caller of Dial can do.
		return nil, fmt.Errorf("dial %s: %w: off loopback Sluice answers only mutual TLS: give TLS.CA, TLS.Cert and TLS.Key", target, ErrInsecure)
	}
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", target, err)
	}
	return conn, nil
}
