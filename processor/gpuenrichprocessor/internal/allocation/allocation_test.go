package allocation

import (
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
