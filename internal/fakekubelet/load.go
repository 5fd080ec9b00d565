package fakekubelet

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// File is the layout LoadPods reads.
type File struct {
	Pods        []Pod     `yaml:"pods"`
	Allocatable []Devices `yaml:"allocatable"`
}

// LoadPods reads a YAML (or JSON) file of the form
//
//	pods:
//	  - namespace: ml
//	    name: trainer-0
//	    containers:
//	      - name: trainer
//	        devices:
//	          - resourceName: nvidia.com/gpu
//	            deviceIDs: ["GPU-…", "gpu:1"]
//	allocatable:
//	  - resourceName: nvidia.com/gpu
//	    deviceIDs: [...]
//
// Device ids may be "gpu:N" or "gpu:N::R" (GPU by index); ResolveGPUIndexes
// turns those into UUIDs.
func LoadPods(path string) ([]Pod, []Devices, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("fakekubelet: %w", err)
	}
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true) // a misspelt key should fail, not serve an empty pod
	if err := dec.Decode(&f); err != nil {
		return nil, nil, fmt.Errorf("fakekubelet: %s: %w", path, err)
	}
	for _, p := range f.Pods {
		if p.Namespace == "" || p.Name == "" {
			return nil, nil, fmt.Errorf("fakekubelet: %s: every pod needs a namespace and a name", path)
		}
		for _, c := range p.Containers {
			if c.Name == "" {
				return nil, nil, fmt.Errorf("fakekubelet: %s: pod %s/%s has a container without a name", path, p.Namespace, p.Name)
			}
		}
	}
	return f.Pods, f.Allocatable, nil
}

// indexPrefix marks a device id given by GPU index instead of UUID.
const indexPrefix = "gpu:"

// ResolveGPUIndexes replaces every "gpu:N" device id by uuids[N] and
// "gpu:N::R" by uuids[N]+"::R" (a time-slicing replica), so a pods file can
// be written before the GPUs' UUIDs are known. Other ids pass unchanged.
func ResolveGPUIndexes(pods []Pod, allocatable []Devices, uuids []string) ([]Pod, []Devices, error) {
	pods, allocatable = clonePods(pods), cloneDevices(allocatable)
	resolve := func(devs []Devices) error {
		for _, d := range devs {
			for i, id := range d.DeviceIDs {
				resolved, err := resolveIndex(id, uuids)
				if err != nil {
					return err
				}
				d.DeviceIDs[i] = resolved
			}
		}
		return nil
	}
	for _, p := range pods {
		for _, c := range p.Containers {
			if err := resolve(c.Devices); err != nil {
				return nil, nil, err
			}
		}
	}
	if err := resolve(allocatable); err != nil {
		return nil, nil, err
	}
	return pods, allocatable, nil
}

func resolveIndex(id string, uuids []string) (string, error) {
	rest, ok := strings.CutPrefix(id, indexPrefix)
	if !ok {
		return id, nil
	}
	index, replica, hasReplica := strings.Cut(rest, "::")
	n, err := strconv.Atoi(index)
	if err != nil || n < 0 {
		return "", fmt.Errorf("fakekubelet: device id %q: want gpu:N or gpu:N::R", id)
	}
	if len(uuids) == 0 {
		return "", fmt.Errorf("fakekubelet: device id %q is a GPU index but no GPU UUIDs were given", id)
	}
	if n >= len(uuids) {
		return "", fmt.Errorf("fakekubelet: device id %q: GPU index %d but %d UUIDs given", id, n, len(uuids))
	}
	if !hasReplica {
		return uuids[n], nil
	}
	r, err := strconv.Atoi(replica)
	if err != nil || r < 0 {
		return "", fmt.Errorf("fakekubelet: device id %q: bad replica", id)
	}
	return uuids[n] + "::" + strconv.Itoa(r), nil
}
