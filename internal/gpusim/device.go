package gpusim

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

const (
	mib = 1024 * 1024
	// sampleBufferLen is how many utilization samples the simulated driver keeps, one per
	// simulated second (the real driver keeps a similar short ring buffer).
	sampleBufferLen = 120
)

// Device is one simulated GPU.
type Device struct {
	*server.Device

	sim   *Simulator
	index int
	uuid  string
	busID string
	name  string
	total uint64 // framebuffer bytes
	links int    // NVLink links (nvlinkLinks), looked up once: every link field asks
	lost  atomic.Bool
	migs  []*MigDevice
	// migLayouts counts the MIG layouts set up on the GPU.
	migLayouts int

	mu sync.Mutex
	// energy is integrated second by second: energyMJ holds the energy of the whole
	// seconds [0, energySeconds).
	energySeconds int64
	energyMJ      float64
	// pcie integrates the PCIe traffic each way (transmit, receive) the same way.
	pcie [2]integral
}

// integral is a rate integrated second by second: sum holds the whole seconds
// [0, seconds).
type integral struct {
	seconds int64
	sum     float64
}

// at is the integral up to t of rate, which is constant within each whole second.
func (in *integral) at(t float64, rate func(second float64) float64) float64 {
	whole := int64(math.Floor(t))
	if whole < in.seconds { // the clock went backwards: start over
		in.seconds, in.sum = 0, 0
	}
	for ; in.seconds < whole; in.seconds++ {
		in.sum += rate(float64(in.seconds))
	}
	return in.sum + (t-float64(whole))*rate(float64(whole))
}

var _ nvml.Device = (*Device)(nil)

func newDevice(s *Simulator, md *server.Device, index int, opts Options) *Device {
	d := &Device{
		Device: md,
		sim:    s,
		index:  index,
		uuid:   deterministicUUID(opts, index),
		busID:  fmt.Sprintf("00000000:%02X:00.0", s.machine.sys.busNumbers[index%8]),
		name:   strings.TrimPrefix(md.Config.Name, "Mock "),
		total:  md.Config.MemoryMB * mib,
		links:  s.machine.sys.nvlinks,
	}
	// Keep the mock server's own look-ups (by UUID, by bus id) consistent with ours.
	md.UUID = d.uuid
	md.PciBusID = d.busID
	return d
}

// read returns the simulated time and the scenario's reading for it. A lost GPU answers
// ERROR_GPU_IS_LOST to everything.
func (d *Device) read(call string) (float64, reading, nvml.Return) {
	d.sim.count(call)
	if d.lost.Load() {
		return 0, reading{}, nvml.ERROR_GPU_IS_LOST
	}
	t := d.sim.elapsed()
	r := d.sim.scenario(d.sim.machine, d.index, t)
	if r.lost {
		return 0, reading{}, nvml.ERROR_GPU_IS_LOST
	}
	return t, r, nvml.SUCCESS
}

// lostNow reports whether the GPU is off the bus now, without counting a call.
func (d *Device) lostNow() bool {
	return d.lost.Load() || d.sim.scenario(d.sim.machine, d.index, d.sim.elapsed()).lost
}

func (d *Device) ret(call string) nvml.Return {
	_, _, r := d.read(call)
	return r
}

// GetUUID returns the GPU's (deterministic) UUID.
func (d *Device) GetUUID() (string, nvml.Return) {
	if r := d.ret("DeviceGetUUID"); r != nvml.SUCCESS {
		return "", r
	}
	return d.uuid, nvml.SUCCESS
}

// GetName returns the model name.
func (d *Device) GetName() (string, nvml.Return) {
	if r := d.ret("DeviceGetName"); r != nvml.SUCCESS {
		return "", r
	}
	return d.name, nvml.SUCCESS
}

// GetSerial returns a deterministic board serial number.
func (d *Device) GetSerial() (string, nvml.Return) {
	if r := d.ret("DeviceGetSerial"); r != nvml.SUCCESS {
		return "", r
	}
	return fmt.Sprintf("16549230%05d", 10*d.index+int(d.sim.seed%10)), nvml.SUCCESS
}

