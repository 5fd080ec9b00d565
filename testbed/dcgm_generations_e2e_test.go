//go:build e2e

package testbed

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// dcgmFieldsOnlyWithFull are the fields the overlay maps from NVLink data broken down per
// link and per error type, which only deploy/config-overlays/full.yaml turns on (the
// overlay leaves those lists to it, so that the two merge the same in either order).
var dcgmFieldsOnlyWithFull = []string{
	"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
	"DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
	"DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
	"DCGM_FI_DEV_NVLINK_BANDWIDTH_L0",
}

// dcgmNames49 are dcgm-exporter 4.9's names of the default and profiling fields (DCGM 4.7's,
// configs/dcgm-compat.yaml's transform/dcgm_generation_4.9, docs/migrating-from-dcgm-exporter.md).
var dcgmNames49 = map[string]string{
	"DCGM_FI_DEV_SM_CLOCK":                    "DCGM_FI_DEV_SM_CLOCK_HERTZ",
	"DCGM_FI_DEV_MEM_CLOCK":                   "DCGM_FI_DEV_MEMORY_CLOCK_HERTZ",
	"DCGM_FI_DEV_MEMORY_TEMP":                 "DCGM_FI_DEV_MEMORY_TEMP_CELSIUS",
	"DCGM_FI_DEV_GPU_TEMP":                    "DCGM_FI_DEV_GPU_TEMP_CELSIUS",
	"DCGM_FI_DEV_POWER_USAGE":                 "DCGM_FI_DEV_BOARD_POWER_WATTS",
	"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION":    "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL",
	"DCGM_FI_DEV_PCIE_REPLAY_COUNTER":         "DCGM_FI_DEV_PCIE_REPLAY_TOTAL",
	"DCGM_FI_DEV_GPU_UTIL":                    "DCGM_FI_DEV_GPU_UTIL_RATIO",
	"DCGM_FI_DEV_MEM_COPY_UTIL":               "DCGM_FI_DEV_MEMORY_UTIL_RATIO",
	"DCGM_FI_DEV_ENC_UTIL":                    "DCGM_FI_DEV_ENC_UTIL_RATIO",
	"DCGM_FI_DEV_DEC_UTIL":                    "DCGM_FI_DEV_DEC_UTIL_RATIO",
	"DCGM_FI_DEV_XID_ERRORS":                  "DCGM_FI_DEV_XID_ERROR",
	"DCGM_FI_DEV_FB_FREE":                     "DCGM_FI_DEV_FB_FREE_BYTES",
	"DCGM_FI_DEV_FB_USED":                     "DCGM_FI_DEV_FB_USED_BYTES",
	"DCGM_FI_DEV_FB_RESERVED":                 "DCGM_FI_DEV_FB_RESERVED_BYTES",
	"DCGM_FI_DEV_FB_TOTAL":                    "DCGM_FI_DEV_FB_CAPACITY_BYTES",
	"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL":      "DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND",
	"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL",
	"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS":   "DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL",
	"DCGM_FI_DEV_ROW_REMAP_FAILURE":           "DCGM_FI_DEV_ROW_REMAP_FAILED",
	"DCGM_FI_PROF_GR_ENGINE_ACTIVE":           "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO",
	"DCGM_FI_PROF_SM_ACTIVE":                  "DCGM_FI_PROF_SM_UTIL_RATIO",
	"DCGM_FI_PROF_SM_OCCUPANCY":               "DCGM_FI_PROF_SM_OCCUPANCY_RATIO",
	"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE":         "DCGM_FI_PROF_TENSOR_UTIL_RATIO",
	"DCGM_FI_PROF_DRAM_ACTIVE":                "DCGM_FI_PROF_DRAM_UTIL_RATIO",
	"DCGM_FI_PROF_PIPE_FP64_ACTIVE":           "DCGM_FI_PROF_FP64_UTIL_RATIO",
	"DCGM_FI_PROF_PIPE_FP32_ACTIVE":           "DCGM_FI_PROF_FP32_UTIL_RATIO",
	"DCGM_FI_PROF_PIPE_FP16_ACTIVE":           "DCGM_FI_PROF_FP16_UTIL_RATIO",
	// DCGM 4.7 removed these two.
	"DCGM_FI_DEV_PCIE_TX_THROUGHPUT": "",
	"DCGM_FI_DEV_PCIE_RX_THROUGHPUT": "",
}

