// Package allocation maps what the kubelet allocated — device-plugin IDs in any scheme and
// DRA claim devices — to the GPUs and MIG instances NVML reports, and counts what is
// allocated, allocatable, and what maps to nothing. It is pure: the kubelet snapshot, the
// node's GPUs (from the receiver's batch) and the DRA ResourceSlices come in as values.
package allocation // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/allocation"

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/podresources"
)

// GPU is one physical GPU of the node as the receiver reports it.
type GPU struct {
	UUID  string
	Index int // NVML index; -1 when unknown
	Minor int // /dev/nvidia<minor>; -1 when unknown
}

// MIG is one MIG instance as the receiver reports it.
type MIG struct {
	UUID   string
	Parent string // the GPU's UUID
	// Index is the MIG device's index on its GPU (the order NVML enumerates them, which
	// NVIDIA's index-strategy IDs use); -1 when unknown.
	Index         int
	GPUInstanceID int    // -1 when unknown
	Profile       string // e.g. "1g.10gb"
}

// Inventory is the node's GPUs and MIG instances.
type Inventory struct {
	GPUs []GPU
	MIGs []MIG
}

// Slices answers what the DRA drivers published in this node's ResourceSlices.
type Slices interface {
	// UUID is the "uuid" attribute of a device of a pool of a driver.
	UUID(driver, pool, device string) (string, bool)
	// Devices is how many devices each driver publishes for this node (nil until the
	// slices have been read).
	Devices() map[string]int
}

// Holder is a container that the kubelet allocated a GPU or MIG instance to.
type Holder struct {
	Namespace, Pod, Container string
	// ResourceName is the device plugin's resource name, or the DRA driver's name.
	ResourceName string
	// Claim is the DRA ResourceClaim, empty for device-plugin allocations.
	Claim string
}

// Allocation is a snapshot mapped to the node's GPUs.
type Allocation struct {
	// ByUUID lists, per GPU or MIG UUID, the containers holding it (sorted, distinct).
	ByUUID map[string][]Holder
	// Allocated counts distinct devices handed out to pods still running, per resource
	// name (device plugins) or driver name (DRA).
	Allocated map[string]int
	// Allocatable counts the devices the node can hand out, per resource or driver name;
	// a name is absent when unknown.
	Allocatable map[string]int
	// Unmapped counts allocated devices that map to no GPU or MIG instance of this node,
	// per resource or driver name — an empty device ID among them, and the devices of
	// Unlisted — ; Example is one of them (not of Unlisted), for the log.
	Unmapped map[string]int
	Example  string
	// Unlisted names, per resource name the configuration does not list, a device ID of
	// it that is one of this node's GPUs or MIG instances: the resource carries GPUs and
	// wants adding to kubelet.resource_names. Counted as allocated and unmapped.
	Unlisted map[string]string
}

// Finished tells a pod that has finished (Succeeded or Failed): older kubelets still list
// them, and a finished pod holds no GPU. nil means none is known to have finished.
type Finished func(namespace, name string) bool

