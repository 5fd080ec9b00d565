//go:build e2e

package testbed

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/dashboards"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fakekubelet"
	"github.com/otelcol-gpu/otelcol-gpu/internal/promql"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// The bare-metal Slurm node: eight simulated H100s in steady training (the simulator's
// process on GPU i is PID 20000+i), no Kubernetes. The /proc fixture puts the processes in
// Slurm jobs by their cgroups, in the layouts Slurm writes (one node would use one of them;
// the agent reads each process's own):
//   - job 7001, cgroup v2 (slurmstepd.scope/job_<id>/step_<step>/user/task_<n>): GPUs 0 and
//     1 (step 0) and GPU 2 (the batch step);
//   - job 4242, cgroup v1 (/slurm/uid_<uid>/job_<id>/step_<step>/task_<n>): GPUs 3 and 4;
//   - a job named only by its SLUID (Slurm 26.05+, cgroup v2): GPU 5;
//   - the host: the DCGM host engine on GPU 6, an SSH session on GPU 7.
const slurmSLUID = "sEKNKTV3WPV500"

// slurmJobOnGPU is the job of the process on each GPU ("" for the host), keyed as jobKey
// names a series' job: the slurm_job_id, or "sluid:<SLUID>". Process series are told apart
// by GPU: the agent leaves the PID off them by default.
var slurmJobOnGPU = map[string]string{
	"0": "7001", "1": "7001", "2": "7001",
	"3": "4242", "4": "4242",
	"5": "sluid:" + slurmSLUID,
	"6": "", "7": "",
}

// slurmStepOnGPU is the job step of the process on each GPU.
var slurmStepOnGPU = map[string]string{"0": "0", "1": "0", "2": "batch", "3": "0", "4": "0", "5": "0"}

// slurmJobs are the jobs of the node, keyed as in slurmJobOnGPU, with their GPU count.
var slurmJobs = map[string]int{"7001": 3, "4242": 2, "sluid:" + slurmSLUID: 1}

func cgroupV1(path string) string {
	var b strings.Builder
	for i, ctrl := range []string{"memory", "cpu,cpuacct", "rdma", "freezer", "blkio", "pids", "cpuset", "net_cls,net_prio", "perf_event", "hugetlb", "devices"} {
		p := path
		if ctrl == "freezer" { // proctrack/cgroup adds pids at the step, not the task
			p = p[:strings.LastIndex(p, "/")]
		}
		if ctrl == "rdma" || ctrl == "blkio" || ctrl == "pids" || ctrl == "net_cls,net_prio" || ctrl == "perf_event" || ctrl == "hugetlb" {
			p = "/system.slice/slurmd.service" // controllers Slurm does not manage
		}
		fmt.Fprintf(&b, "%d:%s:%s\n", i+2, ctrl, p)
	}
	b.WriteString("1:name=systemd:/system.slice/slurmd.service\n")
	return b.String()
}

// slurmNode writes the node's /proc: a cgroup and a stat file per GPU process.
func slurmNode(t *testing.T) agentNode {
	t.Helper()
	dir := fakekubelet.SocketDir(t)
	procRoot := filepath.Join(dir, "proc")
	v2 := func(job, step, task string) string {
		return "0::/system.slice/slurmstepd.scope/" + job + "/step_" + step + "/user/task_" + task + "\n"
	}
	cgroups := map[int]string{
		20000: v2("job_7001", "0", "0"),
		20001: v2("job_7001", "0", "1"),
		20002: v2("job_7001", "batch", "0"),
		20003: cgroupV1("/slurm/uid_1000/job_4242/step_0/task_0"),
		20004: cgroupV1("/slurm/uid_1000/job_4242/step_0/task_1"),
		20005: v2(slurmSLUID, "0", "0"),
		20006: "0::/system.slice/nvidia-dcgm.service\n",
		20007: "0::/user.slice/user-1002.slice/session-42.scope\n",
	}
	for pid, cg := range cgroups {
		mustWrite(t, filepath.Join(procRoot, fmt.Sprint(pid), "cgroup"), cg)
		// Field 22 is the start time: the processor tells a reused PID from its process by it.
		mustWrite(t, filepath.Join(procRoot, fmt.Sprint(pid), "stat"),
			fmt.Sprintf("%d (python3) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 1 1 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n", pid, 5000+pid))
	}
	// The shipped bare-host overlay: no kubelet, no Kubernetes API.
	return agentNode{procRoot: procRoot, overlays: []string{"../deploy/config-overlays/bare-host.yaml"}}
}

