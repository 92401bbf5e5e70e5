package store

import (
	"hash/maphash"

	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// viewShards is the number of shards of the store's objects. A subscription takes them all
// at once (a copy of the shard pointers); the owner's next change to a shard copies that
// shard only, so what a subscription costs the owner is the change's shard, never the whole
// store.
const viewShards = 256

var viewSeed = maphash.MakeSeed()

// objectShards is the store's objects at one revision; a subscription's are never changed.
type objectShards [viewShards]map[watchv1Key]*watchv1.Object

// objectSet is the store's objects, sharded copy-on-write.
type objectSet struct {
	shards objectShards
	shared [viewShards]bool // handed to a subscription: copied before its next change
	n      int
}

func shardOfKey(k watchv1Key) int { return int(maphash.Comparable(viewSeed, k) % viewShards) }

func (o *objectSet) get(k watchv1Key) (*watchv1.Object, bool) {
	v, ok := o.shards[shardOfKey(k)][k]
	return v, ok
}

// writable returns k's shard, copied first when a subscription holds it.
func (o *objectSet) writable(k watchv1Key) map[watchv1Key]*watchv1.Object {
	i := shardOfKey(k)
	if sh := o.shards[i]; sh == nil || o.shared[i] {
		c := make(map[watchv1Key]*watchv1.Object, len(sh)+1)
		for k, v := range sh {
			c[k] = v
		}
		o.shards[i], o.shared[i] = c, false
	}
	return o.shards[i]
}

func (o *objectSet) put(k watchv1Key, v *watchv1.Object) {
	sh := o.writable(k)
	if _, had := sh[k]; !had {
		o.n++
	}
	sh[k] = v
}

func (o *objectSet) del(k watchv1Key) {
	sh := o.writable(k)
	if _, had := sh[k]; had {
		o.n--
		delete(sh, k)
	}
}

func (o *objectSet) len() int { return o.n }

// view returns the objects as they are now, for a subscriber to read from its own
// goroutine; the set copies a shard before it changes it again.
func (o *objectSet) view() *objectShards {
	v := o.shards
	for i := range o.shared {
		o.shared[i] = true
	}
	return &v
}

// each calls f for every object of v.
func (v *objectShards) each(f func(k watchv1Key, o *watchv1.Object)) {
	for _, sh := range v {
		for k, o := range sh {
			f(k, o)
		}
	}
}
