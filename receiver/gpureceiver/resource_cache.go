package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import "go.opentelemetry.io/collector/pdata/pcommon"

// resourceCache keeps the resources a GPU's MIG instances and processes were emitted with
// on the last scrape. They change only when an instance or a process comes or goes, and
// building one (the GPU's ~20 identity attributes and the subject's own) cost about a
// tenth of a scrape's allocations; emitting copies it, so a kept resource is never shared
// with what goes down the pipeline. It lives in its gpuDevice: a re-discovered GPU starts
// afresh.
type resourceCache struct {
	kept map[resourceSubject]pcommon.Resource
	seen map[resourceSubject]bool // this scrape's
}

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

// get returns the subject's resource, building it the first time it is seen.
func (c *resourceCache) get(s resourceSubject, build func() pcommon.Resource) pcommon.Resource {
	if c.kept == nil {
		c.kept, c.seen = map[resourceSubject]pcommon.Resource{}, map[resourceSubject]bool{}
	}
	c.seen[s] = true
	if res, ok := c.kept[s]; ok {
		return res
	}
	res := build()
	c.kept[s] = res
	return res
}

// forgetUnseen drops the resources of subjects not seen since the last call: their
// processes exited, their instances were destroyed or listed anew.
func (c *resourceCache) forgetUnseen() {
	for s := range c.kept {
		if !c.seen[s] {
			delete(c.kept, s)
		}
	}
	clear(c.seen)
}
