package rules

import "github.com/otelcol-gpu/otelcol-gpu/internal/thresholds"

// powerShare is board power as a share of the enforced power limit, per GPU.
const powerShare = `hw_power_watts
  / ignoring (nvidia_gpu_power_limit_type)
nvidia_gpu_power_limit_watts{nvidia_gpu_power_limit_type="enforced"}`

func thermal() Group {
	return Group{Name: "gpu-thermal", Rules: []Rule{
		{
			Alert:       "GPUTemperatureHigh",
			Comment:     "Threshold " + num(thresholds.TemperatureHighCelsius) + " °C: below every datacenter GPU's slowdown temperature, above what a well-cooled GPU reaches at full load. See the runbook to tune.",
			Expr:        `hw_temperature_celsius{hw_sensor_location="gpu"} > ` + num(thresholds.TemperatureHighCelsius),
			For:         "5m",
			Severity:    "warning",
			Summary:     gpuAt + " is at " + valueCount + " °C.",
			Description: "The die temperature of " + gpuModel + onNodeUsedBy + " has been above " + num(thresholds.TemperatureHighCelsius) + " °C for 5 minutes (now " + valueCount + " °C). Check cooling (fans, airflow, inlet temperature) before the GPU starts to throttle.",
		},
		{
			Alert:       "GPUThermalThrottling",
			Expr:        `nvidia_gpu_throttled{nvidia_gpu_throttle_cause="thermal"} == 1`,
			For:         "2m",
			Severity:    "warning",
			Summary:     gpuAt + " is thermally throttled.",
			Description: "The clocks of " + gpuModel + onNodeUsedBy + " have been held down for a thermal reason (software or hardware thermal slowdown) for 2 minutes: the workload runs slower than it should.",
		},
	}}
}

func power() Group {
	return Group{Name: "gpu-power", Rules: []Rule{
		{
			Alert: "GPUPowerNearLimit",
			Expr: powerShare + `
  > ` + num(thresholds.PowerNearLimitRatio),
			For:         "15m",
			Severity:    "info",
			Summary:     gpuAt + " draws " + valuePercent + " of its power limit.",
			Description: gpuModel + onNodeUsedBy + " has drawn more than " + percent(thresholds.PowerNearLimitRatio) + " of its enforced power limit for 15 minutes (now " + valuePercent + "). Expect power capping; check that the enforced limit is the default one.",
		},
		{
			Alert:       "GPUPowerCapping",
			Comment:     "Share of the last 15 minutes the clocks were held down by the power limit.",
			Expr:        `avg_over_time(nvidia_gpu_throttled{nvidia_gpu_throttle_cause="power"}[15m]) > ` + num(thresholds.PowerCappedShare),
			For:         "15m",
			Severity:    "info",
			Summary:     gpuAt + " is power capped.",
			Description: "The clocks of " + gpuModel + onNodeUsedBy + " were held down by the power limit " + valuePercent + " of the time over the last 15 minutes, for at least 15 minutes.",
		},
	}}
}
