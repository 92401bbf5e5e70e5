package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

func newWatchCmd(out *outputFlag) *cobra.Command {
	var cf clientFlags
	var kindList []string
	var untilSynced, quiet bool
	var connectTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "follow a watcher's stream, verifying revisions and the marker's inventory",
		Long: `watch consumes a watcher's Watch stream and checks every message as the translator does
(framing, epoch, revision continuity, the marker's inventory), printing one line per event
(-o json: one JSON object per line; -o yaml: one document per event). It runs until
interrupted (exit 0), the stream breaks (exit 1) or, with --until-synced, the marker is
verified (exit 0).
` + connectionHelp,
		Example: `  sluicectl watch --addr 127.0.0.1:18000 --until-synced --quiet
  sluicectl watch --kinds networking.k8s.io/v1/Ingress,v1/Service -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := &watchv1.WatchRequest{ClientName: "sluicectl"}
			for _, k := range kindList {
				parts := strings.Split(k, "/")
				switch len(parts) {
				case 2:
					req.Kinds = append(req.Kinds, &watchv1.GroupVersionKind{Version: parts[0], Kind: parts[1]})
				case 3:
					req.Kinds = append(req.Kinds, &watchv1.GroupVersionKind{Group: parts[0], Version: parts[1], Kind: parts[2]})
				default:
					return usagef("--kinds %q: want group/version/Kind", k)
				}
			}
			conn, err := cf.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx := cmd.Context()
			stream, first, err := openWatch(ctx, watchv1.NewWatchServiceClient(conn), req, connectTimeout)
			if err != nil {
				return fmt.Errorf("%s: %w", cf.addr, err)
			}
			m := watchstream.NewMirror()
			m.StartStream()
			p := &printer{w: cmd.OutOrStdout(), format: out.format(), quiet: quiet}
			for {
				ev, err := first, error(nil)
				if ev == nil {
					ev, err = stream.Recv()
				}
				first = nil
				if err != nil {
					if errors.Is(err, io.EOF) {
						return errors.New("stream ended by the watcher")
					}
					if ctx.Err() != nil {
						return nil // interrupted: following until then is what was asked, as config --watch
					}
					return err
				}
				change, err := m.Apply(ev)
				if err != nil {
					return fmt.Errorf("stream check failed at revision %d: %w", ev.GetRevision(), err)
				}
				if err := p.print(ev, m); err != nil {
					return err
				}
				if change == watchstream.ChangeSynced && untilSynced {
					return nil
				}
			}
		},
	}
	cf.register(cmd.Flags(), "127.0.0.1:18000")
	cmd.Flags().StringSliceVar(&kindList, "kinds", nil, "only these kinds, as group/version/Kind (v1/Service for the core group)")
	cmd.Flags().BoolVar(&untilSynced, "until-synced", false, "exit 0 once the marker arrived and its inventory verified")
	cmd.Flags().BoolVar(&quiet, "quiet", false, "print only the marker and errors, not every object")
	cmd.Flags().DurationVar(&connectTimeout, "connect-timeout", 30*time.Second, "how long to keep trying while the watcher is not serving yet (UNAVAILABLE)")
	return cmd
}

// openWatch opens a stream and reads its first message, trying again while the watcher is
// starting (not listening yet, or still resolving its kinds) for up to timeout.
func openWatch(ctx context.Context, c watchv1.WatchServiceClient, req *watchv1.WatchRequest, timeout time.Duration) (grpc.ServerStreamingClient[watchv1.WatchResponse], *watchv1.WatchResponse, error) {
	deadline := time.Now().Add(timeout)
	for {
		stream, err := c.Watch(ctx, req)
		if err == nil {
			var first *watchv1.WatchResponse
			if first, err = stream.Recv(); err == nil {
				return stream, first, nil
			}
		}
		if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
			return nil, nil, err
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

type printer struct {
	w      io.Writer
	format format
	quiet  bool
}

type jsonEvent struct {
	Epoch     string         `json:"epoch"`
	Revision  uint64         `json:"revision"`
	Type      string         `json:"type"`
	Kind      string         `json:"kind,omitempty"`
	Namespace string         `json:"namespace,omitempty"`
	Name      string         `json:"name,omitempty"`
	RV        string         `json:"resourceVersion,omitempty"`
	Count     uint64         `json:"count,omitempty"`
	Inventory map[string]any `json:"inventory,omitempty"`
}

func (p *printer) print(ev *watchv1.WatchResponse, m *watchstream.Mirror) error {
	je := jsonEvent{Epoch: ev.GetEpoch(), Revision: ev.GetRevision()}
	var obj *watchv1.Object
	switch e := ev.GetEvent().(type) {
	case *watchv1.WatchResponse_SnapshotStart:
		je.Type, je.Count = "snapshot-start", e.SnapshotStart.GetCount()
	case *watchv1.WatchResponse_SnapshotEnd:
		je.Type, je.Count = "snapshot-end", uint64(m.Len())
	case *watchv1.WatchResponse_ResumeStart:
		je.Type = "resume-start"
	case *watchv1.WatchResponse_Upsert:
		je.Type, obj = "upsert", e.Upsert.GetObject()
	case *watchv1.WatchResponse_Delete:
		je.Type, obj = "delete", e.Delete.GetObject()
	case *watchv1.WatchResponse_Progress:
		je.Type = "progress"
	case *watchv1.WatchResponse_Heartbeat:
		je.Type = "heartbeat"
	case *watchv1.WatchResponse_InitialSyncComplete:
		je.Type = "initial-sync-complete"
		je.Inventory = map[string]any{}
		for _, ki := range e.InitialSyncComplete.GetInventory() {
			je.Inventory[watchstream.KindKey(ki.GetKind())] = map[string]any{"count": ki.GetCount(), "digest": fmt.Sprintf("%x", ki.GetDigest())}
		}
	}
	if obj != nil {
		je.Kind, je.Namespace, je.Name, je.RV = watchstream.KindKey(obj.GetKind()), obj.GetNamespace(), obj.GetName(), obj.GetResourceVersion()
	}
	if p.quiet && je.Type != "initial-sync-complete" {
		return nil
	}
	if p.format != formatTable {
		b, err := json.Marshal(je)
		if err != nil {
			return err
		}
		return writeStreamItem(p.w, p.format, b)
	}
	switch {
	case obj != nil:
		name := je.Name
		if je.Namespace != "" {
			name = je.Namespace + "/" + je.Name
		}
		fmt.Fprintf(p.w, "%d %s %s %s rv=%s\n", je.Revision, je.Type, je.Kind, name, je.RV)
	case je.Inventory != nil:
		fmt.Fprintf(p.w, "%d %s verified:", je.Revision, je.Type)
		for _, ki := range ev.GetInitialSyncComplete().GetInventory() {
			fmt.Fprintf(p.w, " %s=%d", watchstream.KindKey(ki.GetKind()), ki.GetCount())
		}
		fmt.Fprintln(p.w)
	case je.Count > 0 || je.Type == "snapshot-start" || je.Type == "snapshot-end":
		fmt.Fprintf(p.w, "%d %s epoch=%s objects=%d\n", je.Revision, je.Type, je.Epoch, je.Count)
	default:
		fmt.Fprintf(p.w, "%d %s\n", je.Revision, je.Type)
	}
	return nil
}