// GetVbiosVersion returns the VBIOS version of the system's GPUs.
func (d *Device) GetVbiosVersion() (string, nvml.Return) {
	if r := d.ret("DeviceGetVbiosVersion"); r != nvml.SUCCESS {
		return "", r
	}
	return d.sim.machine.sys.vbios, nvml.SUCCESS
}

// GetInforomImageVersion returns the InfoROM image version.
func (d *Device) GetInforomImageVersion() (string, nvml.Return) {
	if r := d.ret("DeviceGetInforomImageVersion"); r != nvml.SUCCESS {
		return "", r
	}
	return "G520.0200.00.05", nvml.SUCCESS
}

// GetInforomVersion returns the version of an InfoROM object; newer boards keep no
// separate power object (NOT_SUPPORTED, as on real Hopper boards).
func (d *Device) GetInforomVersion(obj nvml.InforomObject) (string, nvml.Return) {
	if r := d.ret("DeviceGetInforomVersion"); r != nvml.SUCCESS {
		return "", r
	}
	switch obj {
	case nvml.INFOROM_OEM:
		return "2.1", nvml.SUCCESS
	case nvml.INFOROM_ECC:
		return "7.16", nvml.SUCCESS
	}
	return "", nvml.ERROR_NOT_SUPPORTED
}

// GetIndex returns the NVML index.
func (d *Device) GetIndex() (int, nvml.Return) {
	if r := d.ret("DeviceGetIndex"); r != nvml.SUCCESS {
		return 0, r
	}
	return d.index, nvml.SUCCESS
}

// GetMinorNumber returns the /dev/nvidiaN minor number, which differs from the index on
// some systems (see system.minors).
func (d *Device) GetMinorNumber() (int, nvml.Return) {
	if r := d.ret("DeviceGetMinorNumber"); r != nvml.SUCCESS {
		return 0, r
	}
	return d.sim.machine.sys.minor(d.index), nvml.SUCCESS
}

// GetPciInfo returns the PCI location, with the bus id string the mock server leaves empty.
func (d *Device) GetPciInfo() (nvml.PciInfo, nvml.Return) {
	if r := d.ret("DeviceGetPciInfo"); r != nvml.SUCCESS {
		return nvml.PciInfo{}, r
	}
	info := nvml.PciInfo{
		Bus:         d.sim.machine.sys.busNumbers[d.index%8],
		PciDeviceId: d.Config.PciDeviceId,
	}
	for i := 0; i < len(d.busID) && i < len(info.BusId)-1; i++ {
		info.BusId[i] = int8(d.busID[i])
	}
	return info, nvml.SUCCESS
}

// memory splits the framebuffer the way R510+ drivers report it (measured on an H200 with
// driver 580): total = used + reserved + free, where used is what processes allocated and
// reserved is the driver's own ~0.4 %.
func (d *Device) memory(r reading) (used, reserved, free uint64) {
	reserved = d.total / 234
	used = uint64(r.fbUsedFraction * float64(d.total))
	used = min(used, d.total-reserved)
	return used, reserved, d.total - reserved - used
}

// migMemory is the whole GPU's framebuffer in MIG mode: the sum over its GPU instances.
// nvml.h: "In MIG mode, if device handle is provided, the API returns aggregate
// information, only if the caller has appropriate privileges."
func (d *Device) migMemory() (used, reserved, free uint64, ret nvml.Return) {
	if !d.sim.migMonitor {
		return 0, 0, 0, nvml.ERROR_NO_PERMISSION
	}
	seen := map[*gpuInstance]bool{}
	for _, m := range d.liveMIGs() {
		if !seen[m.gi] {
			seen[m.gi] = true
			u, r, _ := m.gi.memory()
			used, reserved = used+u, reserved+r
		}
	}
	reserved += d.total / 234
	return used, reserved, d.total - used - reserved, nvml.SUCCESS
}

// GetMemoryInfo returns framebuffer total/used/free in bytes; the v1 call counts the
// driver's reservation as used.
func (d *Device) GetMemoryInfo() (nvml.Memory, nvml.Return) {
	_, r, ret := d.read("DeviceGetMemoryInfo")
	if ret != nvml.SUCCESS {
		return nvml.Memory{}, ret
	}
	used, reserved, free := d.memory(r)
	if d.migEnabled() {
		if used, reserved, free, ret = d.migMemory(); ret != nvml.SUCCESS {
			return nvml.Memory{}, ret
		}
	}
	return nvml.Memory{Total: d.total, Used: used + reserved, Free: free}, nvml.SUCCESS
}

