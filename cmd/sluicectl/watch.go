package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-io/sluice/client"
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
			var kinds []*watchv1.GroupVersionKind
			for _, k := range kindList {
				parts := strings.Split(k, "/")
				switch len(parts) {
				case 2:
					kinds = append(kinds, &watchv1.GroupVersionKind{Version: parts[0], Kind: parts[1]})
				case 3:
					kinds = append(kinds, &watchv1.GroupVersionKind{Group: parts[0], Version: parts[1], Kind: parts[2]})
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
			w := client.NewWatch(conn, client.WatchOptions{ClientName: "sluicectl", Kinds: kinds, ConnectTimeout: connectTimeout})
			if err := w.Open(ctx); err != nil {
				return fmt.Errorf("%s: %w", cf.addr, err)
			}
			p := &printer{w: cmd.OutOrStdout(), format: out.format(), quiet: quiet}
			for {
				ev, event, err := w.Next()
				switch {
				case errors.Is(err, client.ErrStreamEnded):
					return errors.New("stream ended by the watcher")
				case err != nil && ev == nil && ctx.Err() != nil:
					return nil // interrupted: following until then is what was asked, as config --watch
				case err != nil && ev != nil:
					return fmt.Errorf("stream check failed at %w", err)
				case err != nil:
					return err
				}
				if err := p.print(ev, w); err != nil {
					return err
				}
				if event == client.EventSynced && untilSynced {
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

func (p *printer) print(ev *watchv1.WatchResponse, m *client.Watch) error {
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
			je.Inventory[client.KindKey(ki.GetKind())] = map[string]any{"count": ki.GetCount(), "digest": fmt.Sprintf("%x", ki.GetDigest())}
		}
	}
	if obj != nil {
		je.Kind, je.Namespace, je.Name, je.RV = client.KindKey(obj.GetKind()), obj.GetNamespace(), obj.GetName(), obj.GetResourceVersion()
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
			fmt.Fprintf(p.w, " %s=%d", client.KindKey(ki.GetKind()), ki.GetCount())
		}
		fmt.Fprintln(p.w)
	case je.Count > 0 || je.Type == "snapshot-start" || je.Type == "snapshot-end":
		fmt.Fprintf(p.w, "%d %s epoch=%s objects=%d\n", je.Revision, je.Type, je.Epoch, je.Count)
	default:
		fmt.Fprintf(p.w, "%d %s\n", je.Revision, je.Type)
	}
	return nil
}
