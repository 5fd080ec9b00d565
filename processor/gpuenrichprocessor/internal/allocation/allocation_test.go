package allocation

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/podresources"
)

const (
	gpu0 = "GPU-11111111-0000-4000-8000-000000000000" // index 0, minor 2
	gpu1 = "GPU-22222222-0000-4000-8000-000000000000" // index 1, minor 0
	migA = "MIG-aaaaaaaa-0000-4000-8000-000000000000" // on gpu1: MIG index 0, GI 3, 1g.10gb
	migB = "MIG-bbbbbbbb-0000-4000-8000-000000000000" // on gpu1: MIG index 1, GI 5, 1g.10gb
	migC = "MIG-cccccccc-0000-4000-8000-000000000000" // on gpu1: MIG index 2, GI 1, 3g.40gb
)

var node = Inventory{
	GPUs: []GPU{{UUID: gpu0, Index: 0, Minor: 2}, {UUID: gpu1, Index: 1, Minor: 0}},
	MIGs: []MIG{
		{UUID: migA, Parent: gpu1, Index: 0, GPUInstanceID: 3, Profile: "1g.10gb"},
		{UUID: migB, Parent: gpu1, Index: 1, GPUInstanceID: 5, Profile: "1g.10gb"},
		{UUID: migC, Parent: gpu1, Index: 2, GPUInstanceID: 1, Profile: "3g.40gb"},
	},
}

func holding(ns, pod, ctr, res string, ids ...string) podresources.Pod {
	c := podresources.Container{Name: ctr}
	for _, id := range ids {
		c.Devices = append(c.Devices, podresources.Device{ResourceName: res, ID: id})
	}
	return podresources.Pod{Namespace: ns, Name: pod, Containers: []podresources.Container{c}}
}

func claiming(ns, pod, claim string, devices ...string) podresources.Pod {
	c := podresources.Container{Name: "main"}
	for _, d := range devices {
		c.Claims = append(c.Claims, podresources.ClaimDevice{Claim: claim, ClaimNamespace: ns, Driver: "gpu.nvidia.com", Pool: "node-1", Device: d})
	}
	return podresources.Pod{Namespace: ns, Name: pod, Containers: []podresources.Container{c}}
}

func pods(a Allocation, uuid string) []string {
	var out []string
	for _, h := range a.ByUUID[uuid] {
		out = append(out, h.Namespace+"/"+h.Pod)
	}
	return out
}

