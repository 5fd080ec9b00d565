package fakekubelet

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pods.yaml")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func TestLoadPods(t *testing.T) {
	path := writeFile(t, `
pods:
  - namespace: ml
    name: train
    containers:
      - name: trainer
        devices:
          - resourceName: nvidia.com/gpu
            deviceIDs: ["gpu:0", "GPU-b"]
      - name: sidecar
allocatable:
  - resourceName: nvidia.com/gpu.shared
    deviceIDs: ["gpu:1::0", "gpu:1::1"]
`)
	pods, allocatable, err := LoadPods(path)
	require.NoError(t, err)
	assert.Equal(t, []Pod{{Namespace: "ml", Name: "train", Containers: []Container{
		{Name: "trainer", Devices: []Devices{{ResourceName: "nvidia.com/gpu", DeviceIDs: []string{"gpu:0", "GPU-b"}}}},
		{Name: "sidecar"},
	}}}, pods)
	assert.Equal(t, []Devices{{ResourceName: "nvidia.com/gpu.shared", DeviceIDs: []string{"gpu:1::0", "gpu:1::1"}}}, allocatable)

	pods, allocatable, err = ResolveGPUIndexes(pods, allocatable, []string{"GPU-zero", "GPU-one"})
	require.NoError(t, err)
	assert.Equal(t, []string{"GPU-zero", "GPU-b"}, pods[0].Containers[0].Devices[0].DeviceIDs)
	assert.Equal(t, []string{"GPU-one::0", "GPU-one::1"}, allocatable[0].DeviceIDs)
}

func TestLoadPodsJSON(t *testing.T) {
	path := writeFile(t, `{"pods": [{"namespace": "a", "name": "b", "containers": [{"name": "c"}]}]}`)
	pods, _, err := LoadPods(path)
	require.NoError(t, err)
	assert.Equal(t, "b", pods[0].Name)
}

func TestLoadPodsErrors(t *testing.T) {
	for name, content := range map[string]string{
		"unknown field": "pods:\n  - namespace: a\n    name: b\n    containerz: []\n",
		"no pod name":   "pods:\n  - namespace: a\n",
		"no container":  "pods:\n  - namespace: a\n    name: b\n    containers:\n      - devices: []\n",
		"not yaml":      "pods: [\n",
		"wrong type":    "pods: 3\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := LoadPods(writeFile(t, content))
			assert.Error(t, err)
		})
	}
	_, _, err := LoadPods(filepath.Join(t.TempDir(), "missing.yaml"))
	assert.Error(t, err)
}

func TestResolveGPUIndexesErrors(t *testing.T) {
	uuids := []string{"GPU-zero"}
	for _, id := range []string{"gpu:1", "gpu:-1", "gpu:x", "gpu:", "gpu:0::", "gpu:0::-1", "gpu:0::y"} {
		_, _, err := ResolveGPUIndexes(nil, []Devices{{ResourceName: "r", DeviceIDs: []string{id}}}, uuids)
		assert.ErrorContains(t, err, `"`+id+`"`, id)
	}
	_, _, err := ResolveGPUIndexes(nil, []Devices{{ResourceName: "r", DeviceIDs: []string{"gpu:0"}}}, nil)
	assert.Error(t, err, "index ids without UUIDs")
}

func TestResolveGPUIndexesDoesNotModifyInput(t *testing.T) {
	in := []Devices{{ResourceName: "r", DeviceIDs: []string{"gpu:0"}}}
	_, out, err := ResolveGPUIndexes(nil, in, []string{"GPU-zero"})
	require.NoError(t, err)
	assert.Equal(t, "GPU-zero", out[0].DeviceIDs[0])
	assert.Equal(t, "gpu:0", in[0].DeviceIDs[0])
}
