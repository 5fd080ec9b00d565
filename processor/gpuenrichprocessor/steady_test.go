package gpuenrichprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/pdatawalk"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"
)

// receiverEverySecond is the receiver's default configuration on simulated GPUs,
// collecting every second.
func receiverEverySecond() *gpureceiver.Config {
	rcfg := gpureceiver.NewFactory().CreateDefaultConfig().(*gpureceiver.Config)
	rcfg.Backend = gpureceiver.BackendSimulated
	rcfg.CollectionInterval = time.Second
	return rcfg
}

// At a 1 s collection interval the receiver holds back unchanged steady series (error
// counters, limits, link state) for up to 10 s; gpu_enrich must neither end them in
// between nor lose them, and still end a lost GPU's series.
func TestHeldBackSteadySeriesAreNotEnded(t *testing.T) {
	for _, scenario := range []string{"steady-training", "shared-gpu", "gpu-lost"} {
		t.Run(scenario, func(t *testing.T) {
			h := newHarnessWithReceiver(t, "dgxh100", scenario, receiverEverySecond(), testConfig(), func([]string, *fakeClock) sources { return sources{} })
			sentErrors, endedSteady := 0, 0
			for i := 0; i < 45; i++ {
				md := h.step(time.Second)
				for _, rm := range resources(md, map[string]string{"nvidia.gpu.index": "0", "!process.pid": ""}) {
					pdatawalk.EachPoint(rm, func(name string, dp pmetric.NumberDataPoint) {
						switch {
						case dp.Flags().NoRecordedValue() && (name == "hw.errors" || name == "nvidia.gpu.power.limit"):
							endedSteady++
						case name == "hw.errors" && !dp.Flags().NoRecordedValue():
							sentErrors++
						}
					})
				}
			}
			require.Positive(t, sentErrors)
			assert.LessOrEqual(t, sentErrors, 5*4, "GPU 0's four ECC counters at most every 10 s over 45 s")
			assert.Zero(t, endedSteady, "a held-back steady series is not ended while its GPU answers")
		})
	}
}

// The gpu-lost scenario's GPU 3 is off the bus from 15 s to 35 s: its steady series end
// within 10 s of its last point (hw.status, sent every collection, says failed), and are
// sent again, at once, when it answers again.
func TestALostGPUsSteadySeriesEndAndComeBack(t *testing.T) {
	h := newHarnessWithReceiver(t, "dgxh100", "gpu-lost", receiverEverySecond(), testConfig(), func([]string, *fakeClock) sources { return sources{} })
	var ended, sentAfterReturn []int
	for sec := 1; sec <= 45; sec++ {
		md := h.step(time.Second)
		for _, rm := range resources(md, map[string]string{"nvidia.gpu.index": "3", "!process.pid": ""}) {
			pdatawalk.EachPoint(rm, func(name string, dp pmetric.NumberDataPoint) {
				if name != "nvidia.gpu.power.limit" {
					return
				}
				switch {
				case dp.Flags().NoRecordedValue():
					ended = append(ended, sec)
				case sec >= 35:
					sentAfterReturn = append(sentAfterReturn, sec)
				}
			})
		}
	}
	require.Len(t, ended, 1, "the lost GPU's power limit ends once")
	assert.LessOrEqual(t, ended[0], 15+10, "within 10 s of the GPU's last answer (15 s in)")
	require.NotEmpty(t, sentAfterReturn)
	assert.Equal(t, 35, sentAfterReturn[0], "sent again as soon as the GPU answers (35 s in)")
}