// GetMemoryInfo_v2 reports the driver's reservation apart from Used.
func (d *Device) GetMemoryInfo_v2() (nvml.Memory_v2, nvml.Return) {
	_, r, ret := d.read("DeviceGetMemoryInfo_v2")
	if ret != nvml.SUCCESS {
		return nvml.Memory_v2{}, ret
	}
	used, reserved, free := d.memory(r)
	if d.migEnabled() {
		if used, reserved, free, ret = d.migMemory(); ret != nvml.SUCCESS {
			return nvml.Memory_v2{}, ret
		}
	}
	return nvml.Memory_v2{Version: nvml.STRUCT_VERSION(nvml.Memory_v2{}, 2), Total: d.total, Reserved: reserved, Used: used, Free: free}, nvml.SUCCESS
}

// GetUtilizationRates returns the instantaneous GPU and memory-copy utilization in percent
// (NOT_SUPPORTED in MIG mode, as on real GPUs).
func (d *Device) GetUtilizationRates() (nvml.Utilization, nvml.Return) {
	_, r, ret := d.read("DeviceGetUtilizationRates")
	if ret != nvml.SUCCESS {
		return nvml.Utilization{}, ret
	}
	if d.migEnabled() {
		return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED
	}
	return nvml.Utilization{Gpu: uint32(math.Round(r.utilization)), Memory: uint32(math.Round(r.memoryCopyUtil))}, nvml.SUCCESS
}

// GetEncoderUtilization returns encoder utilization (percent) and its sampling period (µs).
// GPUs without NVENC (A100, H100, H200, B200) answer 0 %, as `nvidia-smi -q` shows them
// ("Encoder : 0 %" outside MIG); in MIG mode the device-level value is not supported.
func (d *Device) GetEncoderUtilization() (uint32, uint32, nvml.Return) {
	_, r, ret := d.read("DeviceGetEncoderUtilization")
	if ret != nvml.SUCCESS {
		return 0, 0, ret
	}
	if d.migEnabled() {
		return 0, 0, nvml.ERROR_NOT_SUPPORTED
	}
	return uint32(math.Round(d.encoderUtil(r))), 1_000_000, nvml.SUCCESS
}

// encoderUtil is 0 without NVENC; with it, the scenario's video work encodes too.
func (d *Device) encoderUtil(r reading) float64 {
	if d.sim.machine.sys.nvencs == 0 {
		return 0
	}
	return 0.6 * r.decoderUtil
}

// GetDecoderUtilization returns decoder utilization (percent) and its sampling period (µs).
func (d *Device) GetDecoderUtilization() (uint32, uint32, nvml.Return) {
	_, r, ret := d.read("DeviceGetDecoderUtilization")
	if ret != nvml.SUCCESS {
		return 0, 0, ret
	}
	if d.migEnabled() {
		return 0, 0, nvml.ERROR_NOT_SUPPORTED
	}
	return uint32(math.Round(r.decoderUtil)), 1_000_000, nvml.SUCCESS
}

// GetSamples returns the utilization samples newer than lastSeen (µs since the epoch), one
// per simulated second, from a ring buffer of sampleBufferLen.
func (d *Device) GetSamples(kind nvml.SamplingType, lastSeen uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
	t, _, ret := d.read("DeviceGetSamples")
	if ret != nvml.SUCCESS {
		return 0, nil, ret
	}
	if d.migEnabled() {
		return 0, nil, nvml.ERROR_NOT_SUPPORTED
	}
	var pick func(reading) float64
	switch kind {
	case nvml.GPU_UTILIZATION_SAMPLES:
		pick = func(r reading) float64 { return r.utilization }
	case nvml.MEMORY_UTILIZATION_SAMPLES:
		pick = func(r reading) float64 { return r.memoryCopyUtil }
	case nvml.DEC_UTILIZATION_SAMPLES:
		pick = func(r reading) float64 { return r.decoderUtil }
	case nvml.ENC_UTILIZATION_SAMPLES:
		pick = d.encoderUtil
	default:
		return 0, nil, nvml.ERROR_NOT_SUPPORTED
	}
	startMicros := uint64(d.sim.start.UnixMicro())
	last := int64(math.Floor(t))
	first := max(0, last-sampleBufferLen+1)
	samples := make([]nvml.Sample, 0, min(sampleBufferLen, last-first+1))
	for k := first; k <= last; k++ {
		ts := startMicros + uint64(k)*1_000_000
		if ts <= lastSeen {
			continue
		}
		var s nvml.Sample
		s.TimeStamp = ts
		binary.LittleEndian.PutUint32(s.SampleValue[:4], uint32(math.Round(pick(d.sim.scenario(d.sim.machine, d.index, float64(k))))))
		samples = append(samples, s)
	}
	return nvml.VALUE_TYPE_UNSIGNED_INT, samples, nvml.SUCCESS
}