// Resolve maps snap onto inv. dra may be nil (no DRA, or no API access): DRA devices
// named "gpu-<minor>" are then mapped by minor number.
func Resolve(snap *podresources.Snapshot, inv Inventory, dra Slices, finished Finished) Allocation {
	a := Allocation{ByUUID: map[string][]Holder{}, Allocated: map[string]int{}, Allocatable: map[string]int{}, Unmapped: map[string]int{}, Unlisted: map[string]string{}}
	if snap == nil {
		return a
	}
	idx := newIndex(inv)
	allocated := map[string]map[string]bool{} // resource → distinct device ids
	unmapped := map[string]map[string]bool{}
	held := map[string]map[Holder]bool{}
	note := func(set map[string]map[string]bool, res, id string) {
		if set[res] == nil {
			set[res] = map[string]bool{}
		}
		set[res][id] = true
	}
	for _, pod := range snap.Pods {
		if finished != nil && finished(pod.Namespace, pod.Name) {
			continue
		}
		for _, ctr := range pod.Containers {
			for _, d := range ctr.Devices {
				if d.ID == "" {
					// No device at all (a plugin's or the kubelet's bug): nothing allocated,
					// and nothing to attribute; counted so that it is seen.
					note(unmapped, d.ResourceName, d.ID)
					a.Example = cmp.Or(a.Example, d.ResourceName+" (an empty device ID)")
					continue
				}
				note(allocated, d.ResourceName, d.ID)
				uuid, ok := idx.deviceID(d.ID)
				if !ok {
					note(unmapped, d.ResourceName, d.ID)
					a.Example = cmp.Or(a.Example, d.ResourceName+" "+d.ID)
					continue
				}
				addHolder(held, uuid, Holder{Namespace: pod.Namespace, Pod: pod.Name, Container: ctr.Name, ResourceName: d.ResourceName})
			}
			for _, d := range ctr.Unlisted {
				if _, ok := idx.deviceID(d.ID); !ok {
					continue // not a GPU of this node: another vendor's, or nothing to report
				}
				note(allocated, d.ResourceName, d.ID)
				note(unmapped, d.ResourceName, d.ID)
				if _, ok := a.Unlisted[d.ResourceName]; !ok {
					a.Unlisted[d.ResourceName] = d.ID
				}
			}
			for _, c := range ctr.Claims {
				if draVFIO.MatchString(c.Device) {
					continue // passed through to a VM: not a GPU of this host's NVML
				}
				key := c.Pool + "/" + c.Device
				if c.Device == "" {
					note(unmapped, c.Driver, key)
					a.Example = cmp.Or(a.Example, c.Driver+" (an empty device name)")
					continue
				}
				note(allocated, c.Driver, key)
				uuid, ok := idx.claimDevice(c, dra)
				if !ok {
					note(unmapped, c.Driver, key)
					a.Example = cmp.Or(a.Example, c.Driver+" "+key)
					continue
				}
				addHolder(held, uuid, Holder{Namespace: pod.Namespace, Pod: pod.Name, Container: ctr.Name, ResourceName: c.Driver, Claim: c.Claim})
			}
		}
	}
	for uuid, set := range held {
		list := make([]Holder, 0, len(set))
		for h := range set {
			list = append(list, h)
		}
		slices.SortFunc(list, compareHolders)
		a.ByUUID[uuid] = list
	}
	for res, ids := range allocated {
		a.Allocated[res] = len(ids)
	}
	for res, ids := range unmapped {
		a.Unmapped[res] = len(ids)
	}
	if snap.Allocatable != nil {
		for res, ids := range snap.Allocatable {
			distinct := map[string]bool{}
			for _, id := range ids {
				if id != "" {
					distinct[id] = true
				}
			}
			a.Allocatable[res] = len(distinct)
			// An explicit 0 tells "none handed out" from "unknown".
			a.Allocated[res] += 0
		}
	}
	if dra != nil {
		for driver, n := range dra.Devices() {
			a.Allocatable[driver] = n
			a.Allocated[driver] += 0
		}
	}
	return a
}

func addHolder(held map[string]map[Holder]bool, uuid string, h Holder) {
	if held[uuid] == nil {
		held[uuid] = map[Holder]bool{}
	}
	held[uuid][h] = true
}

func compareHolders(a, b Holder) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Pod, b.Pod),
		cmp.Compare(a.Container, b.Container), cmp.Compare(a.ResourceName, b.ResourceName), cmp.Compare(a.Claim, b.Claim))
}

// index finds GPUs and MIG instances by the numbers device names use.
type index struct {
	uuids     map[string]string // lower-cased UUID → the UUID as NVML reports it
	byIndex   map[int]string
	byMinor   map[int]string
	migByIdx  map[[2]int]string // (GPU index, MIG index) → MIG UUID
	migByGI   map[[2]int]string // (GPU minor, GPU instance id) → MIG UUID
	migsByGPU map[int][]MIG     // GPU minor → its MIG instances
}

func newIndex(inv Inventory) index {
	x := index{uuids: map[string]string{}, byIndex: map[int]string{}, byMinor: map[int]string{},
		migByIdx: map[[2]int]string{}, migByGI: map[[2]int]string{}, migsByGPU: map[int][]MIG{}}
	gpuByUUID := map[string]GPU{}
	for _, g := range inv.GPUs {
		x.uuids[strings.ToLower(g.UUID)] = g.UUID
		gpuByUUID[g.UUID] = g
		if g.Index >= 0 {
			x.byIndex[g.Index] = g.UUID
		}
		if g.Minor >= 0 {
			x.byMinor[g.Minor] = g.UUID
		}
	}
	for _, m := range inv.MIGs {
		x.uuids[strings.ToLower(m.UUID)] = m.UUID
		parent, ok := gpuByUUID[m.Parent]
		if !ok {
			continue
		}
		if parent.Index >= 0 && m.Index >= 0 {
			x.migByIdx[[2]int{parent.Index, m.Index}] = m.UUID
		}
		if parent.Minor >= 0 {
			if m.GPUInstanceID >= 0 {
				x.migByGI[[2]int{parent.Minor, m.GPUInstanceID}] = m.UUID
			}
			x.migsByGPU[parent.Minor] = append(x.migsByGPU[parent.Minor], m)
		}
	}
	return x
}

