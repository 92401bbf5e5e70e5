package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// Errors of the Watch stream's checks. Each means the stream, and what was held from it,
// cannot be trusted: a Watch that returned one starts over from a fresh snapshot at its next
// Open. They are the errors Sluice's translator acts on alike.
var (
	// ErrProtocol is a malformed or out-of-place message.
	ErrProtocol = watchstream.ErrProtocol
	// ErrGap is a revision that is not the next one: an event was lost or reordered.
	ErrGap = watchstream.ErrGap
	// ErrEpoch is an epoch change within a stream: the watcher restarted.
	ErrEpoch = watchstream.ErrEpoch
	// ErrInventory is a marker whose inventory does not match the objects received.
	ErrInventory = watchstream.ErrInventory
)

// ErrStreamEnded is returned by Next when the server ended the stream. For a Watch, what was
// held stays trusted when the stream ended between events (the next Open resumes after it)
// and is dropped when it ended within a snapshot (the next Open asks for a fresh one).
var ErrStreamEnded = errors.New("the server ended the stream")

// ErrNotOpen is returned by Next before Open, after an error (Open starts a new stream), and
// after Close.
var ErrNotOpen = errors.New("the stream is not open")

// Event is what one message of the Watch stream did to the view held.
type Event int

// Events.
const (
	// EventNone: a heartbeat, progress, the start of a resume, or an object of a snapshot
	// that is still arriving.
	EventNone Event = iota
	// EventReset: a snapshot started; every object held was dropped.
	EventReset
	// EventObject: an object was added, changed or deleted.
	EventObject
	// EventSnapshot: a snapshot ended; the objects held are those of the snapshot.
	EventSnapshot
	// EventSynced: the marker arrived and its inventory matched the objects held: the view
	// is the watcher's complete view of the cluster, at this revision.
	EventSynced
)

var eventOf = map[watchstream.Change]Event{
	watchstream.ChangeNone: EventNone, watchstream.ChangeReset: EventReset, watchstream.ChangeObject: EventObject,
	watchstream.ChangeSnapshot: EventSnapshot, watchstream.ChangeSynced: EventSynced,
}

// WatchOptions says what to follow and how.
type WatchOptions struct {
	// ClientName names the client in the watcher's logs and metrics.
	ClientName string
	// Kinds restricts the stream to these kinds; empty means every kind the watcher serves.
	Kinds []*watchv1.GroupVersionKind
	// ConnectTimeout is how long Open keeps trying while the watcher is not serving yet
	// (UNAVAILABLE: not listening, or still resolving its kinds). Zero tries once.
	ConnectTimeout time.Duration
	// KeepObjects holds each object itself (Objects, Object), not only its identity and
	// resourceVersion, which is all the checks need.
	KeepObjects bool
}

// Watch follows a watcher's Watch stream, one stream at a time, checking every message as
// Sluice's translator does: framing, one epoch per stream, gap-free revisions, and the
// marker's inventory against the objects held. It is not safe for concurrent use.
type Watch struct {
	client watchv1.WatchServiceClient
	opts   WatchOptions
	m      *watchstream.Mirror
	stream grpc.ServerStreamingClient[watchv1.WatchResponse]
	cancel context.CancelFunc // ends the open stream; nil when none is open
	// first is the message Open read to know the stream was served.
	first *watchv1.WatchResponse
	// marker is the marker verified for the objects held, nil while they are not known
	// complete: before a marker, and from the start of a snapshot (also one of the same
	// epoch, sent when a resume was too far behind) until its marker.
	marker *watchv1.InitialSyncComplete
	// inSnapshot: a snapshot started and has not ended; a stream that breaks there leaves a
	// partial view, which is not resumed.
	inSnapshot bool
}

// NewWatch returns a Watch over a connection to a watcher (see Dial).
func NewWatch(cc grpc.ClientConnInterface, opts WatchOptions) *Watch {
	return &Watch{client: watchv1.NewWatchServiceClient(cc), opts: opts, m: watchstream.NewMirror()}
}

