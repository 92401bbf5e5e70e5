package app

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sluice-io/sluice/watcher/status"
)

// fakeSource is an epoch's controller as the status actor sees it: a barrier the test opens.
type fakeSource struct {
	status.Source // never called: the fake writer does not subscribe
	name          string
	synced        chan struct{}
	asked         chan struct{} // one value once the actor asked for the barrier
}

func newFakeSource(name string) *fakeSource {
	return &fakeSource{name: name, synced: make(chan struct{}), asked: make(chan struct{}, 1)}
}

func (f *fakeSource) Synced() <-chan struct{} {
	select {
	case f.asked <- struct{}{}:
	default:
	}
	return f.synced
}

func (f *fakeSource) Epoch() string { return f.name }

// write is one writeEpoch call, with whether the epoch's barrier had opened by then.
type write struct {
	epoch       string
	afterSynced bool
}

// fakeWriter records what the status actor asks it to write, and holds each write until the
// epoch ends, as the real one does.
type fakeWriter struct{ writes chan write }

func (w *fakeWriter) writeEpoch(ctx context.Context, e *epoch) error {
	synced := false
	select {
	case <-e.src.(*fakeSource).synced: // not Synced(): that would count as the actor asking
		synced = true
	default:
	}
	w.writes <- write{epoch: e.src.Epoch(), afterSynced: synced}
	<-ctx.Done()
	return nil
}

// beginEpoch makes an epoch of src current, as the epoch loop does.
func beginEpoch(t *testing.T, hub *epochs, src *fakeSource) (e *epoch, retire func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e = &epoch{src: src, ctx: ctx}
	hub.begin(e)
	// As the loop retires an epoch: no new holder, its context ends, every holder let go.
	return e, func() { hub.end(e); cancel(); e.holders.Wait() }
}

func waitAsked(t *testing.T, src *fakeSource, writes <-chan write) {
	t.Helper()
	select {
	case <-src.asked:
	case w := <-writes:
		t.Fatalf("status written for epoch %s (barrier open: %v) before the actor waited for the barrier", w.epoch, w.afterSynced)
	case <-time.After(10 * time.Second):
		t.Fatalf("the status actor never took epoch %s", src.name)
	}
}

// "Complete view first" (docs/design.md) for status write-back: a replica writes statuses (and
// campaigns for the Lease) only from an epoch whose barrier opened. An epoch that ends before
// its barrier opens gets no write at all; the next epoch's writes begin once its own barrier
// opened, never from the old epoch's.
func TestStatusWritesWaitForTheEpochsBarrier(t *testing.T) {
	hub := newEpochs()
	w := &fakeWriter{writes: make(chan write, 8)}
	actor := &statusActor{Logger: hclog.NewNullLogger(), Epochs: hub, Writer: w}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- actor.Run(ctx) }()

	// Epoch 1 never syncs, then is retired: retiring waits for the actor to let go of it, so a
	// write for it would have been recorded by then.
	src1 := newFakeSource("one")
	_, retire1 := beginEpoch(t, hub, src1)
	waitAsked(t, src1, w.writes)
	retire1()
	select {
	case got := <-w.writes:
		t.Fatalf("status written for epoch %s, whose barrier never opened (open: %v)", got.epoch, got.afterSynced)
	default:
	}

	// Epoch 2: the actor waits at the barrier; it writes once the barrier opened.
	src2 := newFakeSource("two")
	_, retire2 := beginEpoch(t, hub, src2)
	waitAsked(t, src2, w.writes)
	select {
	case got := <-w.writes:
		t.Fatalf("status written for epoch %s before its barrier opened (open: %v)", got.epoch, got.afterSynced)
	default:
	}
	close(src2.synced)
	select {
	case got := <-w.writes:
		if got != (write{epoch: "two", afterSynced: true}) {
			t.Fatalf("wrote %+v, want epoch two after its barrier", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no status written after epoch two's barrier opened")
	}
	retire2() // returns only once the write for epoch two ended with the epoch

	// Epoch 3 began already synced: written at once.
	src3 := newFakeSource("three")
	close(src3.synced)
	_, retire3 := beginEpoch(t, hub, src3)
	select {
	case got := <-w.writes:
		if got != (write{epoch: "three", afterSynced: true}) {
			t.Fatalf("wrote %+v, want epoch three after its barrier", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no status written for epoch three, synced from its start")
	}

	cancel()
	retire3()
	if err := <-done; err != nil {
		t.Fatalf("status actor ended with %v, want nil once ctx ended", err)
	}
}