// dcgmNamesIn is a set of 4.8 names as a generation writes them (generation 4.8: as they are).
func dcgmNamesIn(generation string, names []string) []string {
	var out []string
	for _, n := range names {
		if generation == "4.9" || generation == "4.10" {
			if renamed, ok := dcgmNames49[n]; ok {
				n = renamed
			}
		}
		if generation == "4.10" && strings.HasPrefix(n, "DCGM_FI_PROF_") && (strings.HasSuffix(n, "_TX_BYTES") || strings.HasSuffix(n, "_RX_BYTES")) {
			n += "_PER_SECOND"
		}
		if n != "" {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// dcgmNamesOf are the DCGM_FI_* metric names Prometheus has for one host label.
func dcgmNamesOf(p *prom.Server, label, host string) ([]string, error) {
	s, err := p.Query(fmt.Sprintf(`group by (__name__) ({__name__=~"DCGM_FI_.+", %s=%q})`, label, host))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, x := range s {
		names = append(names, x.Labels["__name__"])
	}
	slices.Sort(names)
	return names, nil
}

// TestDCGMCompatOverlayInAnyOrderAndGeneration: on the agent's build, the compatibility
// overlay alone, with deploy/config-overlays/full.yaml before it and with full.yaml after
// it gives the same DCGM_FI_* series, SM occupancy and the FP64/FP32/FP16 pipes among them
// (full.yaml adds only the NVLink fields it alone can make), and
// OTELCOL_GPU_DCGM_GENERATION=4.9 and 4.10 give those series under the names, units and
// labels of those dcgm-exporter releases.
func TestDCGMCompatOverlayInAnyOrderAndGeneration(t *testing.T) {
	p := prom.Start(t, "")
	full := "../deploy/config-overlays/full.yaml"
	for host, node := range map[string]agentNode{
		"e2e-dcgm-alone":      {overlays: []string{"dcgm-compat.yaml"}},
		"e2e-dcgm-full-first": {overlays: []string{full, "dcgm-compat.yaml"}},
		"e2e-dcgm-full-last":  {overlays: []string{"dcgm-compat.yaml", full}},
		"e2e-dcgm-4.9":        {overlays: []string{"dcgm-compat.yaml"}, env: []string{"OTELCOL_GPU_DCGM_GENERATION=4.9"}},
		"e2e-dcgm-4.10":       {overlays: []string{"dcgm-compat.yaml"}, env: []string{"OTELCOL_GPU_DCGM_GENERATION=4.10"}},
		"e2e-dcgm-4.8.3":      {overlays: []string{"dcgm-compat.yaml"}, env: []string{"OTELCOL_GPU_DCGM_GENERATION=4.8.3"}},
		// The host label's name overrides the generation's spelling.
		"e2e-dcgm-4.9-Hostname": {overlays: []string{"dcgm-compat.yaml"}, env: []string{"OTELCOL_GPU_DCGM_GENERATION=4.9", "OTELCOL_GPU_DCGM_HOSTNAME_LABEL=Hostname"}},
	} {
		startAgentOn(t, p, host, "dgxh100", "steady-training", node)
	}

	// What full.yaml gives, whichever way round: every field the other compatibility tests
	// check, and dcgm-exporter's utilizations.
	var want []string
	for _, f := range append(append([]dcgmField(nil), dcgmCSVFields...), dcgmCommonExtraFields...) {
		want = append(want, f.name)
	}
	want = append(want, "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_ENC_UTIL")
	slices.Sort(want)
	var withFull []string
	prom.Eventually(t, 90*time.Second, "full.yaml before and after the overlay", func() error {
		first, err := dcgmNamesOf(p, "Hostname", "e2e-dcgm-full-first")
		if err != nil {
			return err
		}
		last, err := dcgmNamesOf(p, "Hostname", "e2e-dcgm-full-last")
		if err != nil {
			return err
		}
		for _, n := range want {
			if !slices.Contains(first, n) || !slices.Contains(last, n) {
				return fmt.Errorf("%s: full.yaml first has it %v, last %v", n, slices.Contains(first, n), slices.Contains(last, n))
			}
		}
		if !slices.Equal(first, last) {
			return fmt.Errorf("full.yaml first: %v\nfull.yaml last: %v", first, last)
		}
		withFull = first
		return nil
	})
	t.Logf("%d DCGM_FI_* names with full.yaml in either order", len(withFull))

	alone := slices.DeleteFunc(slices.Clone(withFull), func(n string) bool { return slices.Contains(dcgmFieldsOnlyWithFull, n) })
	prom.Eventually(t, 60*time.Second, "the overlay alone", func() error {
		got, err := dcgmNamesOf(p, "Hostname", "e2e-dcgm-alone")
		if err != nil {
			return err
		}
		if !slices.Equal(got, alone) {
			return fmt.Errorf("the overlay alone gives %v\nwant %v (full.yaml's without %v)", got, alone, dcgmFieldsOnlyWithFull)
		}
		return nil
	})
	for _, n := range []string{"DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_PIPE_FP64_ACTIVE", "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
		"DCGM_FI_DEV_POWER_VIOLATION", "DCGM_FI_DEV_POWER_MGMT_LIMIT_MAX", "DCGM_FI_DEV_SLOWDOWN_TEMP", "DCGM_FI_DEV_MAX_SM_CLOCK", "DCGM_FI_DEV_PCIE_LINK_GEN"} {
		if !slices.Contains(alone, n) {
			t.Errorf("the overlay alone lacks %s", n)
		}
	}

	for _, gen := range []string{"4.9", "4.10"} {
		t.Run("generation "+gen, func(t *testing.T) {
			host := "e2e-dcgm-" + gen
			prom.Eventually(t, 60*time.Second, gen+"'s names", func() error {
				got, err := dcgmNamesOf(p, "hostname", host)
				if err != nil {
					return err
				}
				if want := dcgmNamesIn(gen, alone); !slices.Equal(got, want) {
					return fmt.Errorf("got  %v\nwant %v", got, want)
				}
				return nil
			})
			sel := fmt.Sprintf(`{hostname=%q}`, host)
			for q, check := range map[string]func([]prom.Sample) error{
				// Base units: ratios, bytes, hertz, joules, bytes per second.
				`DCGM_FI_DEV_GPU_UTIL_RATIO` + sel:                                                      each(8, between("ratio", 0.5, 1)),
				`DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO` + sel:                                               each(8, between("ratio", 0.5, 1)),
				`DCGM_FI_DEV_FB_USED_BYTES` + sel + ` / DCGM_FI_DEV_FB_CAPACITY_BYTES` + sel:            each(8, between("ratio", 0.7, 0.85)),
				`DCGM_FI_DEV_FB_CAPACITY_BYTES` + sel:                                                   each(8, between("bytes", 80e9, 86e9)),
				`DCGM_FI_DEV_SM_CLOCK_HERTZ` + sel:                                                      each(8, between("Hz", 1e8, 3e9)),
				`rate(DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL` + sel + `[30s])`:                             each(8, between("W", 50, 700)),
				`DCGM_FI_DEV_BOARD_POWER_WATTS` + sel:                                                   each(8, between("W", 50, 700)),
				`DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND` + sel:                                  each(8, between("B/s", 1e8, 1e13)),
				fmt.Sprintf(`DCGM_FI_DEV_XID_ERROR{err_code="0",err_msg="No Error",hostname=%q}`, host): each(8, between("XID", 0, 0)),
				// Fields outside the default and profiling sets keep their names and units.
				`DCGM_FI_DEV_MAX_SM_CLOCK` + sel:    each(8, between("MHz", 1980, 1980)),
				`DCGM_FI_DEV_POWER_VIOLATION` + sel: each(8, between("ns", 0, 1e12)),
				`up` + sel:                          each(1, between("up", 1, 1)),
			} {
				prom.Eventually(t, 60*time.Second, q, func() error {
					s, err := p.Query(q)
					if err != nil {
						return err
					}
					return check(s)
				})
			}
			s, err := p.Query(`DCGM_FI_DEV_GPU_UTIL_RATIO` + sel)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range s {
				if x.Labels["DCGM_FI_SYSTEM_DRIVER_VERSION"] == "" || x.Labels["DCGM_FI_DRIVER_VERSION"] != "" || x.Labels["Hostname"] != "" {
					t.Errorf("%s labels %v: want DCGM_FI_SYSTEM_DRIVER_VERSION and hostname, not DCGM_FI_DRIVER_VERSION or Hostname", gen, x.Labels)
				}
			}
		})
	}

	t.Run("generation 4.8.3: 4.8's names and units, hostname", func(t *testing.T) {
		prom.Eventually(t, 60*time.Second, "4.8.3's names", func() error {
			got, err := dcgmNamesOf(p, "hostname", "e2e-dcgm-4.8.3")
			if err != nil {
				return err
			}
			if !slices.Equal(got, alone) {
				return fmt.Errorf("got  %v\nwant %v", got, alone)
			}
			return nil
		})
		s := answers(t, p, `DCGM_FI_DEV_GPU_UTIL{hostname="e2e-dcgm-4.8.3"}`, 8, 30*time.Second)
		if err := each(8, between("%", 50, 100))(s); err != nil {
			t.Error(err)
		}
		for _, x := range s {
			if x.Labels["DCGM_FI_DRIVER_VERSION"] == "" || x.Labels["Hostname"] != "" {
				t.Errorf("labels %v: want DCGM_FI_DRIVER_VERSION and hostname", x.Labels)
			}
		}
	})

	t.Run("OTELCOL_GPU_DCGM_HOSTNAME_LABEL overrides the generation's host label", func(t *testing.T) {
		s := answers(t, p, `DCGM_FI_DEV_GPU_UTIL_RATIO{Hostname="e2e-dcgm-4.9-Hostname"}`, 8, 30*time.Second)
		for _, x := range s {
			if x.Labels["hostname"] != "" {
				t.Errorf("labels %v: want Hostname only", x.Labels)
			}
		}
	})

	t.Run("generation 4.8 has dcgm-exporter 4.8.2's labels", func(t *testing.T) {
		s := answers(t, p, `DCGM_FI_DEV_GPU_UTIL{Hostname="e2e-dcgm-alone"}`, 8, 30*time.Second)
		for _, x := range s {
			if x.Labels["DCGM_FI_DRIVER_VERSION"] == "" || x.Labels["DCGM_FI_SYSTEM_DRIVER_VERSION"] != "" || x.Labels["hostname"] != "" {
				t.Errorf("labels %v: want DCGM_FI_DRIVER_VERSION and Hostname only", x.Labels)
			}
		}
		if n, err := p.Query(`count({hostname=~"e2e-dcgm-(alone|full-.*)"})`); err != nil || len(n) != 0 {
			t.Errorf("generation 4.8 wrote a hostname label: %v %v", n, err)
		}
	})
}
