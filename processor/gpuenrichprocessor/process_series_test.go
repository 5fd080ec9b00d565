package gpuenrichprocessor

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-gpu/otelcol-gpu/internal/pdatawalk"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/cgroup"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/metadata"
)

// procSpec is one GPU process of a synthetic scrape.
type procSpec struct {
	pid  uint32
	exe  string
	mem  int64
	util float64
}

// processScrape is what the receiver emits for one GPU and its processes, at second s.
func processScrape(s int, procs []procSpec) pmetric.Metrics {
	md := pmetric.NewMetrics()
	ts := pcommon.NewTimestampFromTime(time.Date(2026, 1, 1, 0, 0, s, 0, time.UTC))
	host := md.ResourceMetrics().AppendEmpty()
	host.Resource().Attributes().PutStr("host.name", "node-1")
	gpu := md.ResourceMetrics().AppendEmpty()
	gpu.Resource().Attributes().PutStr("host.name", "node-1")
	gpu.Resource().Attributes().PutStr("hw.id", "GPU-0")
	m := gpu.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(metricMemoryUsage)
	dp := m.SetEmptySum().DataPoints().AppendEmpty()
	dp.SetTimestamp(ts)
	dp.SetIntValue(40 << 30)
	for _, p := range procs {
		rm := md.ResourceMetrics().AppendEmpty()
		a := rm.Resource().Attributes()
		a.PutStr("host.name", "node-1")
		a.PutStr("hw.id", "GPU-0")
		a.PutInt("process.pid", int64(p.pid))
		a.PutStr("process.executable.name", p.exe)
		a.PutStr("nvidia.gpu.process.type", "compute")
		ms := rm.ScopeMetrics().AppendEmpty().Metrics()
		mem := ms.AppendEmpty()
		mem.SetName(metricProcessMemory)
		mdp := mem.SetEmptySum().DataPoints().AppendEmpty()
		mdp.SetTimestamp(ts)
		mdp.SetIntValue(p.mem)
		util := ms.AppendEmpty()
		util.SetName(metricProcessUtil)
		udp := util.SetEmptyGauge().DataPoints().AppendEmpty()
		udp.SetTimestamp(ts)
		udp.Attributes().PutStr("nvidia.gpu.engine", "sm")
		udp.SetDoubleValue(p.util)
	}
	return md
}

// processSeries maps each process series with values (end markers aside) of md to its
// memory.
func processSeries(md pmetric.Metrics) map[string]float64 {
	out := map[string]float64{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		exe, ok := rm.Resource().Attributes().Get("process.executable.name")
		if !ok || onlyEndMarkers(rm) {
			continue
		}
		key := exe.AsString()
		if pid, ok := rm.Resource().Attributes().Get("process.pid"); ok {
			key += fmt.Sprintf("[%d]", pid.Int())
		}
		if pod, ok := rm.Resource().Attributes().Get("k8s.pod.uid"); ok {
			key += "@" + pod.AsString()
		}
		pdatawalk.EachPoint(rm, func(name string, dp pmetric.NumberDataPoint) {
			if name == metricProcessMemory {
				out[key] += pdatawalk.Value(dp)
			}
		})
	}
	return out
}

func newProcessSeriesProcessor(t *testing.T, cfg *Config, pids fakePIDs) *gpuEnrichProcessor {
	t.Helper()
	p := newProcessor(cfg, processortest.NewNopSettings(metadata.Type), newFakeClock().Now, sources{pids: pids})
	require.NoError(t, p.start(context.Background(), nil))
	return p
}

