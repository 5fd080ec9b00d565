package main

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// smiLog is the part of `nvidia-smi -q -x` (nvsmi_device_v10…v13.dtd) that gpucheck
// compares. Elements that moved between schema versions are read from each place.
type smiLog struct {
	XMLName       xml.Name `xml:"nvidia_smi_log"`
	DriverVersion string   `xml:"driver_version"`
	AttachedGPUs  string   `xml:"attached_gpus"`
	GPUs          []smiGPU `xml:"gpu"`
}

type smiGPU struct {
	ID          string `xml:"id,attr"`
	ProductName string `xml:"product_name"`
	UUID        string `xml:"uuid"`
	MinorNumber string `xml:"minor_number"`
	PCIBusID    string `xml:"pci>pci_bus_id"`
	MIGCurrent  string `xml:"mig_mode>current_mig"`
	MIGDevices  []struct {
		GPUInstanceID     string    `xml:"gpu_instance_id"`
		ComputeInstanceID string    `xml:"compute_instance_id"`
		FB                smiMemory `xml:"fb_memory_usage"`
	} `xml:"mig_devices>mig_device"`
	FB          smiMemory `xml:"fb_memory_usage"`
	Temperature struct {
		GPU    string `xml:"gpu_temp"`
		Memory string `xml:"memory_temp"`
	} `xml:"temperature"`
	// gpu_power_readings since R535 (v12), power_readings before.
	Power       smiPower  `xml:"gpu_power_readings"`
	PowerLegacy smiPower  `xml:"power_readings"`
	Clocks      smiClocks `xml:"clocks"`
	MaxClocks   smiClocks `xml:"max_clocks"`
	Processes   []struct {
		GPUInstanceID string `xml:"gpu_instance_id"`
		PID           string `xml:"pid"`
		Type          string `xml:"type"`
		Name          string `xml:"process_name"`
		UsedMemory    string `xml:"used_memory"`
	} `xml:"processes>process_info"`
}

type smiMemory struct {
	Total    string `xml:"total"`
	Reserved string `xml:"reserved"`
	Used     string `xml:"used"`
}

type smiPower struct {
	// power_draw until R550; average_power_draw and instant_power_draw after.
	Draw          string `xml:"power_draw"`
	Average       string `xml:"average_power_draw"`
	Instant       string `xml:"instant_power_draw"`
	CurrentLimit  string `xml:"current_power_limit"`
	EnforcedLimit string `xml:"enforced_power_limit"`
}

type smiClocks struct {
	Graphics string `xml:"graphics_clock"`
	SM       string `xml:"sm_clock"`
	Memory   string `xml:"mem_clock"`
}

// smiSample is one run of `nvidia-smi -q -x`, reduced to numbers in nvidia-smi's units
// (MiB, W, °C, MHz). A value nvidia-smi shows as N/A (or "Not Supported", "deprecated")
// is absent.
type smiSample struct {
	// Time is the middle of the run: nvidia-smi reads the GPUs one after the other while it
	// runs, and its own <timestamp> has whole seconds only.
	Time   time.Time
	File   string
	Driver string
	GPUs   []smiGPUState
}

type smiGPUState struct {
	// Index is the GPU's position in the output: nvidia-smi lists GPUs in NVML index order.
	Index  int
	UUID   string
	Model  string
	BusID  string
	Minor  *float64
	MIG    string // Enabled, Disabled, or N/A (a GPU without MIG)
	MIGs   []smiMIGState
	Values map[string]float64
	// PowerSource names the element the power draw came from.
	PowerSource string
	Processes   []smiProcess
}

type smiMIGState struct {
	GPUInstance     int
	ComputeInstance int
	Values          map[string]float64
}

type smiProcess struct {
	PID         int
	Type        string // C, G, C+G, M, …
	Name        string
	MemoryMiB   *float64
	GPUInstance *int
}

// Value names of smiGPUState.Values and smiMIGState.Values.
const (
	vMemTotal      = "fb total"
	vMemUsed       = "fb used"
	vMemReserved   = "fb reserved"
	vPower         = "power draw"
	vPowerLimit    = "power limit"
	vTempGPU       = "gpu temp"
	vTempMemory    = "memory temp"
	vClockSM       = "sm clock"
	vClockGraphics = "graphics clock"
	vClockMemory   = "mem clock"
	vMaxSM         = "max sm clock"
	vMaxGraphics   = "max graphics clock"
	vMaxMemory     = "max mem clock"
)

