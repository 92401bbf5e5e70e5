package controller

import (
	"fmt"
	"strings"
	"testing"

	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/kinds"
)

// docs/design.md, "Cold start": before the barrier a kind's changes are held until every kind
// of an earlier stage has synced, then released in stage order, each kind's in arrival order
// with its sync token last; a kind of the open stage, or any kind once all have synced, flows
// at once. Items are written kind letter, object or "!" for a sync token.
func TestStagesHoldRoutesUntilTheirReferentsSynced(t *testing.T) {
	// Kinds: a (stage 0, one informer), b (stage 1, two informers), c (stage 1), d (stage 4).
	stage, informers := []int{0, 1, 1, 4}, []int{1, 2, 1, 1}
	for _, tc := range []struct {
		name string
		in   string // items taken, space-separated
		out  string // items applied, in order; "|" ends each take's batch
	}{
		{"each stage flows once the earlier ones synced", "a1 a! b1 b! b! c1 c! d1 d!", "a1|a!|b1|b!|b!|c1|c!|d1|d!"},
		{"routes first: held until every referent synced", "d1 d2 d! c1 a1 a! c! b1 b! b!",
			"||||a1|a! c1|c!|b1|b!|b! d1 d2 d!"},
		{"a later stage waits for every informer of an earlier kind", "c1 c! b! d1 b1 a! b!",
			"|||||a! b! b1 c1 c!|b! d1"},
		{"after every kind synced nothing is held", "a! b! b! c! d! d1 b2 a2", "a!|b!|b!|c!|d!|d1|b2|a2"},
		{"a kind's changes keep their order while held", "d1 d2 d1 a! b! b! c!", "|||a!|b!|b!|c! d1 d2 d1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStages(stage, informers)
			var batches []string
			for _, w := range strings.Fields(tc.in) {
				it := item{kind: int(w[0] - 'a'), synced: w[1] == '!'}
				if !it.synced {
					it.obj = &kinds.Stored{Wire: &watchv1.Object{Name: w[1:]}}
				}
				var got []string
				for _, x := range s.take(it) {
					got = append(got, name(x))
				}
				batches = append(batches, strings.Join(got, " "))
			}
			if got := strings.Join(batches, "|"); got != tc.out {
				t.Fatalf("applied %q, want %q", got, tc.out)
			}
		})
	}
}

// name writes an item of the table: its kind's letter and its object's number, or "!".
func name(it item) string {
	if it.synced {
		return fmt.Sprintf("%c!", 'a'+it.kind)
	}
	return fmt.Sprintf("%c%s", 'a'+it.kind, it.obj.Wire.GetName())
}
