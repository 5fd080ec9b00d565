package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readSample(t *testing.T, name string) smiSample {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	s, err := parseSMI(data)
	require.NoError(t, err)
	return s
}

// An R535 A100 in MIG mode (nvsmi_device_v12): identity, framebuffer with its
// reservation, the instances' framebuffer, power from gpu_power_readings.
func TestParseSMIA100MIG(t *testing.T) {
	s := readSample(t, "telegraf-a100-sxm4-v12.xml")
	assert.Equal(t, "535.54.03", s.Driver)
	require.Len(t, s.GPUs, 1)
	g := s.GPUs[0]
	assert.Equal(t, "NVIDIA A100-SXM4-80GB", g.Model)
	assert.Equal(t, "GPU-513536b6-7d19-9063-b049-1e69664bb298", g.UUID)
	assert.Equal(t, "00000000:01:00.0", g.BusID)
	require.NotNil(t, g.Minor)
	assert.Equal(t, 1.0, *g.Minor)
	assert.Equal(t, "Enabled", g.MIG)
	assert.Equal(t, map[string]float64{
		vMemTotal: 81920, vMemReserved: 869, vMemUsed: 50,
		vTempGPU: 27, vTempMemory: 44,
		vPower: 67.03, vPowerLimit: 500,
		vClockSM: 1275, vClockGraphics: 1275, vClockMemory: 1593,
		vMaxSM: 1410, vMaxGraphics: 1410, vMaxMemory: 1593,
	}, g.Values)
	assert.Equal(t, "power_draw", g.PowerSource)
	require.Len(t, g.MIGs, 4)
	for i, m := range g.MIGs {
		assert.Equal(t, 3+i, m.GPUInstance)
		assert.Equal(t, 0, m.ComputeInstance)
		assert.Equal(t, map[string]float64{vMemTotal: 19968, vMemReserved: 0, vMemUsed: 12}, m.Values)
	}
	assert.Empty(t, g.Processes)
}

// An R515 A10G (nvsmi_device_v11): power_readings with enforced_power_limit, memory
// temperature N/A, MIG N/A, a graphics process outside MIG.
func TestParseSMIA10GLegacyPower(t *testing.T) {
	s := readSample(t, "telegraf-a10g.xml")
	require.Len(t, s.GPUs, 1)
	g := s.GPUs[0]
	assert.Equal(t, "NVIDIA A10G", g.Model)
	assert.Equal(t, "N/A", g.MIG)
	assert.Equal(t, 25.58, g.Values[vPower])
	assert.Equal(t, "power_draw", g.PowerSource)
	assert.Equal(t, 300.0, g.Values[vPowerLimit])
	assert.NotContains(t, g.Values, vTempMemory, "N/A is no value")
	assert.Equal(t, []smiProcess{{PID: 725, Type: "G", Name: "/usr/lib/xorg/Xorg", MemoryMiB: ptr(22.0)}}, g.Processes)
}

// An R595 GPU (nvsmi_device_v13): the average draw is the one compared (the receiver's
// 1-second average), deprecated elements are no values, four processes of three types.
func TestParseSMIV13AveragePowerAndProcesses(t *testing.T) {
	s := readSample(t, "telegraf-rtx-4000-sff-ada-v13.xml")
	require.Len(t, s.GPUs, 1)
	g := s.GPUs[0]
	assert.Equal(t, 8.81, g.Values[vPower])
	assert.Equal(t, "average_power_draw", g.PowerSource)
	assert.Equal(t, 70.0, g.Values[vPowerLimit])
	var pids []int
	var types []string
	for _, p := range g.Processes {
		pids = append(pids, p.PID)
		types = append(types, p.Type)
		assert.Nil(t, p.GPUInstance, "N/A outside MIG")
	}
	assert.Equal(t, []int{1842, 3190, 4937, 34626}, pids)
	assert.Equal(t, []string{"G", "G", "C", "C+G"}, types)
	assert.Equal(t, 183.0, *g.Processes[3].MemoryMiB)
}

func TestParseSMIRejectsOtherXML(t *testing.T) {
	_, err := parseSMI([]byte(`<?xml version="1.0"?><something/>`))
	assert.Error(t, err)
}

func TestParseLGI(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "mig-lgi-a100-80gb.txt"))
	require.NoError(t, err)
	assert.Equal(t, map[migProfileKey]string{
		{0, 3}: "1g.20gb", {0, 4}: "1g.20gb", {0, 5}: "1g.20gb", {0, 6}: "1g.20gb",
		{1, 1}: "7g.80gb",
	}, parseLGI(string(data)))
	assert.Empty(t, parseLGI("No MIG-enabled devices found."))
}

func ptr[T any](v T) *T { return &v }
