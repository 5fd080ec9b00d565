package main

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

const mib = 1 << 20

// Status of a check.
type Status string

const (
	statusPass Status = "pass"
	statusFail Status = "fail"
	// statusSkip: one side does not have the value (nvidia-smi says N/A, or the receiver
	// has no such metric); the report says why.
	statusSkip Status = "skip"
)

// Check is one field of one GPU (or MIG instance, or process), compared in every
// nvidia-smi sample with the agent's collection closest in time.
type Check struct {
	GPU       string `json:"gpu"`
	Subject   string `json:"subject"`
	Field     string `json:"field"`
	SMI       string `json:"nvidia_smi"`
	Agent     string `json:"agent"`
	Tolerance string `json:"tolerance"`
	Status    Status `json:"status"`
	// Pairs is how many nvidia-smi samples were compared; SMI and Agent show the pair
	// farthest apart (the first failing one for text).
	Pairs   int    `json:"pairs"`
	Note    string `json:"note,omitempty"`
	Details []Pair `json:"details,omitempty"`

	worst float64
}

// Pair is one comparison of a sample of nvidia-smi with the agent's closest collection.
type Pair struct {
	SMITime   time.Time `json:"nvidia_smi_time"`
	AgentTime time.Time `json:"agent_time,omitzero"`
	SMI       string    `json:"nvidia_smi"`
	Agent     string    `json:"agent"`
	Pass      bool      `json:"pass"`
	Note      string    `json:"note,omitempty"`
}

// compareInput is what one run collected.
type compareInput struct {
	Samples []smiSample
	Agent   *agentStore
	// MIGProfiles are the profile names of `nvidia-smi mig -lgi`; LGIError says why there
	// are none where a GPU is in MIG mode.
	MIGProfiles map[migProfileKey]string
	LGIError    string
	// MaxGap is the farthest an agent collection may be from an nvidia-smi sample to be
	// compared with it.
	MaxGap time.Duration
}

// comparison accumulates checks in the order they are first seen.
type comparison struct {
	checks []*Check
	byKey  map[string]*Check
}

func (c *comparison) check(gpu, subject, field, tolerance string) *Check {
	key := gpu + "\x00" + subject + "\x00" + field
	if ch := c.byKey[key]; ch != nil {
		return ch
	}
	ch := &Check{GPU: gpu, Subject: subject, Field: field, Tolerance: tolerance, Status: statusSkip, worst: -1}
	c.byKey[key] = ch
	c.checks = append(c.checks, ch)
	return ch
}

// add files one pair; score is its distance in tolerances (above 1 fails), which picks the
// pair the row shows.
func (ch *Check) add(p Pair, score float64) {
	ch.Pairs++
	ch.Details = append(ch.Details, p)
	if !p.Pass {
		ch.Status = statusFail
	} else if ch.Status == statusSkip {
		ch.Status = statusPass
	}
	if !p.Pass && score < 1 {
		score = math.Inf(1)
	}
	if score > ch.worst {
		ch.worst = score
		ch.SMI, ch.Agent = p.SMI, p.Agent
		if p.Note != "" {
			ch.Note = p.Note
		}
	}
}

// skip records why a field is not compared (once).
func (ch *Check) skip(smi, agent, note string) {
	if ch.Status != statusSkip || ch.Note != "" {
		return
	}
	ch.SMI, ch.Agent, ch.Note = smi, agent, note
}