// uuid is this node's GPU or MIG instance with that UUID, whatever the letter case it
// is written in, as NVML reports it.
func (x index) uuid(s string) (string, bool) {
	uuid, ok := x.uuids[strings.ToLower(s)]
	return uuid, ok
}

// deviceID maps a device-plugin ID, in any scheme, to a UUID of this node.
func (x index) deviceID(raw string) (string, bool) {
	id, err := podresources.ParseDeviceID(raw)
	if err != nil {
		return "", false
	}
	var uuid string
	switch id.Scheme {
	case podresources.SchemeUUID:
		return x.uuid(id.UUID)
	case podresources.SchemeIndex:
		if id.Kind == podresources.KindMIG {
			uuid = x.migByIdx[[2]int{id.GPU, id.MIG}]
		} else {
			uuid = x.byIndex[id.GPU]
		}
	case podresources.SchemeGKE:
		if id.Kind == podresources.KindMIG {
			uuid = x.migByGI[[2]int{id.GPU, id.MIG}]
		} else {
			uuid = x.byMinor[id.GPU]
		}
	}
	return uuid, uuid != ""
}

// NVIDIA's DRA driver (gpu.nvidia.com) names a whole GPU "gpu-<minor>" and a MIG device
// "gpu-<parent minor>-mig-<profile>-<GI profile id>-<placement start>", the profile with
// its dots removed and lower-cased as an RFC 1123 label ("1g.24gb+me" → "1g24gb-me"), so
// it may hold dashes; "gpu-vfio-<n>" is a GPU passed through to a VM, which the host's
// NVML does not see.
var (
	draGPU  = regexp.MustCompile(`^gpu-([0-9]+)$`)
	draMIG  = regexp.MustCompile(`^gpu-([0-9]+)-mig-(.+)-([0-9]+)-([0-9]+)$`)
	draVFIO = regexp.MustCompile(`^gpu-vfio-[0-9]+$`)
)

// draProfile is a MIG profile as NVIDIA's DRA driver writes it in device names.
func draProfile(nvml string) string {
	return strings.ReplaceAll(strings.ReplaceAll(strings.ToLower(nvml), ".", ""), "+", "-")
}

// claimDevice maps a DRA device to a UUID of this node: by the "uuid" attribute its
// driver published in the ResourceSlice, else by the driver's naming convention.
func (x index) claimDevice(c podresources.ClaimDevice, s Slices) (string, bool) {
	if s != nil {
		if uuid, ok := s.UUID(c.Driver, c.Pool, c.Device); ok {
			if uuid, ok := x.uuid(uuid); ok {
				return uuid, true
			}
		}
	}
	if m := draGPU.FindStringSubmatch(c.Device); m != nil {
		minor, _ := strconv.Atoi(m[1])
		uuid, ok := x.byMinor[minor]
		return uuid, ok
	}
	if m := draMIG.FindStringSubmatch(c.Device); m != nil {
		// Without the slice's uuid, a MIG device is known only when its GPU has exactly one
		// instance of that profile: placement is not something NVML's MIG UUID tells.
		minor, _ := strconv.Atoi(m[1])
		var match []string
		for _, mig := range x.migsByGPU[minor] {
			if draProfile(mig.Profile) == m[2] {
				match = append(match, mig.UUID)
			}
		}
		if len(match) == 1 {
			return match[0], true
		}
	}
	return "", false
}

// String is for logs and test failures.
func (h Holder) String() string {
	s := fmt.Sprintf("%s/%s/%s (%s)", h.Namespace, h.Pod, h.Container, h.ResourceName)
	if h.Claim != "" {
		s += " claim " + h.Claim
	}
	return s
}
