package main

// Stand-ins for the agent and nvidia-smi, so that the whole of gpucheck runs in a test on
// a machine without a GPU. The test binary plays them (TestMain, GPUCHECK_FAKE):
//
//   - agent: the gpu receiver itself, built by its factory from the receiver section of
//     the configuration gpucheck wrote (backend simulated), exporting OTLP/HTTP to the
//     endpoint in it — the production receiver code on go-nvml's mock servers;
//   - nvidia-smi: `-q -x` and `mig -lgi` printed from a second simulator of the same
//     system, scenario and seed, its clock started when gpucheck says the agent started,
//     as nvidia-smi would print what the driver answers.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.yaml.in/yaml/v3"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpusim"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"
)

// Environment of the stand-ins.
const (
	fakeRoleEnv = "GPUCHECK_FAKE"
	// fakeSimEnv is system/scenario/seed of the stand-in nvidia-smi.
	fakeSimEnv = "GPUCHECK_FAKE_SIM"
	// fakeSkewEnv makes the stand-in nvidia-smi show every power draw this many watts off.
	fakeSkewEnv = "GPUCHECK_FAKE_POWER_SKEW"
	// fakeStartFileEnv names a file where the stand-in agent writes when its simulator
	// started, and from which the stand-in nvidia-smi takes its own start: both then show
	// one simulated machine, even where the agent took seconds to start (a loaded CI host).
	fakeStartFileEnv = "GPUCHECK_FAKE_START_FILE"
)

func TestMain(m *testing.M) {
	switch os.Getenv(fakeRoleEnv) {
	case "agent":
		os.Exit(fakeAgent(os.Args[1:]))
	case "nvidia-smi":
		os.Exit(fakeSMI(os.Args[1:], os.Stdout))
	}
	os.Exit(m.Run())
}

