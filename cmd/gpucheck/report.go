package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// summary counts the checks.
type summary struct {
	Pass, Fail, Skip int
	Problems         int
}

func (r *result) summary() summary {
	var s summary
	for _, c := range r.Checks {
		switch c.Status {
		case statusPass:
			s.Pass++
		case statusFail:
			s.Fail++
		default:
			s.Skip++
		}
	}
	s.Problems = len(r.Problems)
	return s
}

// ok: the run itself worked, something was compared, and nothing failed.
func (r *result) ok() bool {
	s := r.summary()
	return s.Problems == 0 && s.Fail == 0 && s.Pass > 0
}

// summaryLine is the one line gpucheck prints last.
func (r *result) summaryLine(reportPath string) string {
	s := r.summary()
	verdict := "PASS"
	if !r.ok() {
		verdict = "FAIL"
	}
	line := fmt.Sprintf("gpucheck: %s: %d checks passed, %d failed, %d not comparable; %d nvidia-smi samples, %d agent exports",
		verdict, s.Pass, s.Fail, s.Skip, len(r.Samples), r.Agent.exports)
	if s.Problems > 0 {
		line += fmt.Sprintf("; %d problem(s) with the run", s.Problems)
	}
	return line + "; report: " + reportPath
}

// writeReport writes report.md and report.json into the output folder.
func writeReport(r *result) (string, error) {
	md := filepath.Join(r.Options.Out, "report.md")
	f, err := os.Create(md)
	if err != nil {
		return md, err
	}
	writeMarkdown(f, r)
	if err := f.Close(); err != nil {
		return md, err
	}
	js, err := json.MarshalIndent(jsonReport(r), "", "  ")
	if err != nil {
		return md, err
	}
	return md, os.WriteFile(filepath.Join(r.Options.Out, "report.json"), js, 0o644)
}

func writeMarkdown(w io.Writer, r *result) {
	s := r.summary()
	verdict := "PASS"
	if !r.ok() {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "# gpucheck: the agent against nvidia-smi — %s\n\n", verdict)
	fmt.Fprintf(w, "%d checks passed, %d failed, %d not comparable.\n\n", s.Pass, s.Fail, s.Skip)
	host, _ := os.Hostname()
	driver := ""
	if len(r.Samples) > 0 {
		driver = r.Samples[0].Driver
	}
	o := r.Options
	fmt.Fprintf(w, "| | |\n|---|---|\n")
	fmt.Fprintf(w, "| host | %s |\n", host)
	fmt.Fprintf(w, "| run | %s – %s (%s) |\n", r.Started.UTC().Format(time.RFC3339), r.Finished.UTC().Format(time.RFC3339), r.Finished.Sub(r.Started).Round(time.Second))
	fmt.Fprintf(w, "| driver | %s |\n", driver)
	fmt.Fprintf(w, "| agent | %s (backend %s, collection every %s; agent-config.yaml, agent.log) |\n", o.Agent, o.Receiver.Backend, o.Receiver.Interval)
	fmt.Fprintf(w, "| nvidia-smi | %s, every %s: %d samples (nvidia-smi/) |\n", o.NvidiaSMI, o.SMIInterval, len(r.Samples))
	fmt.Fprintf(w, "| agent exports | %d |\n", r.Agent.exports)
	fmt.Fprintf(w, "| GPU process | %s |\n", r.LoadNote)
	fmt.Fprintf(w, "\nEach value of each nvidia-smi sample is compared with the agent's collection closest in time (at most %s apart); a row shows the pair farthest apart, and fails if any pair is outside the tolerance. report.json has every pair.\n\n",
		o.Receiver.Interval+o.Receiver.Interval/2+time.Second)
	if len(r.Problems) > 0 {
		fmt.Fprintf(w, "## Problems with the run\n\n")
		for _, p := range r.Problems {
			fmt.Fprintf(w, "- %s\n", p)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "## Checks\n\n| GPU | subject | field | nvidia-smi | agent | tolerance | pairs | result | note |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range r.Checks {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %d | %s | %s |\n",
			cell(c.GPU), cell(c.Subject), cell(c.Field), cell(c.SMI), cell(c.Agent), cell(c.Tolerance), c.Pairs, strings.ToUpper(string(c.Status)), cell(c.Note))
	}
}

func cell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

func jsonReport(r *result) any {
	s := r.summary()
	return map[string]any{
		"pass":        r.ok(),
		"passed":      s.Pass,
		"failed":      s.Fail,
		"skipped":     s.Skip,
		"problems":    r.Problems,
		"started":     r.Started,
		"finished":    r.Finished,
		"agent":       r.Options.Agent,
		"backend":     r.Options.Receiver.Backend,
		"interval":    r.Options.Receiver.Interval.String(),
		"nvidia_smi":  r.Options.NvidiaSMI,
		"samples":     len(r.Samples),
		"exports":     r.Agent.exports,
		"gpu_process": r.LoadNote,
		"checks":      r.Checks,
	}
}