// compare checks every nvidia-smi sample against the agent.
func compare(in compareInput) []*Check {
	c := &comparison{byKey: map[string]*Check{}}
	agentGPUs := in.Agent.gpuUUIDs()
	seen := map[string]bool{}
	var order []string
	for _, s := range in.Samples {
		for _, g := range s.GPUs {
			if !seen[g.UUID] {
				seen[g.UUID] = true
				order = append(order, g.UUID)
			}
		}
	}
	for _, u := range agentGPUs {
		if !seen[u] {
			seen[u] = true
			order = append(order, u)
		}
	}
	inAgent := map[string]bool{}
	for _, u := range agentGPUs {
		inAgent[u] = true
	}
	labels := map[string]string{}
	for _, u := range order {
		labels[u] = u
	}
	for _, s := range in.Samples {
		for _, g := range s.GPUs {
			labels[g.UUID] = fmt.Sprintf("%d %s", g.Index, g.UUID)
		}
	}

	for _, u := range order {
		ch := c.check(labels[u], "GPU", "present (UUID)", "both list it")
		inSMI := slices.ContainsFunc(in.Samples, func(s smiSample) bool { return findGPU(s, u) != nil })
		p := Pair{SMI: yesNo(inSMI), Agent: yesNo(inAgent[u]), Pass: inSMI && inAgent[u]}
		switch {
		case !inSMI:
			p.Note = "the agent reports a GPU nvidia-smi does not list"
		case !inAgent[u]:
			p.Note = "nvidia-smi lists a GPU the agent never reported"
		}
		ch.add(p, 0)
	}

	for _, s := range in.Samples {
		for i := range s.GPUs {
			g := &s.GPUs[i]
			tl := in.Agent.timeline(g.UUID)
			if len(tl) == 0 || s.Time.Before(tl[0].Time.Add(-in.MaxGap)) || s.Time.After(tl[len(tl)-1].Time.Add(in.MaxGap)) {
				continue // before the agent's first collection or after its last
			}
			label := labels[g.UUID]
			snap := closest(tl, s.Time, func(a *agentSnapshot) bool { return a.Attrs != nil })
			if snap == nil || absDuration(snap.Time.Sub(s.Time)) > in.MaxGap {
				ch := c.check(label, "GPU", "collection near the sample", fmt.Sprintf("within %s", in.MaxGap))
				ch.add(Pair{SMITime: s.Time, SMI: "sample", Agent: "none", Pass: false, Note: fmt.Sprintf("the agent sent no collection of this GPU within %s of the nvidia-smi sample", in.MaxGap)}, 0)
				continue
			}
			compareIdentity(c, label, s, g, snap)
			compareValues(c, label, s, g, tl, in.MaxGap)
			compareMIG(c, label, s, g, snap, in)
			compareProcesses(c, label, s, g, snap)
		}
	}
	compareHost(c, in)
	return c.checks
}

func findGPU(s smiSample, uuid string) *smiGPUState {
	for i := range s.GPUs {
		if s.GPUs[i].UUID == uuid {
			return &s.GPUs[i]
		}
	}
	return nil
}

