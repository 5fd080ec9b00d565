// Package thresholds holds, once, every number that decides when a GPU is in trouble, as
// kubernetes-mixin's _config does: the alerting rules (rules/, generated) fire on them,
// the dashboards (dashboards/, generated) colour their panels with them, and the gpu
// receiver classifies XIDs with them. Change a number here, run `make generate`, and the
// alert, the panel and the receiver's health state move together; rules/runbook.md says
// how to tune each one and quotes the numbers (a test holds it to them).
package thresholds // import "github.com/otelcol-gpu/otelcol-gpu/internal/thresholds"

import (
	"slices"
	"strings"
	"time"
)

// RunbookURL is where every alert's runbook_url points; the anchor is the alert name in
// lower case (the runbook's section heading).
const RunbookURL = "https://github.com/otelcol-gpu/otelcol-gpu/blob/main/rules/runbook.md"

// Runbook returns the runbook URL of an alert.
func Runbook(alert string) string { return RunbookURL + "#" + strings.ToLower(alert) }

// Temperature, power and utilization. A dashboard colours a value orange from its warning
// threshold on; the alert of that name fires past it.
const (
	// TemperatureHighCelsius: GPUTemperatureHigh. Below every datacenter GPU's slowdown
	// temperature, above what a well-cooled GPU reaches at full load.
	TemperatureHighCelsius = 85.0
	// PowerNearLimitRatio: GPUPowerNearLimit, power over the enforced power limit.
	PowerNearLimitRatio = 0.9
	// PowerCappedShare: GPUPowerCapping, the share of 15 minutes the clocks were held down
	// by the power limit.
	PowerCappedShare = 0.5
	// UtilizationSaturatedRatio: GPUUtilizationSaturated.
	UtilizationSaturatedRatio = 0.95
	// UtilizationLowRatio and PowerWhileIdleRatio: GPULowUtilizationHighPower fires under
	// this utilization while drawing more than this share of the power limit. Dashboards
	// colour utilization under UtilizationLowRatio blue (idle).
	UtilizationLowRatio = 0.1
	PowerWhileIdleRatio = 0.5
)

// Framebuffer.
const (
	// MemoryHighRatio: GPUMemoryHigh, framebuffer used over total.
	MemoryHighRatio = 0.9
	// MemoryGrowthMinShare: GPUMemoryExhaustionPredicted needs at least this share of the
	// framebuffer to have been added over the last 30 minutes.
	MemoryGrowthMinShare = 0.02
)

// Memory errors.
const (
	// CorrectedECCErrors6h: GPUCorrectableECCErrorsRising needs more corrected errors than
	// this in 6 hours (at more than twice the rate of the day before).
	CorrectedECCErrors6h = 10
)

// Workload baselines: GPUWorkloadUtilizationDeviation (through recording rules).
const (
	// UtilizationDeviationShare: the relative deviation from the 7-day baseline.
	UtilizationDeviationShare = 0.5
	// UtilizationDeviationMin: the least absolute deviation (utilization points) that
	// counts.
	UtilizationDeviationMin = 0.1
	// BaselineMinHours: hours of baseline history the alert needs.
	BaselineMinHours = 24
)

// The allocation funnel and GPU costs (rules/funnel.go, rules/cost.go).
const (
	// IdleUtilizationRatio: a pod's (or Slurm job's) share of a GPU counts as active in
	// the funnel while one of its processes holds framebuffer or its utilization is above
	// this. The same as gpu_enrich's idle.threshold default, so that the funnel and
	// nvidia.gpu.idle_while_allocated call the same GPUs idle (a test holds them equal).
	IdleUtilizationRatio = 0.05
	// IdleCostPerDay: GPUIdleCostHigh, a namespace's idle GPU cost (allocated - effective)
	// over the last 24 hours, in the currency of internal/pricing/prices.yaml. With no
	// GPU price set there is no cost and the alert never fires.
	IdleCostPerDay = 100.0
)

// Collection.
const (
	// AttributionStaleSeconds: GPUAttributionStale, the age of the kubelet snapshot.
	AttributionStaleSeconds = 300
)

// XIDs.

// XIDHealthWindow is how long an XID keeps a GPU degraded or failed (hw.status), and the
// window over which the XID alerts count new XIDs.
const XIDHealthWindow = 10 * time.Minute

// XIDClass is what an XID says about the GPU itself.
type XIDClass int

const (
	// XIDInformational: usually the application's fault (13, 31, 43, ...); counted, but
	// the GPU's health stays as it is.
	XIDInformational XIDClass = iota
	// XIDSevere: the GPU needs attention; hw.status degraded.
	XIDSevere
	// XIDFatal: the GPU cannot be trusted; hw.status failed.
	XIDFatal
)

// XIDs returns the XID codes of a class (NVIDIA's XID catalogue), in ascending order.
// XIDInformational has no list: it is every code not listed under the others.
func XIDs(class XIDClass) []uint64 {
	switch class {
	case XIDFatal:
		return []uint64{
			48,  // double-bit ECC error
			64,  // row remapping / page retirement could not be recorded
			79,  // GPU has fallen off the bus
			95,  // uncontained ECC error
			119, // GSP RPC timeout
			120, // GSP error
			140, // unrecovered ECC error
		}
	case XIDSevere:
		return []uint64{
			63, // row remapping / page retirement event
			74, // NVLink error
			92, // high single-bit ECC error rate
			94, // contained ECC error
		}
	}
	return nil
}

// ClassOfXID classifies an XID code.
func ClassOfXID(code uint64) XIDClass {
	for _, c := range []XIDClass{XIDFatal, XIDSevere} {
		if slices.Contains(XIDs(c), code) {
			return c
		}
	}
	return XIDInformational
}
