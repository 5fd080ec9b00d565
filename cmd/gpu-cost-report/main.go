// Command gpu-cost-report is the chargeback report: for a period (the previous calendar
// month by default) it reads otelcol-gpu's allocation-funnel and price recording rules
// (rules/gpu-recording.yaml, rules/gpu-prices.yaml) through Prometheus's query API and
// writes, per namespace, workload and Slurm job and per GPU model, the GPU-hours
// allocated, active, effective (used) and idle, the kWh, and what they cost, as CSV or
// JSON. GPU-hours integrate the rules' gauges once a minute exactly as the rules' own
// hourly figures do; costs price each minute at its GPU model's price of that minute; no
// price gives an empty cell and a warning, never an invented figure. README.md says more.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runMain(ctx, os.Args[1:], os.Getenv, time.Now(), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// runMain is the command: 0 report written, 1 no report, 2 bad usage.
func runMain(ctx context.Context, args []string, getenv func(string) string, now time.Time, stdout, stderr io.Writer) int {
	o, err := parseOptions(args, getenv, now, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "gpu-cost-report:", err)
		return 2
	}
	rt, err := config.NewRoundTripperFromConfig(o.HTTP, "gpu-cost-report")
	if err != nil {
		fmt.Fprintln(stderr, "gpu-cost-report: HTTP client:", err)
		return 2
	}
	client, err := api.NewClient(api.Config{Address: o.Prometheus, RoundTripper: rt})
	if err != nil {
		fmt.Fprintln(stderr, "gpu-cost-report:", err)
		return 2
	}
	r, err := generate(ctx, v1.NewAPI(client), o)
	if err != nil {
		fmt.Fprintf(stderr, "gpu-cost-report: %s: %v\n", o.Prometheus, err)
		return 1
	}
	for _, w := range r.Warnings {
		fmt.Fprintln(stderr, "gpu-cost-report: warning:", w)
	}
	if err := write(r, o, stdout); err != nil {
		fmt.Fprintln(stderr, "gpu-cost-report: writing the report:", err)
		return 1
	}
	return 0
}

// generate queries Prometheus and builds the report.
func generate(ctx context.Context, api queryAPI, o options) (*report, error) {
	var srcs []*source
	for _, l := range o.Levels {
		if l != levelJob && !slices.Contains(srcs, &pods) {
			srcs = append(srcs, &pods)
		}
		if l == levelJob {
			srcs = append(srcs, &jobs)
		}
	}
	c, err := collect(ctx, api, o, srcs)
	if err != nil {
		return nil, err
	}
	return build(c, o)
}

func write(r *report, o options, stdout io.Writer) error {
	w, commit, abort, err := openOut(o.Out, stdout)
	if err != nil {
		return err
	}
	if o.Format == "json" {
		err = writeJSON(w, r)
	} else {
		err = writeCSV(w, r)
	}
	if err != nil {
		abort()
		return err
	}
	return commit()
}
