package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"google.golang.org/grpc"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/version"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// Errors of the config stream's checks. Each means the stream cannot be followed further: it
// is ended, and a new one (FollowConfig) starts with a complete state.
var (
	// ErrBrokenChain is a version that does not follow from the one held: a delta onto
	// another version, or a state whose hash is not the one the message names.
	ErrBrokenChain = contract.ErrBrokenChain
	// ErrBrokenStream is a complete state sent in chunks that does not assemble.
	ErrBrokenStream = contract.ErrBrokenStream
)

// ConfigOptions says who follows the config stream.
type ConfigOptions struct {
	// ID names the client in the translator's status and logs, as a pusher's ID does; empty
	// means "client-HOSTNAME-PID".
	ID string
	// ConnectTimeout is how long FollowConfig waits for a translator that is not listening
	// yet (a connection that cannot be made); zero tries once. A translator that is listening
	// takes the stream at once, whether or not it has a config yet.
	ConnectTimeout time.Duration
}

// Config follows a translator's config stream as a pusher does, applying nothing: the
// complete state, then each delta onto the version held, every state checked against its
// hash, a complete state sent in chunks taken when whole. A client without a data plane is
// sent the state with private keys left out (docs/design.md, "Who may do what"); the hashes
// are checked all the same. It is not safe for concurrent use.
type Config struct {
	stream grpc.BidiStreamingClient[configv1.StreamConfigRequest, configv1.StreamConfigResponse]
	cancel context.CancelFunc
	chain  contract.Chain
	marker *configv1.InitialSyncComplete
	err    error // the error that ended the stream; Next returns it again
}

// FollowConfig opens a config stream on a connection to a translator (see Dial) and
// introduces the client. The stream lasts until ctx ends, Close, or an error of Next. It
// waits up to ConnectTimeout for a translator that is not listening yet.
func FollowConfig(ctx context.Context, cc grpc.ClientConnInterface, opts ConfigOptions) (*Config, error) {
	if opts.ID == "" {
		host, _ := os.Hostname()
		opts.ID = fmt.Sprintf("client-%s-%d", host, os.Getpid())
	}
	sctx, cancel := context.WithCancel(ctx)
	var callOpts []grpc.CallOption
	var timer *time.Timer
	if opts.ConnectTimeout > 0 {
		// Wait for a connection rather than fail at the first refusal, for at most
		// ConnectTimeout: only opening the stream is bounded, not the stream.
		callOpts = append(callOpts, grpc.WaitForReady(true))
		timer = time.AfterFunc(opts.ConnectTimeout, cancel)
	}
	stream, err := configv1.NewConfigServiceClient(cc).StreamConfig(sctx, callOpts...)
	if timer != nil && !timer.Stop() && err == nil {
		err = context.DeadlineExceeded // the timer fired as the stream opened: it is cancelled
	}
	if err != nil {
		cancel()
		if timer != nil && ctx.Err() == nil && sctx.Err() != nil {
			err = fmt.Errorf("no translator took the stream within %s: %w", opts.ConnectTimeout, err)
		}
		return nil, fmt.Errorf("open the config stream: %w", err)
	}
	hello := &configv1.Hello{PusherId: opts.ID, DataPlane: configv1.DataPlaneKind_DATA_PLANE_KIND_NONE,
		SoftwareVersion: version.Version, TakesChunks: true}
	if err := stream.Send(&configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Hello{Hello: hello}}); err != nil {
		cancel()
		return nil, fmt.Errorf("open the config stream: %w", err)
	}
	return &Config{stream: stream, cancel: cancel}, nil
}

// Next receives the next message and checks it. It returns the message and, when the
// message completed a version (a complete state, whole or at its last chunk, or a delta),
// that version without its resources (Resources has them). The version is nil for a marker,
// a heartbeat, or a chunk before the last. An error wrapping ErrBrokenChain or
// ErrBrokenStream is a failed check (the message is returned with it); ErrStreamEnded is the
// translator ending the stream; any other is the stream's own (a cancelled ctx among them).
// The state held does not change on an error, and the stream is ended: Next returns the
// same error from then on.
func (c *Config) Next() (*configv1.StreamConfigResponse, *configv1.Config, error) {
	if c.err != nil {
		return nil, nil, c.err
	}
	m, err := c.stream.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = ErrStreamEnded
		}
		c.fail(err)
		return nil, nil, err
	}
	v, err := c.chain.Receive(m)
	if err != nil {
		c.fail(err)
		return m, nil, err
	}
	if mk := m.GetInitialSyncComplete(); mk != nil {
		c.marker = mk
	}
	return m, v, nil
}

func (c *Config) fail(err error) {
	c.err = err
	c.cancel()
}

// Close ends the stream. What is held stays readable.
func (c *Config) Close() {
	if c.err == nil {
		c.fail(ErrNotOpen)
	}
}

// Version is the version held (epoch, version, hash, and the watcher's view it was built
// from), nil before the first complete state.
func (c *Config) Version() *configv1.Config { return c.chain.Version }

// Marker is the last marker received: from its version on, the configs of its epoch are
// built from the watcher's complete view.
func (c *Config) Marker() *configv1.InitialSyncComplete { return c.marker }

// Resources is the state held, in canonical order; nil before the first complete state.
func (c *Config) Resources() *configv1.Resources {
	if c.chain.State == nil {
		return nil
	}
	return c.chain.State.Resources()
}

// Counts is how many resources of each type a state holds.
type Counts struct {
	VirtualHosts, Backends, Certificates, Findings int
}

// Counts of the state held (zero before the first complete state).
func (c *Config) Counts() Counts {
	st := c.chain.State
	if st == nil {
		return Counts{}
	}
	return Counts{VirtualHosts: st.Len(contract.VirtualHosts), Backends: st.Len(contract.Backends),
		Certificates: st.Len(contract.Certificates), Findings: st.Len(contract.Findings)}
}

// Chunks is how many chunks the last complete state sent in chunks took.
func (c *Config) Chunks() int { return c.chain.Assembler.Chunks }