// GetTemperature returns the GPU die temperature in °C (deprecated from R570 on, still
// answered).
func (d *Device) GetTemperature(sensor nvml.TemperatureSensors) (uint32, nvml.Return) {
	_, r, ret := d.read("DeviceGetTemperature")
	if ret != nvml.SUCCESS {
		return 0, ret
	}
	if sensor != nvml.TEMPERATURE_GPU {
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	if d.sim.machine.sys.vgpuGuest {
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	return uint32(math.Round(r.gpuTempC)), nvml.SUCCESS
}

// TemperatureV1 answers nvmlDeviceGetTemperatureV with a version 1 struct, which exists
// from R570 on. go-nvml's GetTemperatureV returns a handler that calls the C library
// itself, so the simulator offers the call under this name (nvmlclient uses it for
// simulated devices); ERROR_FUNCTION_NOT_FOUND on older drivers.
func (d *Device) TemperatureV1(sensor nvml.TemperatureSensors) (nvml.Temperature, nvml.Return) {
	_, r, ret := d.read("DeviceGetTemperatureV")
	if ret != nvml.SUCCESS {
		return nvml.Temperature{}, ret
	}
	if !d.sim.driver.hasTemperatureV() {
		return nvml.Temperature{}, nvml.ERROR_FUNCTION_NOT_FOUND
	}
	if sensor != nvml.TEMPERATURE_GPU {
		return nvml.Temperature{}, nvml.ERROR_INVALID_ARGUMENT
	}
	if d.sim.machine.sys.vgpuGuest {
		return nvml.Temperature{}, nvml.ERROR_NOT_SUPPORTED
	}
	return nvml.Temperature{Version: nvml.STRUCT_VERSION(nvml.Temperature{}, 1), SensorType: uint32(sensor), Temperature: int32(math.Round(r.gpuTempC))}, nvml.SUCCESS
}

// GetPowerUsage returns the board power draw in mW.
func (d *Device) GetPowerUsage() (uint32, nvml.Return) {
	_, r, ret := d.read("DeviceGetPowerUsage")
	if ret != nvml.SUCCESS {
		return 0, ret
	}
	if d.sim.machine.sys.vgpuGuest {
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	return uint32(math.Round(r.powerW * 1000)), nvml.SUCCESS
}

// GetEnforcedPowerLimit returns the enforced power limit in mW.
func (d *Device) GetEnforcedPowerLimit() (uint32, nvml.Return) {
	if ret := d.ret("DeviceGetEnforcedPowerLimit"); ret != nvml.SUCCESS {
		return 0, ret
	}
	return uint32(d.sim.machine.sys.powerLimitW * 1000), nvml.SUCCESS
}

// energyMillijoules integrates the scenario's power draw second by second up to t.
func (d *Device) energyMillijoules(t float64) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	whole := int64(math.Floor(t))
	if whole < d.energySeconds { // the clock went backwards: start over
		d.energySeconds, d.energyMJ = 0, 0
	}
	for ; d.energySeconds < whole; d.energySeconds++ {
		d.energyMJ += d.sim.scenario(d.sim.machine, d.index, float64(d.energySeconds)).powerW * 1000
	}
	partial := (t - float64(whole)) * d.sim.scenario(d.sim.machine, d.index, float64(whole)).powerW * 1000
	return uint64(d.energyMJ + partial)
}

// GetTotalEnergyConsumption returns the energy used since the simulator started, in mJ.
func (d *Device) GetTotalEnergyConsumption() (uint64, nvml.Return) {
	t, _, ret := d.read("DeviceGetTotalEnergyConsumption")
	if ret != nvml.SUCCESS {
		return 0, ret
	}
	if d.sim.machine.sys.vgpuGuest {
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	return d.energyMillijoules(t), nvml.SUCCESS
}

// GetClockInfo returns the current SM, graphics or memory clock in MHz.
func (d *Device) GetClockInfo(clock nvml.ClockType) (uint32, nvml.Return) {
	_, r, ret := d.read("DeviceGetClockInfo")
	if ret != nvml.SUCCESS {
		return 0, ret
	}
	switch clock {
	case nvml.CLOCK_SM, nvml.CLOCK_GRAPHICS:
		return r.smClockMHz, nvml.SUCCESS
	case nvml.CLOCK_MEM:
		return d.sim.machine.sys.memClock, nvml.SUCCESS
	}
	return 0, nvml.ERROR_NOT_SUPPORTED
}

// GetMaxClockInfo returns the highest SM, graphics or memory clock in MHz.
func (d *Device) GetMaxClockInfo(clock nvml.ClockType) (uint32, nvml.Return) {
	if ret := d.ret("DeviceGetMaxClockInfo"); ret != nvml.SUCCESS {
		return 0, ret
	}
	switch clock {
	case nvml.CLOCK_SM, nvml.CLOCK_GRAPHICS:
		return d.sim.machine.sys.smClockMax, nvml.SUCCESS
	case nvml.CLOCK_MEM:
		return d.sim.machine.sys.memClock, nvml.SUCCESS
	}
	return 0, nvml.ERROR_NOT_SUPPORTED
}

func (d *Device) pcieReplays(t float64) uint64 {
	r := d.sim.scenario(d.sim.machine, d.index, t)
	return uint64(t / 3600 * r.pcieReplaysPerHour * float64(1+d.index%3))
}

// GetPcieReplayCounter returns the cumulative PCIe replay count.
func (d *Device) GetPcieReplayCounter() (int, nvml.Return) {
	t, _, ret := d.read("DeviceGetPcieReplayCounter")
	if ret != nvml.SUCCESS {
		return 0, ret
	}
	if d.sim.machine.sys.vgpuGuest {
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	return int(d.pcieReplays(t)), nvml.SUCCESS
}

// GetPcieThroughput returns the PCIe throughput each way in KB/s, measured by the driver
// over its last 20 ms (nvml.h); "not supported in virtual machines running virtual GPU".
func (d *Device) GetPcieThroughput(counter nvml.PcieUtilCounter) (uint32, nvml.Return) {
	t, _, ret := d.read("DeviceGetPcieThroughput")
	if ret != nvml.SUCCESS {
		return 0, ret
	}
	if d.sim.machine.sys.vgpuGuest {
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	var transmit bool
	switch counter {
	case nvml.PCIE_UTIL_TX_BYTES:
		transmit = true
	case nvml.PCIE_UTIL_RX_BYTES:
	default:
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	return uint32(d.pcieRate(transmit, t) / 1000), nvml.SUCCESS
}

// GetFieldValues answers the batched field reads the receiver uses; other fields come back
// with their own ERROR_NOT_SUPPORTED, as on a real driver.
func (d *Device) GetFieldValues(values []nvml.FieldValue) nvml.Return {
	t, r, ret := d.read("DeviceGetFieldValues")
	if ret != nvml.SUCCESS {
		return ret
	}
	if len(values) == 0 {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	ts := d.sim.now().UnixMicro()
	for i := range values {
		v := &values[i]
		v.Timestamp = ts
		v.NvmlReturn = uint32(nvml.SUCCESS)
		d.fieldValue(v, t, r)
	}
	return nvml.SUCCESS
}

func setUint(v *nvml.FieldValue, kind nvml.ValueType, x uint64) {
	v.ValueType = uint32(kind)
	v.Value = [8]byte{}
	if kind == nvml.VALUE_TYPE_UNSIGNED_INT {
		binary.LittleEndian.PutUint32(v.Value[:4], uint32(x))
		return
	}
	binary.LittleEndian.PutUint64(v.Value[:], x)
}