// closest is the snapshot nearest to t among those ok accepts.
func closest(tl []*agentSnapshot, t time.Time, ok func(*agentSnapshot) bool) *agentSnapshot {
	var best *agentSnapshot
	for _, a := range tl {
		if ok != nil && !ok(a) {
			continue
		}
		if best == nil || absDuration(a.Time.Sub(t)) < absDuration(best.Time.Sub(t)) {
			best = a
		}
	}
	return best
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// compareIdentity: what identifies the GPU must be equal.
func compareIdentity(c *comparison, label string, s smiSample, g *smiGPUState, snap *agentSnapshot) {
	text := func(field, smi, attr string, equal func(a, b string) bool) {
		ch := c.check(label, "GPU", field, "equal")
		agent, ok := snap.Attrs[attr]
		if smi == "" {
			ch.skip("N/A", agent, "nvidia-smi shows no value")
			return
		}
		if !ok {
			ch.add(Pair{SMITime: s.Time, AgentTime: snap.Time, SMI: smi, Agent: "absent", Pass: false, Note: "the agent does not report " + attr}, 0)
			return
		}
		ch.add(Pair{SMITime: s.Time, AgentTime: snap.Time, SMI: smi, Agent: agent, Pass: equal(smi, agent)}, 0)
	}
	same := func(a, b string) bool { return a == b }
	text("model (product_name / hw.model)", g.Model, "hw.model", same)
	text("driver version", s.Driver, "hw.driver_version", same)
	text("PCI bus id", g.BusID, "nvidia.gpu.pci_bus_id", strings.EqualFold)
	text("index (order in nvidia-smi / nvidia.gpu.index)", strconv.Itoa(g.Index), "nvidia.gpu.index", same)
	minor := ""
	if g.Minor != nil {
		minor = strconv.Itoa(int(*g.Minor))
	}
	text("minor number", minor, "nvidia.gpu.minor_number", same)
	// A GPU without MIG support shows N/A: the receiver says false.
	mig := map[string]string{"Enabled": "true", "Disabled": "false", "N/A": "false"}[g.MIG]
	text("MIG mode (current_mig / nvidia.gpu.mig.enabled)", mig, "nvidia.gpu.mig.enabled", same)
}

// valueCheck compares one number: nvidia-smi's (its units) with the agent's metric.
type valueCheck struct {
	field string
	smi   string
	agent string
	// scale turns the agent's value into nvidia-smi's unit.
	scale float64
	unit  string
	// tolerance in nvidia-smi's unit, and how it reads in the report.
	tolerance func(g *smiGPUState, smi float64) (float64, string)
	// agentOnly explains a value nvidia-smi has and the receiver does not report.
	notReported string
	// agentValue, when set, computes the agent's value from a snapshot (several metrics).
	agentValue func(a *agentSnapshot) (float64, bool)
}

func fixed(tol float64, text string) func(*smiGPUState, float64) (float64, string) {
	return func(*smiGPUState, float64) (float64, string) { return tol, text }
}

// memoryTolerance: 1 % of the GPU's framebuffer, at least 64 MiB: allocations of the
// processes on it move between two readings taken a second or two apart.
func memoryTolerance(g *smiGPUState, _ float64) (float64, string) {
	return math.Max(64, g.Values[vMemTotal]/100), "1 % of total, at least 64 MiB"
}

func valueChecks() []valueCheck {
	clockTolerance := func(maxKey string) func(*smiGPUState, float64) (float64, string) {
		return func(g *smiGPUState, v float64) (float64, string) {
			ref := v
			if m, ok := g.Values[maxKey]; ok {
				ref = m
			}
			return math.Max(0.15*ref, 50), "15 % of the maximum clock (clocks move with load within a second)"
		}
	}
	return []valueCheck{
		{field: "memory total (fb_memory_usage/total)", smi: vMemTotal, agent: kMemLimit, scale: 1.0 / mib, unit: "MiB", tolerance: fixed(1, "1 MiB (nvidia-smi rounds to MiB)")},
		{field: "memory reserved (fb_memory_usage/reserved)", smi: vMemReserved, agent: kMemReserved, scale: 1.0 / mib, unit: "MiB", tolerance: fixed(1, "1 MiB (nvidia-smi rounds to MiB)"),
			notReported: "the agent reports no reservation (a driver older than R510: its used includes it)"},
		{field: "memory used + reserved", smi: vMemUsed, agent: kMemUsage, scale: 1.0 / mib, unit: "MiB", tolerance: memoryTolerance,
			agentValue: func(a *agentSnapshot) (float64, bool) {
				// Like with like: with nvmlDeviceGetMemoryInfo_v2 the receiver's usage excludes
				// the driver's reservation (reported apart), as nvidia-smi's used does; the
				// sum is the same on every driver.
				used, ok := a.Values[kMemUsage]
				return (used + a.Values[kMemReserved]) / mib, ok
			}},
		{field: "power draw", smi: vPower, agent: kPower, scale: 1, unit: "W", tolerance: func(_ *smiGPUState, v float64) (float64, string) {
			return math.Max(0.10*v, 15), "10 % or 15 W, whichever is more (readings up to a few seconds apart)"
		}},
		{field: "power limit (current_power_limit)", smi: vPowerLimit, agent: kPowerLimit, scale: 1, unit: "W", tolerance: fixed(1, "1 W")},
		{field: "temperature (gpu_temp)", smi: vTempGPU, agent: kTempGPU, scale: 1, unit: "°C", tolerance: fixed(5, "5 °C")},
		{field: "memory temperature (memory_temp)", smi: vTempMemory, agent: kTempMemory, scale: 1, unit: "°C", tolerance: fixed(5, "5 °C")},
		{field: "SM clock (clocks/sm_clock)", smi: vClockSM, agent: kClockSM, scale: 1e-6, unit: "MHz", tolerance: clockTolerance(vMaxSM)},
		{field: "memory clock (clocks/mem_clock)", smi: vClockMemory, agent: kClockMemory, scale: 1e-6, unit: "MHz", tolerance: clockTolerance(vMaxMemory)},
		{field: "graphics clock (clocks/graphics_clock)", smi: vClockGraphics, unit: "MHz", notReported: "the receiver reports the SM and memory clocks only"},
		{field: "max SM clock (max_clocks/sm_clock)", smi: vMaxSM, agent: kMaxSM, scale: 1e-6, unit: "MHz", tolerance: fixed(0, "exact")},
		{field: "max memory clock (max_clocks/mem_clock)", smi: vMaxMemory, agent: kMaxMemory, scale: 1e-6, unit: "MHz", tolerance: fixed(0, "exact")},
		{field: "max graphics clock (max_clocks/graphics_clock)", smi: vMaxGraphics, unit: "MHz", notReported: "the receiver reports the SM and memory clocks only"},
	}
}

// compareValues compares each number with the agent's collection closest in time that
// has it.
func compareValues(c *comparison, label string, s smiSample, g *smiGPUState, tl []*agentSnapshot, maxGap time.Duration) {
	for _, vc := range valueChecks() {
		smi, hasSMI := g.Values[vc.smi]
		get := vc.agentValue
		if get == nil && vc.agent != "" {
			key, scale := vc.agent, vc.scale
			get = func(a *agentSnapshot) (float64, bool) {
				v, ok := a.Values[key]
				return v * scale, ok
			}
		}
		tolText := ""
		if vc.tolerance != nil {
			_, tolText = vc.tolerance(g, smi)
		}
		field := vc.field
		if vc.smi == vPower && g.PowerSource != "" {
			field = "power draw (" + g.PowerSource + ")"
		}
		ch := c.check(label, "GPU", field, tolText)
		if get == nil {
			ch.skip(formatValue(smi, hasSMI, vc.unit), "not reported", vc.notReported)
			continue
		}
		snap := closest(tl, s.Time, func(a *agentSnapshot) bool { _, ok := get(a); return ok })
		switch {
		case !hasSMI && snap == nil:
			ch.skip("N/A", "absent", "neither side has this value on this GPU")
			continue
		case !hasSMI:
			v, _ := get(snap)
			ch.skip("N/A", formatValue(v, true, vc.unit), "nvidia-smi shows N/A")
			continue
		case snap == nil:
			note := "the agent never reported " + vc.agent
			if vc.notReported != "" {
				note = vc.notReported
				ch.skip(formatValue(smi, true, vc.unit), "absent", note)
				continue
			}
			ch.add(Pair{SMITime: s.Time, SMI: formatValue(smi, true, vc.unit), Agent: "absent", Pass: false, Note: note}, 0)
			continue
		}
		if gap := absDuration(snap.Time.Sub(s.Time)); gap > maxGap {
			ch.add(Pair{SMITime: s.Time, AgentTime: snap.Time, SMI: formatValue(smi, true, vc.unit), Agent: "absent", Pass: false,
				Note: fmt.Sprintf("no agent value within %s of the sample", maxGap)}, 0)
			continue
		}
		agent, _ := get(snap)
		tol, _ := vc.tolerance(g, smi)
		if vc.smi == vMemUsed {
			smi += g.Values[vMemReserved]
		}
		diff := math.Abs(agent - smi)
		ch.add(Pair{SMITime: s.Time, AgentTime: snap.Time, SMI: formatValue(smi, true, vc.unit), Agent: formatValue(agent, true, vc.unit), Pass: diff <= tol+1e-9}, score(diff, tol))
	}
}

func score(diff, tol float64) float64 {
	if tol == 0 {
		if diff == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return diff / tol
}

// compareMIG compares a MIG-enabled GPU's instances: the same (GPU instance, compute
// instance) pairs on both sides, each with its framebuffer and profile name.
func compareMIG(c *comparison, label string, s smiSample, g *smiGPUState, snap *agentSnapshot, in compareInput) {
	if g.MIG != "Enabled" {
		return
	}
	type key struct{ gi, ci int }
	smi := map[key]*smiMIGState{}
	for i := range g.MIGs {
		smi[key{g.MIGs[i].GPUInstance, g.MIGs[i].ComputeInstance}] = &g.MIGs[i]
	}
	agent := map[key]*agentMIG{}
	for _, m := range snap.MIGs {
		agent[key{m.GPUInstance, m.ComputeInstance}] = m
	}
	list := func(keys []key) string {
		if len(keys) == 0 {
			return "none"
		}
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("gi %d/ci %d", k.gi, k.ci))
		}
		return strings.Join(parts, ", ")
	}
	sorted := func(m map[key]bool) []key {
		out := make([]key, 0, len(m))
		for k := range m {
			out = append(out, k)
		}
		slices.SortFunc(out, func(a, b key) int {
			if a.gi != b.gi {
				return a.gi - b.gi
			}
			return a.ci - b.ci
		})
		return out
	}
	smiKeys, agentKeys, onlySMI, onlyAgent := map[key]bool{}, map[key]bool{}, map[key]bool{}, map[key]bool{}
	for k := range smi {
		smiKeys[k] = true
		if agent[k] == nil {
			onlySMI[k] = true
		}
	}
	for k := range agent {
		agentKeys[k] = true
		if smi[k] == nil {
			onlyAgent[k] = true
		}
	}
	p := Pair{SMITime: s.Time, AgentTime: snap.Time, SMI: list(sorted(smiKeys)), Agent: list(sorted(agentKeys)), Pass: len(onlySMI) == 0 && len(onlyAgent) == 0}
	p.Note = missingNote("instances", list(sorted(onlySMI)), list(sorted(onlyAgent)), len(onlySMI) > 0, len(onlyAgent) > 0)
	c.check(label, "GPU", "MIG instances (mig_devices)", "same set").add(p, 0)

	for _, k := range sorted(smiKeys) {
		sm, am := smi[k], agent[k]
		if am == nil {
			continue
		}
		subject := fmt.Sprintf("MIG gi %d/ci %d", k.gi, k.ci)
		num := func(field string, smiV float64, hasSMI bool, agentKey string, tol float64, tolText string) {
			ch := c.check(label, subject, field, tolText)
			av, hasAgent := am.Values[agentKey]
			av /= mib
			switch {
			case !hasSMI:
				ch.skip("N/A", formatValue(av, hasAgent, "MiB"), "nvidia-smi shows N/A")
			case !hasAgent:
				ch.add(Pair{SMITime: s.Time, AgentTime: snap.Time, SMI: formatValue(smiV, true, "MiB"), Agent: "absent", Pass: false, Note: "the agent does not report " + agentKey + " for this instance"}, 0)
			default:
				diff := math.Abs(av - smiV)
				ch.add(Pair{SMITime: s.Time, AgentTime: snap.Time, SMI: formatValue(smiV, true, "MiB"), Agent: formatValue(av, true, "MiB"), Pass: diff <= tol}, score(diff, tol))
			}
		}
		total, hasTotal := sm.Values[vMemTotal]
		num("memory total", total, hasTotal, kMemLimit, 1, "1 MiB")
		// The receiver reads a MIG instance with nvmlDeviceGetMemoryInfo, whose used counts
		// any reservation; nvidia-smi shows it apart.
		used, hasUsed := sm.Values[vMemUsed]
		num("memory used + reserved", used+sm.Values[vMemReserved], hasUsed, kMemUsage, math.Max(64, total/100), "1 % of the instance, at least 64 MiB")

		ch := c.check(label, subject, "profile (nvidia-smi mig -lgi / nvidia.mig.profile)", "equal")
		name, ok := in.MIGProfiles[migProfileKey{g.Index, k.gi}]
		if !ok {
			why := in.LGIError
			if why == "" {
				why = "nvidia-smi mig -lgi does not list this GPU instance"
			}
			ch.skip("unknown", am.Profile, why)
			continue
		}
		ch.add(Pair{SMITime: s.Time, AgentTime: snap.Time, SMI: name, Agent: am.Profile, Pass: name == am.Profile}, 0)
	}
}

