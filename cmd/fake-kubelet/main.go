// Command fake-kubelet serves the kubelet PodResources v1 API on a unix socket
// from a pods file, for demos and the testbed:
//
//	fake-kubelet --socket /tmp/kubelet.sock --pods pods-demo.yaml [--uuids GPU-a,GPU-b,...]
//
// The pods file (YAML or JSON, see fakekubelet.LoadPods) lists device ids
// either as UUIDs ("GPU-…", "GPU-…::1", "MIG-…") or by GPU index: "gpu:3" is
// the 4th GPU, "gpu:0::1" replica 1 of a time-sliced GPU 0. Index ids need
// --uuids, the GPU UUIDs in index order, comma-separated (e.g. those the GPU
// simulator generates), so a file can be written before the UUIDs are known.
// It runs until SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fakekubelet"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gpusim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "fake-kubelet:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("fake-kubelet", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", "", "unix socket to serve on (required)")
	podsFile := fs.String("pods", "", "YAML/JSON pods file (required)")
	uuids := fs.String("uuids", "", "comma-separated GPU UUIDs by index, for gpu:N device ids")
	simulated := fs.String("simulated", "", "SYSTEM:SEED of the GPU simulator (e.g. dgxh100:1), whose GPU UUIDs resolve gpu:N device ids")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *socket == "" || *podsFile == "" {
		return errors.New("--socket and --pods are required")
	}

	pods, allocatable, err := fakekubelet.LoadPods(*podsFile)
	if err != nil {
		return err
	}
	var uuidList []string
	if *uuids != "" {
		uuidList = strings.Split(*uuids, ",")
	}
	if *simulated != "" {
		if uuidList, err = simulatedUUIDs(*simulated); err != nil {
			return err
		}
	}
	pods, allocatable, err = fakekubelet.ResolveGPUIndexes(pods, allocatable, uuidList)
	if err != nil {
		return err
	}

	srv, err := fakekubelet.Start(*socket, pods, allocatable)
	if err != nil {
		return err
	}
	defer srv.Stop()
	fmt.Fprintf(stderr, "fake-kubelet: serving %d pods on %s\n", len(pods), *socket)
	<-ctx.Done()
	return nil
}

// simulatedUUIDs returns the UUIDs the GPU simulator gives the GPUs of a system and seed,
// so that a demo's kubelet hands out the GPUs the demo's collector sees.
func simulatedUUIDs(spec string) ([]string, error) {
	system, seedText, ok := strings.Cut(spec, ":")
	seed, err := strconv.ParseInt(seedText, 10, 64)
	if !ok || err != nil {
		return nil, fmt.Errorf("--simulated must be SYSTEM:SEED, got %q", spec)
	}
	sim, err := gpusim.New(gpusim.Options{System: system, Scenario: "idle", Seed: seed})
	if err != nil {
		return nil, err
	}
	return sim.UUIDs(), nil
}
