package caddymod

import "hash/maphash"

// shards is the number of shards of a cow map: a change copies the shards it touches, so
// its cost is that of the change (and of N/shards entries per shard), not of the whole map.
const shards = 256

var seed = maphash.MakeSeed()

// cow is an immutable map from string keys, sharded so that a changed copy shares every
// shard it did not change.
type cow[V any] struct {
	s *[shards]map[string]V
}

func shardOf(k string) int { return int(maphash.String(seed, k) % shards) }

func (m cow[V]) get(k string) (V, bool) {
	var zero V
	if m.s == nil {
		return zero, false
	}
	v, ok := m.s[shardOf(k)][k]
	return v, ok
}

func (m cow[V]) len() int {
	n := 0
	if m.s != nil {
		for _, sh := range m.s {
			n += len(sh)
		}
	}
	return n
}

// edit starts a changed copy of m; m itself never changes.
func (m cow[V]) edit() *cowEdit[V] {
	e := &cowEdit[V]{s: new([shards]map[string]V), copied: new([shards]bool)}
	if m.s != nil {
		*e.s = *m.s
	}
	return e
}

type cowEdit[V any] struct {
	s      *[shards]map[string]V
	copied *[shards]bool
}

func (e *cowEdit[V]) shard(k string) map[string]V {
	i := shardOf(k)
	if !e.copied[i] {
		sh := make(map[string]V, len(e.s[i])+1)
		for k, v := range e.s[i] {
			sh[k] = v
		}
		e.s[i], e.copied[i] = sh, true
	}
	return e.s[i]
}

func (e *cowEdit[V]) set(k string, v V) { e.shard(k)[k] = v }
func (e *cowEdit[V]) del(k string)      { delete(e.shard(k), k) }

// done returns the changed map; e must not be used after.
func (e *cowEdit[V]) done() cow[V] { return cow[V]{s: e.s} }