// compareProcesses compares the GPU's process list: the same PIDs, each with its memory,
// type and name.
func compareProcesses(c *comparison, label string, s smiSample, g *smiGPUState, snap *agentSnapshot) {
	smi := map[int]*smiProcess{}
	for i := range g.Processes {
		smi[g.Processes[i].PID] = &g.Processes[i]
	}
	var smiPIDs, agentPIDs, onlySMI, onlyAgent []int
	for pid := range smi {
		smiPIDs = append(smiPIDs, pid)
		if snap.Processes[pid] == nil {
			onlySMI = append(onlySMI, pid)
		}
	}
	for pid := range snap.Processes {
		agentPIDs = append(agentPIDs, pid)
		if smi[pid] == nil {
			onlyAgent = append(onlyAgent, pid)
		}
	}
	for _, l := range [][]int{smiPIDs, agentPIDs, onlySMI, onlyAgent} {
		slices.Sort(l)
	}
	p := Pair{SMITime: s.Time, AgentTime: snap.Time, SMI: pidList(smiPIDs), Agent: pidList(agentPIDs), Pass: len(onlySMI) == 0 && len(onlyAgent) == 0}
	p.Note = missingNote("PIDs", pidList(onlySMI), pidList(onlyAgent), len(onlySMI) > 0, len(onlyAgent) > 0)
	c.check(label, "GPU", "process list (processes / process.pid)", "same PIDs").add(p, 0)

	for _, pid := range smiPIDs {
		sp, ap := smi[pid], snap.Processes[pid]
		if ap == nil {
			continue
		}
		subject := fmt.Sprintf("process %d", pid)
		ch := c.check(label, subject, "used memory", "1 % of the GPU's total, at least 64 MiB")
		switch {
		case sp.MemoryMiB == nil:
			ch.skip("N/A", formatValue(deref(ap.MemoryBytes)/mib, ap.MemoryBytes != nil, "MiB"), "nvidia-smi shows N/A")
		case ap.MemoryBytes == nil:
			ch.add(Pair{SMITime: s.Time, AgentTime: snap.Time, SMI: formatValue(*sp.MemoryMiB, true, "MiB"), Agent: "absent", Pass: false, Note: "the agent reports no memory for this process"}, 0)
		default:
			tol, _ := memoryTolerance(g, 0)
			agent := *ap.MemoryBytes / mib
			diff := math.Abs(agent - *sp.MemoryMiB)
			ch.add(Pair{SMITime: s.Time, AgentTime: snap.Time, SMI: formatValue(*sp.MemoryMiB, true, "MiB"), Agent: formatValue(agent, true, "MiB"), Pass: diff <= tol}, score(diff, tol))
		}

		// nvidia-smi: C (compute), G (graphics), C+G, and M… under MPS; the receiver reports
		// a process in both lists once, as compute.
		want := "graphics"
		if strings.Contains(sp.Type, "C") || strings.Contains(sp.Type, "M") {
			want = "compute"
		}
		c.check(label, subject, "type", "C → compute, G → graphics, C+G → compute").
			add(Pair{SMITime: s.Time, AgentTime: snap.Time, SMI: sp.Type, Agent: ap.Type, Pass: want == ap.Type}, 0)

		nameCheck := c.check(label, subject, "name (process_name / process.executable.name)", "equal, or the same file name")
		if sp.Name == "" || sp.Name == "N/A" {
			nameCheck.skip("N/A", ap.Name, "nvidia-smi shows no name")
		} else {
			nameCheck.add(Pair{SMITime: s.Time, AgentTime: snap.Time, SMI: sp.Name, Agent: ap.Name, Pass: sp.Name == ap.Name || path.Base(sp.Name) == path.Base(ap.Name)}, 0)
		}

		if sp.GPUInstance != nil {
			ch := c.check(label, subject, "MIG GPU instance", "equal")
			agent := "absent"
			if ap.GPUInstance != nil {
				agent = strconv.Itoa(*ap.GPUInstance)
			}
			ch.add(Pair{SMITime: s.Time, AgentTime: snap.Time, SMI: strconv.Itoa(*sp.GPUInstance), Agent: agent, Pass: agent == strconv.Itoa(*sp.GPUInstance)}, 0)
		}
	}
}

