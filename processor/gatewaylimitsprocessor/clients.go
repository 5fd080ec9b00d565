package gatewaylimitsprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gatewaylimitsprocessor"

import (
	"container/list"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// bucket is a token bucket: it holds up to capacity tokens and gains rate per second.
type bucket struct {
	tokens float64
	last   time.Time
}

func (b *bucket) refill(now time.Time, rate, capacity float64) {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = math.Min(capacity, b.tokens+d.Seconds()*rate)
		b.last = now
	}
}

// seriesEntry is 8 bytes: a map entry with its 8-byte key takes 16.
type seriesEntry struct {
	// seen: when the series was last seen, in seconds since the processor started.
	seen uint32
	// weight: the Prometheus series it makes: 1, or a classic histogram's buckets + 2
	// (_bucket per bucket, _sum, _count), a summary's quantiles + 2.
	weight uint32
}

// clientState is what is kept per client. Its fields are guarded by mu, except lastSeen
// and elem, which the table's lock guards.
type clientState struct {
	name string

	mu        sync.Mutex
	points    bucket
	newSeries bucket
	// series: each live series' hash → when it was last seen and what it counts for.
	series    map[uint64]seriesEntry
	weight    int       // the sum of the series' weights: the client's Prometheus series
	peak      int       // the map's largest size since it was last rebuilt
	swept     time.Time // the last sweep of idle series
	refusedBy [numReasons]metric.AddOption
	gone      bool // forgotten by the table: a request that still holds it looks again

	lastSeen time.Time
	elem     *list.Element
}

// clientTable keeps up to max clients, least recently seen first out.
type clientTable struct {
	max      int
	idle     time.Duration
	mu       sync.Mutex
	byName   map[string]*clientState
	lru      list.List // of *clientState, most recently seen at the front
	swept    time.Time
	tracked  atomic.Int64 // series tracked over all clients, for the gauge
	newState func(name string, now time.Time) *clientState
}

func newClientTable(max int, idle time.Duration, newState func(string, time.Time) *clientState) *clientTable {
	return &clientTable{max: max, idle: idle, byName: map[string]*clientState{}, newState: newState}
}

// get returns the client's state, creating it (and forgetting the least recently seen
// client when the table is full) if needed.
func (t *clientTable) get(name string, now time.Time) *clientState {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now.Sub(t.swept) >= time.Minute {
		t.swept = now
		// Clients silent for longer than series_idle_timeout have nothing left to keep.
		for e := t.lru.Back(); e != nil; e = t.lru.Back() {
			c := e.Value.(*clientState)
			if now.Sub(c.lastSeen) <= t.idle {
				break
			}
			t.remove(c)
		}
	}
	if c, ok := t.byName[name]; ok {
		c.lastSeen = now
		t.lru.MoveToFront(c.elem)
		return c
	}
	if len(t.byName) >= t.max {
		t.remove(t.lru.Back().Value.(*clientState))
	}
	c := t.newState(name, now)
	c.lastSeen = now
	c.elem = t.lru.PushFront(c)
	t.byName[name] = c
	return c
}

func (t *clientTable) remove(c *clientState) {
	t.lru.Remove(c.elem)
	delete(t.byName, c.name)
	c.mu.Lock()
	t.tracked.Add(-int64(c.weight))
	c.series, c.gone = nil, true
	c.mu.Unlock()
}

func (t *clientTable) clients() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return int64(len(t.byName))
}