// A pod that keeps 50 dataloader workers and replaces them every scrape adds no series:
// processes of one owner and executable share one, without PID.
func TestProcessChurnAddsNoSeries(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	pids := fakePIDs{}
	p := newProcessSeriesProcessor(t, cfg, pids)
	seen := map[string]bool{}
	for s := range 5 {
		var procs []procSpec
		for w := range 50 {
			pid := uint32(100000 + s*100 + w) // new PIDs every scrape
			pids[pid] = cgroup.Location{PodUID: uidTrainer, ContainerID: idTrainer}
			procs = append(procs, procSpec{pid: pid, exe: "pt_data_worker", mem: 1 << 20, util: 0.01})
		}
		out, err := p.processMetrics(context.Background(), processScrape(s, procs))
		require.NoError(t, err)
		series := processSeries(out)
		assert.Equal(t, map[string]float64{"pt_data_worker@" + uidTrainer: 50 << 20}, series, "one series, the sum of the workers")
		for k := range series {
			seen[k] = true
		}
	}
	assert.Len(t, seen, 1, "the same series every scrape")
}

// Beyond max_per_gpu series per GPU, the smallest by memory are summed into "(other)"
// (without owner), and counted.
func TestProcessSeriesPerGPUAreBounded(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Processes.MaxPerGPU = 4
	p := newProcessSeriesProcessor(t, cfg, fakePIDs{})
	var procs []procSpec
	for i := range 10 {
		procs = append(procs, procSpec{pid: uint32(500 + i), exe: fmt.Sprintf("job-%02d", i), mem: int64(i+1) << 20, util: 0.05})
	}
	for s := range 2 {
		out, err := p.processMetrics(context.Background(), processScrape(s, procs))
		require.NoError(t, err)
		series := processSeries(out)
		assert.Equal(t, map[string]float64{
			"job-09": 10 << 20, "job-08": 9 << 20, "job-07": 8 << 20,
			otherProcesses: (1 + 2 + 3 + 4 + 5 + 6 + 7) << 20,
		}, series, "the three largest keep theirs; the other seven are summed")
		host := resources(out, map[string]string{"!hw.id": "", "host.name": "*"})[0]
		assert.Equal(t, float64(7*(s+1)), point(t, host, "nvidia.gpu.processes.folded"))
	}
}

// A workload whose process takes a new executable name every collection (a counter or a
// temporary path in it) adds new series only up to max_executable_names_per_gpu within the
// window; later names are written "(other)" with their owner kept, and counted. A name
// that was admitted keeps its series; once the window has passed without it, its place
// goes to a new name.
func TestExecutableNamesPerGPUAreBoundedOverTime(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Processes.MaxExecutableNamesPerGPU = 3
	cfg.Processes.ExecutableNamesWindow = time.Hour
	clock := newFakeClock()
	pids := fakePIDs{}
	p := newProcessor(cfg, processortest.NewNopSettings(metadata.Type), clock.Now, sources{pids: pids})
	require.NoError(t, p.start(context.Background(), nil))
	seen := map[string]bool{}
	for s := range 20 {
		pids[uint32(100+s)] = cgroup.Location{PodUID: uidTrainer, ContainerID: idTrainer}
		procs := []procSpec{
			{pid: 7, exe: "python3", mem: 1 << 20},                              // the same name every time
			{pid: uint32(100 + s), exe: fmt.Sprintf("run-%d", s), mem: 2 << 20}, // a new name every time
		}
		out, err := p.processMetrics(context.Background(), processScrape(s, procs))
		require.NoError(t, err)
		series := processSeries(out)
		assert.Equal(t, float64(1<<20), series["python3"], "collection %d: the steady name keeps its series", s)
		for k := range series {
			seen[k] = true
		}
		clock.Step(10 * time.Second)
	}
	assert.Equal(t, map[string]bool{
		"python3": true, "run-0@" + uidTrainer: true, "run-1@" + uidTrainer: true,
		otherProcesses + "@" + uidTrainer: true,
	}, seen, "three names within the hour (python3, run-0, run-1), then \"(other)\" for the pod's later names")
	out, err := p.processMetrics(context.Background(), processScrape(20, nil))
	require.NoError(t, err)
	host := resources(out, map[string]string{"!hw.id": "", "host.name": "*"})[0]
	assert.Equal(t, float64(18), point(t, host, "nvidia.gpu.processes.folded"), "run-2 … run-19 counted")

	// An hour after run-0 and run-1 were last seen, new names take their places.
	clock.Step(time.Hour)
	pids[500] = cgroup.Location{PodUID: uidTrainer, ContainerID: idTrainer}
	out, err = p.processMetrics(context.Background(), processScrape(3700, []procSpec{
		{pid: 7, exe: "python3", mem: 1 << 20}, {pid: 500, exe: "fresh", mem: 2 << 20},
	}))
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{"python3": 1 << 20, "fresh@" + uidTrainer: 2 << 20}, processSeries(out))
}