// compareHost: the receiver's own count of GPUs against nvidia-smi's.
func compareHost(c *comparison, in compareInput) {
	if len(in.Samples) == 0 {
		return
	}
	last := in.Samples[len(in.Samples)-1]
	in.Agent.mu.Lock()
	count, ok := in.Agent.hostValues["nvidia.gpu.count"]
	in.Agent.mu.Unlock()
	ch := c.check("all", "host", "GPU count (attached GPUs / nvidia.gpu.count)", "equal")
	p := Pair{SMITime: last.Time, SMI: strconv.Itoa(len(last.GPUs)), Agent: formatValue(count, ok, ""), Pass: ok && int(count) == len(last.GPUs)}
	if !ok {
		p.Note = "the agent never reported nvidia.gpu.count"
	}
	ch.add(p, 0)
}

func missingNote(what, onlySMI, onlyAgent string, smiHas, agentHas bool) string {
	var parts []string
	if smiHas {
		parts = append(parts, fmt.Sprintf("the agent lacks %s %s", what, onlySMI))
	}
	if agentHas {
		parts = append(parts, fmt.Sprintf("nvidia-smi lacks %s %s", what, onlyAgent))
	}
	return strings.Join(parts, "; ")
}

func pidList(pids []int) string {
	if len(pids) == 0 {
		return "none"
	}
	parts := make([]string, len(pids))
	for i, p := range pids {
		parts[i] = strconv.Itoa(p)
	}
	return strings.Join(parts, ", ")
}

func formatValue(v float64, ok bool, unit string) string {
	if !ok {
		return "absent"
	}
	s := strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
	if unit != "" {
		s += " " + unit
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "listed"
	}
	return "not listed"
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}
