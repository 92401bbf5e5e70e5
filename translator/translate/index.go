package translate

import "iter"

// index maps each key to the set of values that depend on it (a Service to the Ingresses
// naming it, a host to its claimants). Almost every key has one value and a few have
// thousands (an IngressClass), so a key with one value is an entry of a flat map and only a
// key that ever had two gets a set of its own: a small map per key would cost about 300
// bytes at every Ingress, several times over (docs/design.md, "Cold start").
type index[K, V comparable] struct {
	one  map[K]V
	many map[K]set[V]
}

func newIndex[K, V comparable]() index[K, V] {
	return index[K, V]{one: map[K]V{}, many: map[K]set[V]{}}
}

// add records that v depends on k.
func (x index[K, V]) add(k K, v V) {
	if s, ok := x.many[k]; ok {
		s.add(v)
		return
	}
	old, ok := x.one[k]
	switch {
	case !ok:
		x.one[k] = v
	case old != v:
		delete(x.one, k)
		x.many[k] = set[V]{old: {}, v: {}}
	}
}

// remove forgets that v depends on k. A set that shrinks to one value stays a set: a
// caller may be ranging over it, and moving it would change what that range sees.
func (x index[K, V]) remove(k K, v V) {
	if s, ok := x.many[k]; ok {
		delete(s, v)
		if len(s) == 0 {
			delete(x.many, k)
		}
		return
	}
	if old, ok := x.one[k]; ok && old == v {
		delete(x.one, k)
	}
}

// all yields the values that depend on k. The caller may change the index meanwhile, with
// a map range's guarantees.
func (x index[K, V]) all(k K) iter.Seq[V] {
	return func(yield func(V) bool) {
		if s, ok := x.many[k]; ok {
			for v := range s {
				if !yield(v) {
					return
				}
			}
			return
		}
		if v, ok := x.one[k]; ok {
			yield(v)
		}
	}
}

// has reports whether anything depends on k.
func (x index[K, V]) has(k K) bool {
	if _, ok := x.one[k]; ok {
		return true
	}
	_, ok := x.many[k]
	return ok
}

// count is the number of values that depend on k.
func (x index[K, V]) count(k K) int {
	if _, ok := x.one[k]; ok {
		return 1
	}
	return len(x.many[k])
}

// keys yields every key something depends on.
func (x index[K, V]) keys() iter.Seq[K] {
	return func(yield func(K) bool) {
		for k := range x.one {
			if !yield(k) {
				return
			}
		}
		for k := range x.many {
			if !yield(k) {
				return
			}
		}
	}
}
