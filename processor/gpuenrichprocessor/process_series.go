package gpuenrichprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor"

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatautil"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuschema"
	"github.com/otelcol-gpu/otelcol-gpu/internal/pdatawalk"
)

// otherProcesses is the executable name of the series that sums a GPU's processes beyond
// processes.max_per_gpu.
const otherProcesses = "(other)"

// processGroup is the processes of one GPU that share one series: the same owner, the
// same executable and type (and PID, when PIDs are kept).
type processGroup struct {
	procs  []*processView
	memory float64
}

// foldProcessSeries bounds the per-process series, after attribution and the per-pod
// values have used every process: processes whose series would carry the same labels are
// summed into one (without process.pid, unless processes.keep_pid), executable names are
// sanitised and cut, a name beyond processes.max_executable_names_per_gpu on its GPU within
// the window becomes "(other)" (executable_names.go), and beyond processes.max_per_gpu
// series per GPU the smallest by memory are summed into one "(other)" series without
// owner. It returns how many were folded into "(other)" in this batch.
func (p *gpuEnrichProcessor) foldProcessSeries(md pmetric.Metrics, b *batch) int {
	cfg := p.cfg.Processes
	byGPU := map[string][]*processView{}
	var order []string
	for _, proc := range b.procs {
		if _, ok := byGPU[proc.on]; !ok {
			order = append(order, proc.on)
		}
		byGPU[proc.on] = append(byGPU[proc.on], proc)
	}
	folded := 0
	now := p.now()
	defer p.executableNames.forgetIdle(now)
	replace := map[pmetric.ResourceMetrics]bool{}
	out := pmetric.NewResourceMetricsSlice()
	for _, gpu := range order {
		procs := byGPU[gpu]
		for _, proc := range procs {
			attrs := proc.rm.Resource().Attributes()
			if v, ok := attrs.Get(gpuschema.ResourceProcessExecutableName); ok {
				name := v.AsString()
				clean := sanitizeExecutable(name, cfg.MaxExecutableNameLength)
				if !p.executableNames.admit(gpu, clean, now) {
					clean = otherProcesses
					folded++
				}
				if clean != name || v.Type() != pcommon.ValueTypeStr {
					attrs.PutStr(gpuschema.ResourceProcessExecutableName, clean)
				}
			}
			if !cfg.KeepPID {
				attrs.Remove(gpuschema.ResourceProcessPID)
			}
		}
		groups := groupProcesses(procs)
		if len(groups) == len(procs) && (cfg.MaxPerGPU == 0 || len(groups) <= cfg.MaxPerGPU) {
			// Nothing to sum (a GPU's only process, the usual case, or processes that
			// keep apart): the resources stay where they are.
			continue
		}
		for _, proc := range procs {
			replace[proc.rm] = true
		}
		if limit := cfg.MaxPerGPU; limit > 0 && len(groups) > limit {
			sort.SliceStable(groups, func(i, j int) bool { return groups[i].memory > groups[j].memory })
			other := &processGroup{}
			for _, g := range groups[limit-1:] {
				other.procs = append(other.procs, g.procs...)
			}
			folded += len(other.procs)
			groups = groups[:limit-1]
			merged := out.AppendEmpty()
			mergeGroup(other, merged)
			attrs := merged.Resource().Attributes()
			for _, k := range append(ownerKeys, gpuschema.ResourceProcessPID, gpuschema.ResourceNvidiaGpuProcessType) {
				attrs.Remove(k)
			}
			attrs.PutStr(gpuschema.ResourceProcessExecutableName, otherProcesses)
		}
		for _, g := range groups {
			mergeGroup(g, out.AppendEmpty())
		}
	}
	if len(replace) == 0 {
		return folded // names written "(other)" in place, nothing to sum
	}
	md.ResourceMetrics().RemoveIf(func(rm pmetric.ResourceMetrics) bool { return replace[rm] })
	out.MoveAndAppendTo(md.ResourceMetrics())
	return folded
}

// groupProcesses groups a GPU's processes by their (already final) resource attributes.
func groupProcesses(procs []*processView) []*processGroup {
	if len(procs) == 1 {
		return []*processGroup{{procs: procs, memory: procs[0].mem}}
	}
	byKey := map[[16]byte]*processGroup{}
	var groups []*processGroup
	for _, proc := range procs {
		key := pdatautil.MapHash(proc.rm.Resource().Attributes())
		g := byKey[key]
		if g == nil {
			g = &processGroup{}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.procs = append(g.procs, proc)
		g.memory += proc.mem
	}
	return groups
}

// mergeGroup writes into out one resource with the first process's attributes and, for
// each metric and point attributes, the sum of the group's values. The first process's
// own resource is moved there, not copied (this runs for every process of every batch);
// the caller removes the emptied originals from the batch.
func mergeGroup(g *processGroup, out pmetric.ResourceMetrics) {
	first := g.procs[0].rm
	if len(g.procs) > 1 {
		points := map[[16]byte]pmetric.NumberDataPoint{}
		pdatawalk.EachPoint(first, func(name string, dp pmetric.NumberDataPoint) {
			points[pointKey(name, dp)] = dp
		})
		for _, proc := range g.procs[1:] {
			pdatawalk.EachPoint(proc.rm, func(name string, dp pmetric.NumberDataPoint) {
				if into, ok := points[pointKey(name, dp)]; ok {
					addValue(into, dp)
				}
			})
		}
	}
	first.MoveTo(out)
}

func pointKey(name string, dp pmetric.NumberDataPoint) [16]byte {
	return pdatautil.Hash(pdatautil.WithString(name), pdatautil.WithMap(dp.Attributes()))
}

func addValue(into, dp pmetric.NumberDataPoint) {
	if into.ValueType() == pmetric.NumberDataPointValueTypeInt && dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		into.SetIntValue(into.IntValue() + dp.IntValue())
		return
	}
	into.SetDoubleValue(pdatawalk.Value(into) + pdatawalk.Value(dp))
}

// sanitizeExecutable keeps a process name a safe, bounded label value: printable
// characters only (others become '_'), at most max runes.
func sanitizeExecutable(name string, maxLen int) string {
	if executableIsClean(name, maxLen) {
		return name // most names: no copy, no allocation
	}
	return rewriteExecutable(name, maxLen)
}

// rewriteExecutable is sanitizeExecutable's rewrite: '_' for what is not printable, cut at
// maxLen runes, trimmed.
func rewriteExecutable(name string, maxLen int) string {
	var b strings.Builder
	n := 0
	for _, r := range name {
		if maxLen > 0 && n == maxLen {
			break
		}
		if !unicode.IsPrint(r) || unicode.IsSpace(r) && r != ' ' {
			r = '_'
		}
		b.WriteRune(r)
		n++
	}
	return strings.TrimSpace(b.String())
}

// executableIsClean reports whether sanitizeExecutable would return name unchanged.
func executableIsClean(name string, maxLen int) bool {
	if name == "" || name[0] == ' ' || name[len(name)-1] == ' ' {
		return name == ""
	}
	n := 0
	for i, r := range name {
		if n++; maxLen > 0 && n > maxLen {
			return false
		}
		if !unicode.IsPrint(r) || unicode.IsSpace(r) && r != ' ' {
			return false
		}
		if r == utf8.RuneError && !strings.HasPrefix(name[i:], "\uFFFD") {
			return false // a byte that is not UTF-8, which the rewrite replaces
		}
	}
	return true
}