func TestExecutableNamesBoundValidation(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	assert.Equal(t, 16, cfg.Processes.MaxExecutableNamesPerGPU)
	assert.Equal(t, time.Hour, cfg.Processes.ExecutableNamesWindow)
	cfg.Processes.MaxExecutableNamesPerGPU = -1
	assert.ErrorContains(t, cfg.Validate(), "processes.max_executable_names_per_gpu")
	cfg.Processes.MaxExecutableNamesPerGPU = 4
	cfg.Processes.ExecutableNamesWindow = 0
	assert.ErrorContains(t, cfg.Validate(), "processes.executable_names_window")
	cfg.Processes.MaxExecutableNamesPerGPU = 0 // no bound: no window needed
	assert.NoError(t, cfg.Validate())
}

func TestKeepPIDKeepsOneSeriesPerProcess(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Processes.KeepPID = true
	p := newProcessSeriesProcessor(t, cfg, fakePIDs{})
	out, err := p.processMetrics(context.Background(), processScrape(0, []procSpec{{pid: 7, exe: "python3", mem: 1}, {pid: 8, exe: "python3", mem: 2}}))
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{"python3[7]": 1, "python3[8]": 2}, processSeries(out))
}

func TestExecutableNamesAreSanitisedAndCut(t *testing.T) {
	assert.Equal(t, "python3", sanitizeExecutable("python3", 64))
	assert.Equal(t, "evil_name_", sanitizeExecutable("evil\x00name\n", 64))
	assert.Equal(t, strings.Repeat("a", 64), sanitizeExecutable(strings.Repeat("a", 300), 64))
	assert.Equal(t, "数据加载器", sanitizeExecutable("数据加载器", 64), "printable non-ASCII stays")

	cfg := createDefaultConfig().(*Config)
	p := newProcessSeriesProcessor(t, cfg, fakePIDs{})
	out, err := p.processMetrics(context.Background(), processScrape(0, []procSpec{{pid: 7, exe: strings.Repeat("x", 500) + "\x1b[31m", mem: 1}}))
	require.NoError(t, err)
	for k := range processSeries(out) {
		assert.Len(t, k, 64)
	}
}

// TestCleanExecutableNamesAreKeptAsTheyAre holds the shortcut for names that need no
// rewrite to the rewrite itself: a name is taken as it is exactly when rewriting it
// would not change it.
func TestCleanExecutableNamesAreKeptAsTheyAre(t *testing.T) {
	names := []string{"", "python3", "tritonserver", " python3", "python3 ", "my trainer", "a\tb", "evil\x00name",
		"数据加载器", "\ufffd", "caf\u00e9", "nbsp\u00a0x", "zero\u200bwidth", "\x1b[31mred", strings.Repeat("a", 64), strings.Repeat("a", 65),
		strings.Repeat("é", 64), strings.Repeat("é", 65), strings.Repeat("a", 63) + " b", "\xff\xfe"}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune{'a', 'Z', '0', ' ', '_', '\t', '\n', 0, 0x1b, 'é', '数', 0xa0, 0x200b, 0xfffd}
	for range 2000 {
		r := make([]rune, rng.IntN(12))
		for i := range r {
			r[i] = alphabet[rng.IntN(len(alphabet))]
		}
		names = append(names, string(r))
	}
	for _, maxLen := range []int{1, 5, 64} {
		for _, name := range names {
			want := rewriteExecutable(name, maxLen)
			assert.Equal(t, want == name, executableIsClean(name, maxLen), "%q (max %d)", name, maxLen)
			assert.Equal(t, want, sanitizeExecutable(name, maxLen), "%q (max %d)", name, maxLen)
		}
	}
}
