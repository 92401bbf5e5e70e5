package server

import (
	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/store"
)

// framer turns one subscription into the stream's messages. It is pure: the gRPC handler
// feeds it and sends what it emits, and the property tests feed it directly.
type framer struct {
	sub    *store.Subscription
	last   uint64 // revision of the last message emitted
	marker bool   // InitialSyncComplete emitted
}

// start emits the stream's beginning: the snapshot or the resumed changes, then the marker
// when the barrier had opened at the start.
func (f *framer) start(emit func(*watchv1.WatchResponse) error) error {
	sub := f.sub
	f.last = sub.Revision
	msg := func(rev uint64) *watchv1.WatchResponse {
		return &watchv1.WatchResponse{Epoch: sub.Epoch, Revision: rev}
	}
	if sub.Resumed {
		from := sub.Revision - uint64(len(sub.Replay))
		m := msg(from)
		m.Event = &watchv1.WatchResponse_ResumeStart{ResumeStart: &watchv1.ResumeStart{FromRevision: from}}
		if err := emit(m); err != nil {
			return err
		}
		f.last = from
		for _, ev := range sub.Replay {
			if err := f.event(ev, emit); err != nil {
				return err
			}
		}
	} else {
		snapshot := sub.Snapshot()
		m := msg(sub.Revision)
		m.Event = &watchv1.WatchResponse_SnapshotStart{SnapshotStart: &watchv1.SnapshotStart{Count: uint64(len(snapshot)), Kinds: sub.Kinds}}
		if err := emit(m); err != nil {
			return err
		}
		for _, o := range snapshot {
			m := msg(sub.Revision)
			m.Event = &watchv1.WatchResponse_Upsert{Upsert: &watchv1.Upsert{Object: o}}
			if err := emit(m); err != nil {
				return err
			}
		}
		m = msg(sub.Revision)
		m.Event = &watchv1.WatchResponse_SnapshotEnd{SnapshotEnd: &watchv1.SnapshotEnd{}}
		if err := emit(m); err != nil {
			return err
		}
	}
	if sub.SyncedAtStart && !f.marker {
		m := msg(f.last)
		m.Event = &watchv1.WatchResponse_InitialSyncComplete{InitialSyncComplete: &watchv1.InitialSyncComplete{Inventory: sub.StartInventory()}}
		f.marker = true
		return emit(m)
	}
	return nil
}

// event emits one change of the store.
func (f *framer) event(ev store.Event, emit func(*watchv1.WatchResponse) error) error {
	m := &watchv1.WatchResponse{Epoch: f.sub.Epoch, Revision: ev.Revision}
	switch ev.Type {
	case store.EventSynced:
		if f.marker {
			// Cannot happen: a subscription that started synced never sees EventSynced.
			m.Event = &watchv1.WatchResponse_Progress{Progress: &watchv1.Progress{}}
			break
		}
		f.marker = true
		m.Event = &watchv1.WatchResponse_InitialSyncComplete{InitialSyncComplete: &watchv1.InitialSyncComplete{Inventory: filterInventory(ev.Inventory, f.sub)}}
	case store.EventUpsert, store.EventDelete:
		switch {
		case !f.sub.Carries(watchstream.KindKey(ev.Object.GetKind())):
			m.Event = &watchv1.WatchResponse_Progress{Progress: &watchv1.Progress{}}
		case ev.Type == store.EventUpsert:
			m.Event = &watchv1.WatchResponse_Upsert{Upsert: &watchv1.Upsert{Object: ev.Object}}
		default:
			m.Event = &watchv1.WatchResponse_Delete{Delete: &watchv1.Delete{Object: ev.Object}}
		}
	}
	f.last = ev.Revision
	return emit(m)
}

// heartbeat returns a heartbeat at the last emitted revision.
func (f *framer) heartbeat(synced bool) *watchv1.WatchResponse {
	return &watchv1.WatchResponse{Epoch: f.sub.Epoch, Revision: f.last,
		Event: &watchv1.WatchResponse_Heartbeat{Heartbeat: &watchv1.Heartbeat{Synced: synced}}}
}

func filterInventory(inv []*watchv1.KindInventory, sub *store.Subscription) []*watchv1.KindInventory {
	if sub.Filter == nil {
		return inv
	}
	var out []*watchv1.KindInventory
	for _, ki := range inv {
		if sub.Filter[watchstream.KindKey(ki.GetKind())] {
			out = append(out, ki)
		}
	}
	return out
}
