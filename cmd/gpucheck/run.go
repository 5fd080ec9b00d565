package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// options are gpucheck's settings (flags and environment).
type options struct {
	Agent       string
	NvidiaSMI   string
	Duration    time.Duration
	SMIInterval time.Duration
	Out         string
	Load        string
	Receiver    receiverSettings
}

// AgentStartedEnv is set for every nvidia-smi gpucheck runs: the time the agent was
// started (RFC 3339). Real nvidia-smi ignores it; the tests' stand-in, which replays the
// simulated backend, runs its clock from it as the agent's simulator does.
const AgentStartedEnv = "GPUCHECK_AGENT_STARTED"

// result is everything a run collected, for the report.
type result struct {
	Options  options
	Started  time.Time
	Finished time.Time
	// Problems are failures of the run itself (nvidia-smi failing, the agent exiting).
	Problems []string
	LoadNote string
	Samples  []smiSample
	Agent    *agentStore
	Checks   []*Check
	LGI      string
}

// run does the whole check: start the GPU process, the OTLP endpoint and the agent,
// sample nvidia-smi while the agent collects, stop everything, compare.
func run(ctx context.Context, o options) *result {
	res := &result{Options: o, Started: time.Now(), Agent: newAgentStore()}
	defer func() { res.Finished = time.Now() }()
	if err := os.MkdirAll(filepath.Join(o.Out, "nvidia-smi"), 0o755); err != nil {
		res.Problems = append(res.Problems, err.Error())
		return res
	}

	// nvidia-smi must answer before anything is started.
	first, err := sampleSMI(ctx, o, 0, time.Time{})
	if err != nil {
		res.Problems = append(res.Problems, err.Error())
		return res
	}

	load := startLoad(ctx, o.Load, filepath.Join(o.Out, "gpu-process.log"))
	res.LoadNote = load.Note
	defer load.stop()

	srv, err := startOTLP(res.Agent)
	if err != nil {
		res.Problems = append(res.Problems, err.Error())
		return res
	}
	defer srv.close()
	cfgPath := filepath.Join(o.Out, "agent-config.yaml")
	cfg, err := agentConfig(o.Receiver, srv.endpoint())
	if err == nil {
		err = os.WriteFile(cfgPath, cfg, 0o644)
	}
	if err != nil {
		res.Problems = append(res.Problems, "agent configuration: "+err.Error())
		return res
	}

	agent, exited, err := startAgent(o.Agent, cfgPath, filepath.Join(o.Out, "agent.log"))
	if err != nil {
		res.Problems = append(res.Problems, err.Error())
		return res
	}
	agentStarted := time.Now()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopAgent(agent, exited)
		}
	}
	defer stop()

	// The MIG profile names are only in `nvidia-smi mig -lgi`.
	if anyMIG(first) {
		out, err := runCommand(ctx, o.NvidiaSMI, agentStarted, "mig", "-lgi")
		_ = os.WriteFile(filepath.Join(o.Out, "nvidia-smi-mig-lgi.txt"), out, 0o644)
		res.LGI = string(out)
		if err != nil {
			res.LGI = ""
			res.Problems = append(res.Problems, fmt.Sprintf("nvidia-smi mig -lgi: %v (MIG profile names not compared)", err))
		}
	}

	deadline := agentStarted.Add(o.Duration)
	tick := time.NewTicker(o.SMIInterval)
	defer tick.Stop()
	n := 1
sampling:
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			res.Problems = append(res.Problems, "interrupted")
			break sampling
		case err := <-exited:
			res.Problems = append(res.Problems, fmt.Sprintf("the agent exited after %s: %v (see agent.log)", time.Since(agentStarted).Round(time.Second), err))
			exited = nil
			break sampling
		case <-tick.C:
			s, err := sampleSMI(ctx, o, n, agentStarted)
			n++
			if err != nil {
				res.Problems = append(res.Problems, err.Error())
				continue
			}
			res.Samples = append(res.Samples, s)
		}
	}
	stop()

	if res.Agent.exports == 0 {
		res.Problems = append(res.Problems, "the agent exported nothing to gpucheck (see agent.log)")
	}
	res.Checks = compare(compareInput{
		Samples:     res.Samples,
		Agent:       res.Agent,
		MIGProfiles: parseLGI(res.LGI),
		LGIError:    lgiError(res.LGI),
		MaxGap:      o.Receiver.Interval + o.Receiver.Interval/2 + time.Second,
	})
	return res
}

func anyMIG(s smiSample) bool {
	for _, g := range s.GPUs {
		if g.MIG == "Enabled" {
			return true
		}
	}
	return false
}

func lgiError(out string) string {
	if out == "" {
		return "nvidia-smi mig -lgi gave no output"
	}
	return ""
}

// sampleSMI runs `nvidia-smi -q -x` once, keeps its output and parses it.
func sampleSMI(ctx context.Context, o options, n int, agentStarted time.Time) (smiSample, error) {
	start := time.Now()
	out, err := runCommand(ctx, o.NvidiaSMI, agentStarted, "-q", "-x")
	end := time.Now()
	file := filepath.Join(o.Out, "nvidia-smi", fmt.Sprintf("%03d-%s.xml", n, start.UTC().Format("150405.000")))
	_ = os.WriteFile(file, out, 0o644)
	if err != nil {
		return smiSample{}, fmt.Errorf("%s -q -x: %w", o.NvidiaSMI, err)
	}
	s, err := parseSMI(out)
	if err != nil {
		return smiSample{}, fmt.Errorf("%s: %w", file, err)
	}
	s.Time = start.Add(end.Sub(start) / 2)
	s.File = file
	return s, nil
}

// runCommand runs nvidia-smi with a minute's limit; the error carries the last line of
// its output.
func runCommand(ctx context.Context, bin string, agentStarted time.Time, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = os.Environ()
	if !agentStarted.IsZero() {
		cmd.Env = append(cmd.Env, AgentStartedEnv+"="+agentStarted.Format(time.RFC3339Nano))
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String() + "\n" + string(out))
		if msg != "" {
			lines := strings.Split(msg, "\n")
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(lines[len(lines)-1]))
		}
	}
	return out, err
}

// startAgent runs the agent with the configuration; exited delivers its end.
func startAgent(bin, cfgPath, logPath string) (*exec.Cmd, chan error, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, nil, fmt.Errorf("agent binary: %w (build it with `make build`, or set AGENT_BIN)", err)
	}
	log, err := os.Create(logPath)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(bin, "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, nil, fmt.Errorf("start the agent %s: %w", bin, err)
	}
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		log.Close()
		if err == nil {
			err = errors.New("exit status 0")
		}
		exited <- err
	}()
	return cmd, exited, nil
}

// stopAgent asks the agent to shut down (SIGTERM), then kills it after 15 s.
func stopAgent(cmd *exec.Cmd, exited chan error) {
	if cmd == nil || exited == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}
