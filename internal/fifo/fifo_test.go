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
