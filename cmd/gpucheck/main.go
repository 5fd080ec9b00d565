// Command gpucheck is the acceptance test of a GPU node: it runs the agent on the node's
// GPUs for a while (two minutes by default), samples `nvidia-smi -q -x` meanwhile, and
// compares them field by field — model, UUID, PCI bus id, index and minor number,
// framebuffer total/used/reserved, power draw and limit, temperatures, clocks and their
// maxima, MIG mode, instances and profiles, and the process list — writing report.md and
// report.json and exiting 1 if any value is outside its tolerance (2 if the check could
// not run). `make test-gpu` runs it through scripts/test-gpu.sh; docs/test-gpu.md says
// what each check means.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	os.Exit(runMain(os.Args[1:], os.Getenv))
}

func runMain(args []string, getenv func(string) string) int {
	o, err := parseOptions(args, getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpucheck:", err)
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	fmt.Printf("gpucheck: running %s for %s, nvidia-smi every %s; output in %s\n", o.Agent, o.Duration, o.SMIInterval, o.Out)
	res := run(ctx, o)
	path, err := writeReport(res)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpucheck: writing the report:", err)
		return 2
	}
	fmt.Println(res.summaryLine(path))
	switch {
	case res.ok():
		return 0
	case len(res.Checks) == 0:
		return 2
	}
	return 1
}

func parseOptions(args []string, getenv func(string) string) (options, error) {
	envOr := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("gpucheck", flag.ContinueOnError)
	var o options
	duration := envOr("DURATION", "2m")
	fs.StringVar(&o.Agent, "agent", envOr("AGENT_BIN", "distribution/agent/otelcol-gpu-agent"), "agent binary (env AGENT_BIN)")
	fs.StringVar(&o.NvidiaSMI, "nvidia-smi", envOr("NVIDIA_SMI", "nvidia-smi"), "nvidia-smi to compare with (env NVIDIA_SMI)")
	fs.StringVar(&duration, "duration", duration, "how long the agent runs (env DURATION)")
	fs.DurationVar(&o.SMIInterval, "smi-interval", 10*time.Second, "how often nvidia-smi -q -x runs")
	fs.DurationVar(&o.Receiver.Interval, "interval", 2*time.Second, "the agent's collection interval")
	fs.StringVar(&o.Out, "out", envOr("GPUCHECK_OUT", "gpu-report"), "folder for the report and what it was made from (env GPUCHECK_OUT)")
	fs.StringVar(&o.Load, "load", envOr("GPUCHECK_LOAD", "auto"), "GPU process to run meanwhile: auto (PyTorch, where it imports), none, or a shell command (env GPUCHECK_LOAD)")
	fs.StringVar(&o.Receiver.Backend, "backend", "nvml", "the receiver's backend: nvml, or simulated to try gpucheck without a GPU")
	fs.StringVar(&o.Receiver.System, "sim-system", "dgxh100", "simulated system (with -backend simulated)")
	fs.StringVar(&o.Receiver.Scenario, "sim-scenario", "steady-training", "simulated scenario (with -backend simulated)")
	fs.Int64Var(&o.Receiver.Seed, "sim-seed", 1, "simulator seed (with -backend simulated)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	d, err := time.ParseDuration(duration)
	if err != nil {
		return o, fmt.Errorf("duration: %w", err)
	}
	o.Duration = d
	switch {
	case o.Duration <= 0:
		return o, fmt.Errorf("duration must be positive, got %s", o.Duration)
	case o.SMIInterval <= 0 || o.Receiver.Interval <= 0:
		return o, fmt.Errorf("intervals must be positive")
	case o.SMIInterval > o.Duration:
		return o, fmt.Errorf("smi-interval (%s) must not exceed duration (%s)", o.SMIInterval, o.Duration)
	}
	return o, nil
}