// jobKey names a series' Slurm job as slurmJobOnGPU does ("" when it has none).
func jobKey(l map[string]string) string {
	if s := l["slurm_job_sluid"]; s != "" {
		return "sluid:" + s
	}
	return l["slurm_job_id"]
}

// byJob maps each series of q to its job key; a job seen twice gets the sum.
func byJob(p *prom.Server, q string) (map[string]float64, error) {
	s, err := p.Query(q)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, x := range s {
		out[jobKey(x.Labels)] += x.Value
	}
	return out, nil
}

// sameJobs checks that got has exactly the node's jobs.
func sameJobs(what string, got map[string]float64) error {
	if len(got) != len(slurmJobs) {
		return fmt.Errorf("%s: jobs %v, want %v", what, got, slurmJobs)
	}
	for j := range slurmJobs {
		if _, ok := got[j]; !ok {
			return fmt.Errorf("%s: job %s missing from %v", what, j, got)
		}
	}
	return nil
}

// TestSlurmJobsLandInPrometheus: on a bare-metal Slurm node (the shipped agent config with
// the bare-host overlay), GPU processes carry their job and step, per-job series sum each
// job's processes on each GPU, host processes belong to no job, and the per-job recording
// rules and the workloads dashboard's Slurm row answer for every job.
func TestSlurmJobsLandInPrometheus(t *testing.T) {
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [%s]\n", strings.Join(fastRules(t), ", "))
	p := prom.Start(t, cfg)
	startAgentOn(t, p, "e2e-slurm", "dgxh100", "steady-training", slurmNode(t))
	const host = `host_name="e2e-slurm"`

	t.Run("processes carry their job and step, host processes nothing", func(t *testing.T) {
		prom.Eventually(t, 60*time.Second, "process labels", func() error {
			s, err := p.Query(`nvidia_gpu_process_memory_usage_bytes{` + host + `}`)
			if err != nil {
				return err
			}
			onGPU := map[string]map[string]string{}
			for _, x := range s {
				onGPU[x.Labels["nvidia_gpu_index"]] = x.Labels
			}
			for gpu, job := range slurmJobOnGPU {
				l := onGPU[gpu]
				if l == nil {
					return fmt.Errorf("no process series on GPU %s yet (have %d)", gpu, len(s))
				}
				if jobKey(l) != job || l["slurm_job_step"] != slurmStepOnGPU[gpu] {
					return fmt.Errorf("the process on GPU %s: job %q step %q, want %q step %q: %v", gpu, jobKey(l), l["slurm_job_step"], job, slurmStepOnGPU[gpu], l)
				}
				if job != "" && l["nvidia_gpu_attribution_method"] != "cgroup" {
					return fmt.Errorf("the process on GPU %s: attribution method %q, want cgroup", gpu, l["nvidia_gpu_attribution_method"])
				}
				if job == "" && l["nvidia_gpu_attribution_method"] != "" {
					return fmt.Errorf("the host's process on GPU %s attributed: %v", gpu, l)
				}
				if strings.HasPrefix(job, "sluid:") && l["slurm_job_id"] != "" {
					return fmt.Errorf("the SLUID job's process on GPU %s has a job ID: %v", gpu, l)
				}
				for k := range l {
					if strings.HasPrefix(k, "k8s_") {
						return fmt.Errorf("the process on GPU %s has %s on a node without Kubernetes", gpu, k)
					}
				}
			}
			return nil
		})
	})

	t.Run("per-job series: each job's processes on each GPU, no host process", func(t *testing.T) {
		prom.Eventually(t, 60*time.Second, "per-job series", func() error {
			s, err := p.Query(`nvidia_gpu_job_memory_usage_bytes{` + host + `}`)
			if err != nil {
				return err
			}
			gpus := map[string]string{}
			for _, x := range s {
				if x.Labels["slurm_job_step"] != "" {
					return fmt.Errorf("a job's series carries a step: %v", x.Labels)
				}
				gpus[x.Labels["nvidia_gpu_index"]] = jobKey(x.Labels)
			}
			for gpu, job := range slurmJobOnGPU {
				if gpus[gpu] != job {
					return fmt.Errorf("GPU %s: per-job series for %q, want %q (all: %v)", gpu, gpus[gpu], job, gpus)
				}
			}
			// Both sums read in one evaluation, so they see the same collection.
			diff, err := byJob(p, `sum by (slurm_job_id, slurm_job_sluid) (nvidia_gpu_job_memory_usage_bytes{`+host+`})
  - sum by (slurm_job_id, slurm_job_sluid) (nvidia_gpu_process_memory_usage_bytes{`+host+`})`)
			if err != nil {
				return err
			}
			if err := sameJobs("job memory − its processes' memory", diff); err != nil {
				return err
			}
			for j, d := range diff {
				if d != 0 {
					return fmt.Errorf("job %s: per-job memory differs from its processes' sum by %v bytes", j, d)
				}
			}
			for _, q := range []string{
				`nvidia_gpu_job_utilization_ratio{` + host + `}`,
				`rate(nvidia_gpu_job_energy_joules_total{` + host + `}[10s])`,
			} {
				v, err := byJob(p, q)
				if err != nil {
					return err
				}
				if err := sameJobs(q, v); err != nil {
					return err
				}
				for j, x := range v {
					if x <= 0 {
						return fmt.Errorf("%s: job %s at %v", q, j, x)
					}
				}
			}
			return nil
		})
	})

	t.Run("per-job recording rules", func(t *testing.T) {
		prom.Eventually(t, 60*time.Second, "recording rules", func() error {
			count, err := byJob(p, `slurm_job:gpu_count:count`)
			if err != nil {
				return err
			}
			for j, n := range slurmJobs {
				if count[j] != float64(n) {
					return fmt.Errorf("slurm_job:gpu_count:count %v, want %v", count, slurmJobs)
				}
			}
			mem, err := byJob(p, `slurm_job:gpu_memory_usage_bytes:sum`)
			if err != nil {
				return err
			}
			procs, err := byJob(p, `sum by (slurm_job_id, slurm_job_sluid) (nvidia_gpu_process_memory_usage_bytes{`+host+`, nvidia_gpu_attribution_method="cgroup"})`)
			if err != nil {
				return err
			}
			if err := sameJobs("slurm_job:gpu_memory_usage_bytes:sum", mem); err != nil {
				return err
			}
			for j, v := range mem {
				// The rule ran at most a second before: training memory moves under 1 %.
				if math.Abs(v-procs[j]) > 0.01*procs[j] {
					return fmt.Errorf("job %s: slurm_job:gpu_memory_usage_bytes:sum %v, its processes %v", j, v, procs[j])
				}
			}
			for _, rule := range []string{"slurm_job:gpu_hours:sum", "slurm_job:gpu_used_hours:sum", "slurm_job:gpu_utilization:avg", "slurm_job:gpu_energy_kwh:sum", "slurm_job:gpu_power_watts:sum_rate5m"} {
				v, err := byJob(p, rule)
				if err != nil {
					return err
				}
				if err := sameJobs(rule, v); err != nil {
					return err
				}
				for j, x := range v {
					if x <= 0 || (rule == "slurm_job:gpu_hours:sum" && x > float64(slurmJobs[j])) {
						return fmt.Errorf("%s: job %s at %v", rule, j, x)
					}
				}
			}
			return nil
		})
	})

	t.Run("the workloads dashboard's Slurm row shows every job", func(t *testing.T) {
		var workloads dashboards.Dashboard
		for _, d := range dashboards.All() {
			if d.UID == "gpu-workloads" {
				workloads = d
			}
		}
		queries, err := workloads.Queries()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, q := range queries {
			names, err := promql.MetricNames(q)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "nvidia_gpu_job_") }) {
				continue
			}
			n++
			expr := promql.OnAll(q)
			prom.Eventually(t, 30*time.Second, expr, func() error {
				s, err := p.Query(expr)
				if err != nil {
					return err
				}
				if len(s) == 0 {
					return fmt.Errorf("no data")
				}
				jobs := map[string]float64{}
				for _, x := range s {
					if k := jobKey(x.Labels); k != "" {
						jobs[k]++
					}
				}
				if len(jobs) == 0 {
					return nil // a total over all jobs
				}
				return sameJobs(expr, jobs)
			})
		}
		if n < 10 {
			t.Fatalf("%d queries of the workloads dashboard read per-job series, want the Slurm row's", n)
		}
	})
}
