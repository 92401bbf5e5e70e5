package controller

import "sort"

// stages is the policy that, before the barrier, holds back the changes of a kind until every
// kind of an earlier stage (kinds.Kind.Stage: what route objects refer to) has synced into the
// store, so that the stream carries a route after its referents and a receiver that translates
// as the stream arrives translates it once (docs/design.md, "Cold start"). The informers list
// concurrently, so holding costs the initial sync nothing: every kind must sync before the
// barrier anyway. Within a kind the order is kept, its sync token after its objects. Once every
// kind has synced nothing is held. It is pure: the owner goroutine feeds it items and applies
// what it hands back, in that order.
type stages struct {
	stage   []int    // per kind
	pending []int    // per kind: informers whose sync token has not been handed back
	arrived []int    // per kind: sync tokens taken, handed back or held
	held    [][]item // per kind, in arrival order
	order   []int    // kinds by stage, then index: the order held kinds are released in
	out     []item   // what take hands back, reused
}

func newStages(stage []int, informers []int) *stages {
	s := &stages{stage: stage, pending: append([]int(nil), informers...), arrived: make([]int, len(stage)), held: make([][]item, len(stage))}
	for k := range stage {
		s.order = append(s.order, k)
	}
	sort.SliceStable(s.order, func(i, j int) bool { return stage[s.order[i]] < stage[s.order[j]] })
	return s
}

// open is the last stage whose changes flow: the earliest stage of a kind not yet synced
// (every stage once all have).
func (s *stages) open() int {
	g := int(^uint(0) >> 1)
	for k, n := range s.pending {
		if n > 0 && s.stage[k] < g {
			g = s.stage[k]
		}
	}
	return g
}

// take is one change of kind it.kind (or its sync token); it returns what the owner applies
// now, in order: nothing when it is held, else it and whatever its passing released. The
// slice is valid until the next take.
func (s *stages) take(it item) []item {
	if it.synced {
		s.arrived[it.kind]++
	}
	if s.stage[it.kind] > s.open() {
		s.held[it.kind] = append(s.held[it.kind], it)
		return nil
	}
	out := append(s.out[:0], it)
	s.passed(it)
	// A token handed back may open the next stage, whose release may open the one after.
	for released := true; released; {
		released = false
		g := s.open()
		for _, k := range s.order {
			if len(s.held[k]) == 0 || s.stage[k] > g {
				continue
			}
			items := s.held[k]
			s.held[k] = nil
			for _, x := range items {
				out = append(out, x)
				s.passed(x)
			}
			released = true
			break // the gate may have moved: start again from the earliest stage
		}
	}
	s.out = out
	if cap(out) > 1024 {
		s.out = nil // a kind's whole list released at once is not kept for the epoch's life
	}
	return out
}

func (s *stages) passed(it item) {
	if it.synced {
		s.pending[it.kind]--
	}
}

// listed reports whether every informer of kind k has listed it, the kind's changes held or
// not: a kind held behind another is not the one to blame for a sync that times out.
func (s *stages) listed(k, informers int) bool { return s.arrived[k] >= informers }
