package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import "go.opentelemetry.io/collector/pdata/pcommon"

// seenCache keeps what was worked out for a key (a process's name, a process's or MIG
// instance's resource) for as long as the key is asked for: forgetUnseen, once per scrape,
// drops what that scrape did not ask for, so it follows processes and instances as they
// come and go and holds only the current ones.
type seenCache[K comparable, V any] struct {
	kept map[K]*seenValue[V]
	// round counts the forgetUnseen calls: a value asked for since the last one carries
	// the current round, so marking it is one lookup, not an insertion into a set.
	round uint64
}

type seenValue[V any] struct {
	v     V
	round uint64 // the last round it was asked for in
}

// get returns the key's value, working it out the first time the key is seen.
func (c *seenCache[K, V]) get(key K, build func() V) V {
	if c.kept == nil {
		c.kept = map[K]*seenValue[V]{}
	}
	kv := c.kept[key]
	if kv == nil {
		kv = &seenValue[V]{v: build()}
		c.kept[key] = kv
	}
	kv.round = c.round
	return kv.v
}

// forgetUnseen drops the values of keys not asked for since the last call.
func (c *seenCache[K, V]) forgetUnseen() {
	for key, kv := range c.kept {
		if kv.round != c.round {
			delete(c.kept, key)
		}
	}
	c.round++
}

// resourceCache keeps the resources a GPU's MIG instances and processes were emitted with:
// they change only when an instance or a process comes or goes, and building one (the
// GPU's identity attributes and the subject's own) cost about a tenth of a scrape's
// allocations. Emitting copies it, so a kept resource is never shared with what goes down
// the pipeline. It lives in its gpuDevice: a re-discovered GPU starts afresh.
type resourceCache = seenCache[resourceSubject, pcommon.Resource]

// resourceSubject is everything a kept resource was built from, besides its GPU: a MIG
// instance (as last listed: a new listing is a new instance) and, for a process, what
// NVML said of it.
type resourceSubject struct {
	mig      *migInstance
	process  bool
	pid      uint32
	name     string
	graphics bool
}