// parseSMI reads one `nvidia-smi -q -x` output.
func parseSMI(data []byte) (smiSample, error) {
	var log smiLog
	if err := xml.Unmarshal(data, &log); err != nil {
		return smiSample{}, fmt.Errorf("nvidia-smi XML: %w", err)
	}
	s := smiSample{Driver: strings.TrimSpace(log.DriverVersion)}
	for i, g := range log.GPUs {
		st := smiGPUState{
			Index:  i,
			UUID:   strings.TrimSpace(g.UUID),
			Model:  strings.TrimSpace(g.ProductName),
			BusID:  strings.TrimSpace(g.PCIBusID),
			Minor:  number(g.MinorNumber),
			MIG:    strings.TrimSpace(g.MIGCurrent),
			Values: map[string]float64{},
		}
		if st.BusID == "" {
			st.BusID = strings.TrimSpace(g.ID)
		}
		setNumber(st.Values, vMemTotal, g.FB.Total)
		setNumber(st.Values, vMemUsed, g.FB.Used)
		setNumber(st.Values, vMemReserved, g.FB.Reserved)
		setNumber(st.Values, vTempGPU, g.Temperature.GPU)
		setNumber(st.Values, vTempMemory, g.Temperature.Memory)
		setNumber(st.Values, vClockSM, g.Clocks.SM)
		setNumber(st.Values, vClockGraphics, g.Clocks.Graphics)
		setNumber(st.Values, vClockMemory, g.Clocks.Memory)
		setNumber(st.Values, vMaxSM, g.MaxClocks.SM)
		setNumber(st.Values, vMaxGraphics, g.MaxClocks.Graphics)
		setNumber(st.Values, vMaxMemory, g.MaxClocks.Memory)
		for _, p := range []smiPower{g.Power, g.PowerLegacy} {
			// The receiver reports the 1-second average where the GPU keeps one, which is
			// what power_draw showed before R550 split it into average and instant.
			for _, c := range []struct{ name, v string }{{"average_power_draw", p.Average}, {"power_draw", p.Draw}, {"instant_power_draw", p.Instant}} {
				if _, done := st.Values[vPower]; !done && setNumber(st.Values, vPower, c.v) {
					st.PowerSource = c.name
				}
			}
			for _, l := range []string{p.CurrentLimit, p.EnforcedLimit} {
				if _, done := st.Values[vPowerLimit]; !done {
					setNumber(st.Values, vPowerLimit, l)
				}
			}
		}
		for _, m := range g.MIGDevices {
			gi, ci := number(m.GPUInstanceID), number(m.ComputeInstanceID)
			if gi == nil || ci == nil {
				continue
			}
			ms := smiMIGState{GPUInstance: int(*gi), ComputeInstance: int(*ci), Values: map[string]float64{}}
			setNumber(ms.Values, vMemTotal, m.FB.Total)
			setNumber(ms.Values, vMemUsed, m.FB.Used)
			setNumber(ms.Values, vMemReserved, m.FB.Reserved)
			st.MIGs = append(st.MIGs, ms)
		}
		for _, p := range g.Processes {
			pid := number(p.PID)
			if pid == nil {
				continue
			}
			sp := smiProcess{PID: int(*pid), Type: strings.TrimSpace(p.Type), Name: strings.TrimSpace(p.Name), MemoryMiB: number(p.UsedMemory)}
			if gi := number(p.GPUInstanceID); gi != nil {
				v := int(*gi)
				sp.GPUInstance = &v
			}
			st.Processes = append(st.Processes, sp)
		}
		s.GPUs = append(s.GPUs, st)
	}
	return s, nil
}

func setNumber(m map[string]float64, key, text string) bool {
	if v := number(text); v != nil {
		m[key] = *v
		return true
	}
	return false
}

// number reads "81559 MiB", "67.03 W", "27 C", "1980 MHz", "1234": the leading number.
// N/A, [N/A], "Not Supported", "Requested functionality has been deprecated" and empty
// elements have none.
func number(text string) *float64 {
	f := strings.Fields(text)
	if len(f) == 0 {
		return nil
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return nil
	}
	return &v
}

// lgiRow matches a GPU instance row of `nvidia-smi mig -lgi`:
// "|   0  MIG 1g.10gb          19        9          2:1     |".
var lgiRow = regexp.MustCompile(`^\|+\s*(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)\s+\d+:\d+\s*\|`)

// migProfileKey names a GPU instance by GPU index and GPU instance id.
type migProfileKey struct{ gpu, gpuInstance int }

// parseLGI reads the profile names of `nvidia-smi mig -lgi` ("1g.10gb", without "MIG ").
func parseLGI(out string) map[migProfileKey]string {
	names := map[migProfileKey]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		m := lgiRow.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		gpu, _ := strconv.Atoi(m[1])
		gi, _ := strconv.Atoi(m[4])
		names[migProfileKey{gpu, gi}] = m[2]
	}
	return names
}