func TestEveryDevicePluginScheme(t *testing.T) {
	for name, tc := range map[string]struct {
		ids  []string
		want map[string][]string
	}{
		"uuids and replicas":      {[]string{gpu0, gpu1 + "::3", migA}, map[string][]string{gpu0: {"ns/p"}, gpu1: {"ns/p"}, migA: {"ns/p"}}},
		"indexes":                 {[]string{"0", "1::2"}, map[string][]string{gpu0: {"ns/p"}, gpu1: {"ns/p"}}},
		"index MIG <gpu>:<mig>":   {[]string{"1:1"}, map[string][]string{migB: {"ns/p"}}},
		"GKE minor, not index":    {[]string{"nvidia0", "nvidia2/vgpu4"}, map[string][]string{gpu1: {"ns/p"}, gpu0: {"ns/p"}}},
		"GKE MIG by GI id":        {[]string{"nvidia0/gi5", "nvidia0/gi1/vgpu0"}, map[string][]string{migB: {"ns/p"}, migC: {"ns/p"}}},
		"legacy MIG name is kept": {[]string{"MIG-GPU-" + gpu1[4:] + "/3/0"}, map[string][]string{}},
	} {
		t.Run(name, func(t *testing.T) {
			snap := &podresources.Snapshot{Pods: []podresources.Pod{holding("ns", "p", "c", "nvidia.com/gpu", tc.ids...)}}
			a := Resolve(snap, node, nil, nil)
			got := map[string][]string{}
			for uuid := range a.ByUUID {
				got[uuid] = pods(a, uuid)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestUnmappedDevicesAreCountedNotGuessed(t *testing.T) {
	snap := &podresources.Snapshot{Pods: []podresources.Pod{
		holding("ns", "a", "c", "nvidia.com/gpu", "7", "nvidia9", "GPU-99999999-0000-4000-8000-000000000000", "not-an-id"),
		holding("ns", "b", "c", "nvidia.com/gpu", gpu0),
	}}
	a := Resolve(snap, node, nil, nil)
	assert.Equal(t, map[string]int{"nvidia.com/gpu": 4}, a.Unmapped)
	assert.Equal(t, 5, a.Allocated["nvidia.com/gpu"])
	assert.NotEmpty(t, a.Example)
	assert.Equal(t, []string{"ns/b"}, pods(a, gpu0))
	assert.Len(t, a.ByUUID, 1, "an unknown UUID is not taken as a GPU of this node")
}

func TestDRADevices(t *testing.T) {
	snap := &podresources.Snapshot{Pods: []podresources.Pod{
		claiming("ml", "train", "gpus", "gpu-0", "gpu-2"),
		claiming("ml", "nb", "small", "gpu-0-mig-3g40gb-9-0"),
		claiming("ml", "vm", "passthrough", "gpu-vfio-0"),
	}}
	a := Resolve(snap, node, nil, nil)
	assert.Equal(t, []string{"ml/train"}, pods(a, gpu1), "gpu-0 is minor 0: NVML index 1")
	assert.Equal(t, []string{"ml/train"}, pods(a, gpu0))
	assert.Equal(t, []string{"ml/nb"}, pods(a, migC), "the only 3g.40gb instance on minor 0")
	assert.Equal(t, "gpus", a.ByUUID[gpu1][0].Claim)
	assert.Equal(t, 3, a.Allocated["gpu.nvidia.com"], "a VFIO passthrough GPU is not this host's NVML's")
	assert.Empty(t, a.Unmapped)

	// Two instances of one profile: the name cannot tell them, the slice's uuid can.
	snap = &podresources.Snapshot{Pods: []podresources.Pod{claiming("ml", "nb", "small", "gpu-0-mig-1g10gb-19-1")}}
	a = Resolve(snap, node, nil, nil)
	assert.Equal(t, map[string]int{"gpu.nvidia.com": 1}, a.Unmapped)
	a = Resolve(snap, node, fakeSlices{"gpu-0-mig-1g10gb-19-1": migB}, nil)
	assert.Equal(t, []string{"ml/nb"}, pods(a, migB))
	assert.Equal(t, 3, a.Allocatable["gpu.nvidia.com"])
}

func TestFinishedPodsHoldNothing(t *testing.T) {
	snap := &podresources.Snapshot{
		Pods: []podresources.Pod{
			holding("ml", "done", "c", "nvidia.com/gpu", gpu0),
			holding("ml", "running", "c", "nvidia.com/gpu", gpu0),
		},
		Allocatable: map[string][]string{"nvidia.com/gpu": {gpu0, gpu1}},
	}
	a := Resolve(snap, node, nil, func(ns, name string) bool { return name == "done" })
	assert.Equal(t, []string{"ml/running"}, pods(a, gpu0))
	assert.Equal(t, 1, a.Allocated["nvidia.com/gpu"])
	assert.Equal(t, 2, a.Allocatable["nvidia.com/gpu"])
}

type fakeSlices map[string]string

func (f fakeSlices) UUID(_, _, device string) (string, bool) {
	u, ok := f[device]
	return u, ok
}
func (f fakeSlices) Devices() map[string]int { return map[string]int{"gpu.nvidia.com": len(f) + 2} }

// NVML's UUIDs are "GPU-<lower-case hex>"; a device plugin or DRA driver that writes the
// same UUID in upper case (prefix included) names the same GPU or MIG instance.
func TestUUIDsMatchWhateverTheirCase(t *testing.T) {
	lowerNode := Inventory{
		GPUs: []GPU{{UUID: strings.ToLower(gpu0), Index: 0, Minor: 2}, {UUID: strings.ToLower(gpu1), Index: 1, Minor: 0}},
		MIGs: []MIG{
			{UUID: strings.ToLower(migA), Parent: strings.ToLower(gpu1), Index: 0, GPUInstanceID: 3, Profile: "1g.10gb"},
			{UUID: strings.ToLower(migB), Parent: strings.ToLower(gpu1), Index: 1, GPUInstanceID: 5, Profile: "1g.10gb"}, // the DRA name cannot tell: the slice's uuid does
		},
	}
	lower := func(s string) string { return "GPU-" + strings.ToLower(s[4:]) }
	snap := &podresources.Snapshot{Pods: []podresources.Pod{
		holding("ns", "upper", "c", "nvidia.com/gpu", strings.ToUpper(lower(gpu0))),
		holding("ns", "replica", "c", "nvidia.com/gpu.shared", "gpu-"+strings.ToUpper(gpu1[4:])+"::1"),
		holding("ns", "mig", "c", "nvidia.com/mig-1g.10gb", strings.ToUpper(migA)),
		claiming("ns", "dra", "gpus", "gpu-0-mig-1g10gb-9-0"),
	}}
	a := Resolve(snap, lowerNode, fakeSlices{"gpu-0-mig-1g10gb-9-0": strings.ToUpper(migA)}, nil)
	assert.Equal(t, []string{"ns/upper"}, pods(a, strings.ToLower(gpu0)), "keyed by NVML's UUID")
	assert.Equal(t, []string{"ns/replica"}, pods(a, strings.ToLower(gpu1)))
	assert.Equal(t, []string{"ns/dra", "ns/mig"}, pods(a, strings.ToLower(migA)))
	assert.Empty(t, a.Unmapped)
	assert.Len(t, a.ByUUID, 3)
}

// An empty device ID is no device: not allocated, not allocatable, counted as unmapped
// (with an example for the log).
func TestAnEmptyDeviceIDIsNotAnAllocatedDevice(t *testing.T) {
	snap := &podresources.Snapshot{
		Pods:        []podresources.Pod{holding("ns", "a", "c", "nvidia.com/gpu", "", gpu0)},
		Allocatable: map[string][]string{"nvidia.com/gpu": {gpu0, gpu1, ""}},
	}
	a := Resolve(snap, node, nil, nil)
	assert.Equal(t, 1, a.Allocated["nvidia.com/gpu"])
	assert.Equal(t, 2, a.Allocatable["nvidia.com/gpu"])
	assert.Equal(t, map[string]int{"nvidia.com/gpu": 1}, a.Unmapped)
	assert.Contains(t, a.Example, "empty device ID")
	assert.Equal(t, []string{"ns/a"}, pods(a, gpu0))
}

// A GPU of this node allocated under a resource name the configuration does not list (a
// renamed nvidia.com/a100-80gb) is counted — allocated and unmapped — and named for the
// log, instead of vanishing; another resource's device that is no GPU of the node is not.
func TestAnUnlistedResourceOfThisNodesGPUsIsCounted(t *testing.T) {
	c := podresources.Container{Name: "c", Unlisted: []podresources.Device{
		{ResourceName: "nvidia.com/a100-80gb", ID: gpu0},
		{ResourceName: "nvidia.com/a100-80gb", ID: gpu1 + "::0"},
		{ResourceName: "nvidia.com/a100-80gb", ID: gpu1 + "::1"},
		{ResourceName: "example.com/vgpu", ID: "GPU-99999999-0000-4000-8000-000000000000"},
	}}
	snap := &podresources.Snapshot{Pods: []podresources.Pod{{Namespace: "ns", Name: "a", Containers: []podresources.Container{c}}}}
	a := Resolve(snap, node, nil, nil)
	assert.Equal(t, map[string]int{"nvidia.com/a100-80gb": 3}, a.Unmapped)
	assert.Equal(t, map[string]int{"nvidia.com/a100-80gb": 3}, a.Allocated)
	assert.Equal(t, map[string]string{"nvidia.com/a100-80gb": gpu0}, a.Unlisted)
	assert.Empty(t, a.Example, "reported by its own log line")
	assert.Empty(t, a.ByUUID, "not attributed until it is listed")
}