// Open starts a stream, ending the one open, if any: a fresh snapshot the first time and
// after a failed check, or only the changes after what is held when the previous stream
// merely ended (the watcher sends a fresh snapshot instead when it no longer holds them).
// The stream lasts until ctx ends, Close, or an error of Next.
func (w *Watch) Open(ctx context.Context) error {
	w.end()
	req := &watchv1.WatchRequest{ClientName: w.opts.ClientName, Kinds: w.opts.Kinds}
	if w.m.Epoch() != "" {
		req.ResumeEpoch, req.ResumeRevision = w.m.Epoch(), w.m.Revision()
	}
	deadline := time.Now().Add(w.opts.ConnectTimeout)
	for {
		sctx, cancel := context.WithCancel(ctx)
		stream, err := w.client.Watch(sctx, req)
		if err == nil {
			var first *watchv1.WatchResponse
			if first, err = stream.Recv(); err == nil {
				w.stream, w.cancel, w.first = stream, cancel, first
				w.m.StartStream()
				return nil
			}
		}
		cancel()
		if status.Code(err) != codes.Unavailable || !time.Now().Before(deadline) {
			return fmt.Errorf("open the watch stream: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("open the watch stream: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Close ends the stream open, if any. What is held stays, for a later Open to resume.
func (w *Watch) Close() { w.end() }

func (w *Watch) end() {
	if w.cancel != nil {
		w.cancel()
	}
	w.stream, w.cancel, w.first = nil, nil, nil
}

// drop forgets the view held: the next Open asks for a fresh snapshot.
func (w *Watch) drop() {
	w.m, w.marker, w.inSnapshot = watchstream.NewMirror(), nil, false
}

// Next receives the next message of the stream, checks it and applies it to the view held.
// It returns ErrStreamEnded when the watcher ended the stream, an error wrapping one of
// ErrProtocol, ErrGap, ErrEpoch or ErrInventory when a check failed (the view is then
// dropped), ErrNotOpen without an open stream, and the stream's own error otherwise (a
// cancelled ctx among them). After any error the stream is ended, and Open starts a new one.
func (w *Watch) Next() (*watchv1.WatchResponse, Event, error) {
	if w.stream == nil {
		return nil, EventNone, ErrNotOpen
	}
	msg := w.first
	w.first = nil
	if msg == nil {
		var err error
		if msg, err = w.stream.Recv(); err != nil {
			w.end()
			if w.inSnapshot {
				w.drop() // a partial snapshot is no base for a resume
			}
			if errors.Is(err, io.EOF) {
				return nil, EventNone, ErrStreamEnded
			}
			return nil, EventNone, err
		}
	}
	epoch := w.m.Epoch()
	var change watchstream.Change
	var err error
	if w.opts.KeepObjects {
		change, err = w.m.ApplyKeeping(msg)
	} else {
		change, err = w.m.Apply(msg)
	}
	if err != nil {
		w.end()
		w.drop()
		return msg, EventNone, fmt.Errorf("revision %d: %w", msg.GetRevision(), err)
	}
	if w.m.Epoch() != epoch {
		w.marker = nil
	}
	switch change {
	case watchstream.ChangeReset:
		w.marker, w.inSnapshot = nil, true
	case watchstream.ChangeSnapshot:
		w.inSnapshot = false
	case watchstream.ChangeSynced:
		w.marker = msg.GetInitialSyncComplete()
	}
	return msg, eventOf[change], nil
}

// Epoch and Revision are the position of the view held in the watcher's history.
func (w *Watch) Epoch() string    { return w.m.Epoch() }
func (w *Watch) Revision() uint64 { return w.m.Revision() }

// Synced reports whether the view held is complete: a marker was verified for it.
func (w *Watch) Synced() bool { return w.marker != nil }

// Len is the number of objects held.
func (w *Watch) Len() int { return w.m.Len() }

// Inventory is the verified marker's inventory, one entry per kind (its count and the digest
// of its objects' identities and resourceVersions); nil while the view is not complete.
func (w *Watch) Inventory() []*watchv1.KindInventory { return w.marker.GetInventory() }

// Marker is the marker verified for the view held, nil while it is not complete.
func (w *Watch) Marker() *watchv1.InitialSyncComplete { return w.marker }

// Kinds are the kinds the current stream carries.
func (w *Watch) Kinds() []*watchv1.GroupVersionKind { return w.m.Kinds() }

// ResourceVersion returns the resourceVersion held for an object, and whether one is held.
// The core group's kinds have an empty group.
func (w *Watch) ResourceVersion(kind *watchv1.GroupVersionKind, namespace, name string) (string, bool) {
	return w.m.ResourceVersion(watchstream.ObjectKey{Kind: KindKey(kind), Namespace: namespace, Name: name})
}

// Object returns the object held, nil without one or without WatchOptions.KeepObjects.
func (w *Watch) Object(kind *watchv1.GroupVersionKind, namespace, name string) *watchv1.Object {
	return w.m.Object(watchstream.ObjectKey{Kind: KindKey(kind), Namespace: namespace, Name: name})
}

// Objects returns the objects held, sorted by kind, namespace and name (with
// WatchOptions.KeepObjects; nil otherwise).
func (w *Watch) Objects() []*watchv1.Object { return w.m.Objects() }

// KindKey is the canonical name of a kind, "group/version/Kind" ("/v1/Service" for the core
// group): the name the inventory and Sluice's logs use.
func KindKey(k *watchv1.GroupVersionKind) string { return watchstream.KindKey(k) }