// fakeAgent runs the gpu receiver from `--config <file>` until SIGTERM.
func fakeAgent(args []string) int {
	if len(args) != 2 || args[0] != "--config" {
		fmt.Fprintln(os.Stderr, "usage: agent --config <file>")
		return 2
	}
	raw, err := os.ReadFile(args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var cfg struct {
		Receivers map[string]map[string]any `yaml:"receivers"`
		Exporters map[string]struct {
			Endpoint string `yaml:"endpoint"`
		} `yaml:"exporters"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	factory := gpureceiver.NewFactory()
	rcfg := factory.CreateDefaultConfig()
	if err := confmap.NewFromStringMap(cfg.Receivers["gpu"]).Unmarshal(rcfg); err != nil {
		fmt.Fprintln(os.Stderr, "receiver config:", err)
		return 1
	}
	if err := rcfg.(*gpureceiver.Config).Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "receiver config:", err)
		return 1
	}
	url := cfg.Exporters["otlp_http"].Endpoint + "/v1/metrics"
	var n atomic.Int64
	next, err := consumer.NewMetrics(func(ctx context.Context, md pmetric.Metrics) error {
		// Every other export as JSON: gpucheck's endpoint takes both encodings.
		return postOTLP(ctx, url, md, n.Add(1)%2 == 0)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	// The receiver's simulator starts its clock as CreateMetrics builds it.
	if f := os.Getenv(fakeStartFileEnv); f != "" {
		// Written beside and renamed into place: a stand-in nvidia-smi reading it at the
		// same moment must see the whole time or no file, never an empty one.
		tmp := f + ".tmp"
		err := os.WriteFile(tmp, []byte(time.Now().Format(time.RFC3339Nano)), 0o600)
		if err == nil {
			err = os.Rename(tmp, f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	rcv, err := factory.CreateMetrics(ctx, receivertest.NewNopSettings(component.MustNewType("gpu")), rcfg, next)
	if err == nil {
		err = rcv.Start(ctx, componenttest.NewNopHost())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "receiver:", err)
		return 1
	}
	<-ctx.Done()
	if err := rcv.Shutdown(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "shutdown:", err)
		return 1
	}
	return 0
}

func postOTLP(ctx context.Context, url string, md pmetric.Metrics, asJSON bool) error {
	req := pmetricotlp.NewExportRequestFromMetrics(md)
	body, contentType := []byte(nil), "application/x-protobuf"
	var err error
	if asJSON {
		body, err = req.MarshalJSON()
		contentType = "application/json"
	} else {
		body, err = req.MarshalProto()
	}
	if err != nil {
		return err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("export: %s", resp.Status)
	}
	return nil
}

// fakeSMI prints what nvidia-smi would for the simulated GPUs.
func fakeSMI(args []string, w io.Writer) int {
	sim, err := fakeSimulator()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	switch strings.Join(args, " ") {
	case "-q -x":
		err = writeSMIXML(w, sim)
	case "mig -lgi":
		err = writeLGI(w, sim)
	default:
		err = fmt.Errorf("stand-in nvidia-smi: unsupported arguments %q", args)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// fakeSimulator is the agent's simulated machine: same system, scenario and seed, its
// clock starting when gpucheck started the agent.
func fakeSimulator() (*gpusim.Simulator, error) {
	parts := strings.Split(os.Getenv(fakeSimEnv), "/")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%s must be system/scenario/seed", fakeSimEnv)
	}
	seed, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if v := os.Getenv(AgentStartedEnv); v != "" {
		if start, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return nil, err
		}
	}
	if f := os.Getenv(fakeStartFileEnv); f != "" {
		if raw, err := os.ReadFile(f); err == nil {
			if start, err = time.Parse(time.RFC3339Nano, string(raw)); err != nil {
				return nil, err
			}
		}
	}
	// The simulator reads its clock once while it is built (its start), then at every call.
	var built atomic.Bool
	now := func() time.Time {
		if !built.Load() {
			return start
		}
		return time.Now()
	}
	sim, err := gpusim.New(gpusim.Options{System: parts[0], Scenario: parts[1], Seed: seed, Now: now})
	built.Store(true)
	return sim, err
}

func writeSMIXML(w io.Writer, sim *gpusim.Simulator) error {
	skew := 0.0
	if v := os.Getenv(fakeSkewEnv); v != "" {
		skew, _ = strconv.ParseFloat(v, 64)
	}
	driver, _ := sim.SystemGetDriverVersion()
	n, ret := sim.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return errors.New(nvml.ErrorString(ret))
	}
	log := smiLog{DriverVersion: driver, AttachedGPUs: strconv.Itoa(n)}
	for i := 0; i < n; i++ {
		d, _ := sim.DeviceGetHandleByIndex(i)
		var g smiGPU
		g.ProductName, _ = d.GetName()
		g.UUID, _ = d.GetUUID()
		minor, _ := d.GetMinorNumber()
		g.MinorNumber = strconv.Itoa(minor)
		pci, _ := d.GetPciInfo()
		g.PCIBusID = cString(pci.BusId[:])
		g.ID = g.PCIBusID
		mode, _, _ := d.GetMigMode()
		g.MIGCurrent = map[bool]string{true: "Enabled", false: "Disabled"}[mode == nvml.DEVICE_MIG_ENABLE]
		mem, _ := d.GetMemoryInfo_v2()
		g.FB = smiMemory{Total: mibText(mem.Total), Reserved: mibText(mem.Reserved), Used: mibText(mem.Used)}
		temp, _ := d.GetTemperature(nvml.TEMPERATURE_GPU)
		g.Temperature.GPU = fmt.Sprintf("%d C", temp)
		fields := []nvml.FieldValue{{FieldId: nvml.FI_DEV_MEMORY_TEMP}}
		if d.GetFieldValues(fields) == nvml.SUCCESS && nvml.Return(fields[0].NvmlReturn) == nvml.SUCCESS {
			g.Temperature.Memory = fmt.Sprintf("%d C", binary.LittleEndian.Uint32(fields[0].Value[:4]))
		}
		power, _ := d.GetPowerUsage()
		limit, _ := d.GetEnforcedPowerLimit()
		g.Power = smiPower{Draw: fmt.Sprintf("%.2f W", float64(power)/1000+skew), CurrentLimit: fmt.Sprintf("%.2f W", float64(limit)/1000)}
		for _, c := range []struct {
			clock nvml.ClockType
			cur   *string
			max   *string
		}{{nvml.CLOCK_GRAPHICS, &g.Clocks.Graphics, &g.MaxClocks.Graphics}, {nvml.CLOCK_SM, &g.Clocks.SM, &g.MaxClocks.SM}, {nvml.CLOCK_MEM, &g.Clocks.Memory, &g.MaxClocks.Memory}} {
			cur, _ := d.GetClockInfo(c.clock)
			mx, _ := d.GetMaxClockInfo(c.clock)
			*c.cur, *c.max = fmt.Sprintf("%d MHz", cur), fmt.Sprintf("%d MHz", mx)
		}
		if mode == nvml.DEVICE_MIG_ENABLE {
			count, _ := d.GetMaxMigDeviceCount()
			for j := 0; j < count; j++ {
				m, ret := d.GetMigDeviceHandleByIndex(j)
				if ret != nvml.SUCCESS {
					continue
				}
				gi, _ := m.GetGpuInstanceId()
				ci, _ := m.GetComputeInstanceId()
				mm, _ := m.GetMemoryInfo()
				g.MIGDevices = append(g.MIGDevices, struct {
					GPUInstanceID     string    `xml:"gpu_instance_id"`
					ComputeInstanceID string    `xml:"compute_instance_id"`
					FB                smiMemory `xml:"fb_memory_usage"`
				}{strconv.Itoa(gi), strconv.Itoa(ci), smiMemory{Total: mibText(mm.Total), Reserved: "0 MiB", Used: mibText(mm.Used)}})
			}
		}
		for _, list := range []struct {
			typ   string
			procs func() ([]nvml.ProcessInfo, nvml.Return)
		}{{"C", d.GetComputeRunningProcesses}, {"G", d.GetGraphicsRunningProcesses}} {
			procs, _ := list.procs()
			for _, p := range procs {
				name, _ := sim.SystemGetProcessName(int(p.Pid))
				gi := "N/A"
				if p.GpuInstanceId != 0xFFFFFFFF {
					gi = strconv.Itoa(int(p.GpuInstanceId))
				}
				g.Processes = append(g.Processes, struct {
					GPUInstanceID string `xml:"gpu_instance_id"`
					PID           string `xml:"pid"`
					Type          string `xml:"type"`
					Name          string `xml:"process_name"`
					UsedMemory    string `xml:"used_memory"`
				}{gi, strconv.Itoa(int(p.Pid)), list.typ, name, mibText(p.UsedGpuMemory)})
			}
		}
		log.GPUs = append(log.GPUs, g)
	}
	out, err := xml.MarshalIndent(log, "", "\t")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "<?xml version=\"1.0\" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM \"nvsmi_device_v12.dtd\">\n%s\n", out)
	return err
}

// writeLGI prints the GPU instances as `nvidia-smi mig -lgi` does, named the way NVIDIA
// names profiles (slices, and memory in GB rounded up).
func writeLGI(w io.Writer, sim *gpusim.Simulator) error {
	fmt.Fprintln(w, "+-------------------------------------------------------+")
	fmt.Fprintln(w, "| GPU instances:                                        |")
	fmt.Fprintln(w, "| GPU   Name             Profile  Instance   Placement  |")
	fmt.Fprintln(w, "|                          ID       ID       Start:Size |")
	fmt.Fprintln(w, "|=======================================================|")
	n, _ := sim.DeviceGetCount()
	for i := 0; i < n; i++ {
		d, _ := sim.DeviceGetHandleByIndex(i)
		count, _ := d.GetMaxMigDeviceCount()
		for j := 0; j < count; j++ {
			m, ret := d.GetMigDeviceHandleByIndex(j)
			if ret != nvml.SUCCESS {
				continue
			}
			giID, _ := m.GetGpuInstanceId()
			gi, ret := d.GetGpuInstanceById(giID)
			if ret != nvml.SUCCESS {
				return fmt.Errorf("GPU %d instance %d: %s", i, giID, nvml.ErrorString(ret))
			}
			info, _ := gi.GetInfo()
			name, err := profileName(d, info.ProfileId)
			if err != nil {
				return fmt.Errorf("GPU %d instance %d: %w", i, giID, err)
			}
			fmt.Fprintf(w, "| %3d  %-16s %6d %8d %10d:%d     |\n", i, "MIG "+name, info.ProfileId, giID, info.Placement.Start, info.Placement.Size)
			fmt.Fprintln(w, "+-------------------------------------------------------+")
		}
	}
	return nil
}

// profileName names a GPU instance's profile from its profile id. On a real driver that
// id is the device's own (19 for an H100's 1g.10gb), not the NVML_GPU_INSTANCE_PROFILE_*
// enum nvmlDeviceGetGpuInstanceProfileInfo takes: the enum is found by asking each one.
// Named as NVIDIA names them: slices, memory in GiB rounded up, "+me" for the profile
// with the media extensions.
func profileName(d nvml.Device, profileID uint32) (string, error) {
	for enum := 0; enum < nvml.GPU_INSTANCE_PROFILE_COUNT; enum++ {
		p, ret := d.GetGpuInstanceProfileInfo(enum)
		if ret != nvml.SUCCESS || p.Id != profileID {
			continue
		}
		name := fmt.Sprintf("%dg.%dgb", p.SliceCount, int(math.Ceil(float64(p.MemorySizeMB)/1024)))
		if enum == nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1 {
			name += "+me"
		}
		return name, nil
	}
	return "", fmt.Errorf("no profile has id %d", profileID)
}

func mibText(b uint64) string { return fmt.Sprintf("%d MiB", b/mib) }

func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}
