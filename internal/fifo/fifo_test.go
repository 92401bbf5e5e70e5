package fifo

import (
	"sync"
	"testing"
)

// Every pushed item reaches the owner once, in each producer's order, and a signal is
// pending whenever items are.
func TestQueueDeliversEverythingInOrder(t *testing.T) {
	q := New[[2]int]()
	const producers, each = 4, 1000
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				q.Push([2]int{p, i})
			}
		}()
	}
	next := make([]int, producers)
	for got := 0; got < producers*each; {
		<-q.Notify()
		for _, it := range q.PopAll() {
			if it[1] != next[it[0]] {
				t.Fatalf("producer %d: got item %d, want %d", it[0], it[1], next[it[0]])
			}
			next[it[0]]++
			got++
		}
	}
	wg.Wait()
	if rest := q.PopAll(); len(rest) != 0 {
		t.Fatalf("%d items left", len(rest))
	}
}

// PushWithin refuses an item only while the queue holds limit items, and a negative limit
// bounds nothing; what the owner takes makes room again.
func TestPushWithinRefusesOnlyAtTheLimit(t *testing.T) {
	q := New[int]()
	for i := range 3 {
		if !q.PushWithin(i, 3) {
			t.Fatalf("item %d refused below the limit of 3", i)
		}
	}
	if q.PushWithin(3, 3) {
		t.Fatal("a fourth item accepted at the limit of 3")
	}
	if !q.PushWithin(3, -1) {
		t.Fatal("an item refused without a limit")
	}
	if got := q.PopAll(); len(got) != 4 {
		t.Fatalf("took %v, want the 4 accepted items", got)
	}
	if !q.PushWithin(4, 3) {
		t.Fatal("an item refused after the owner took everything")
	}
}
