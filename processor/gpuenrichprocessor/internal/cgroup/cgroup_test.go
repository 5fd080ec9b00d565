package cgroup

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	id1 = "98a06d318c7bac860d88cf725e88a7e53516e5bb2cfe5b7e3a3ff0473bfe92a8"
	id2 = "639da35cfb35d90f60b9fb583482f24e5c9f0763b532f9dfae89591902729878"
	id3 = "f7766403702f2b4050fbea600fff0e9ac6bcc49d3f2af352e8324f0c485a55cd"
	id4 = "551fd3188a88f6aa1a864281295172c3e78e57b33ed76abd03ed0d7121251f1b"

	uid1 = "ff549e0d-f4c2-47f3-bfcb-c076e17b6b36"
	uid2 = "d338d846-6abc-495c-ba38-569817ad4646"
)

// systemd escapes the UID's dashes.
func esc(uid string) string { return strings.ReplaceAll(uid, "-", "_") }

// v1 repeats the path on every controller line.
func v1(path string) string {
	return "12:hugetlb:" + path + "\n" +
		"11:memory:" + path + "\n" +
		"10:cpu,cpuacct:" + path + "\n" +
		"9:devices:" + path + "\n" +
		"8:pids:" + path + "\n" +
		"1:name=systemd:" + path + "\n"
}

type parseCase struct {
	name    string
	content string
	want    Location
	wantErr error
}

func parseCases() []parseCase {
	return []parseCase{
		// systemd driver
		{
			name:    "v2 systemd containerd burstable",
			content: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(uid1) + ".slice/cri-containerd-" + id1 + ".scope\n",
			want:    Location{PodUID: uid1, ContainerID: id1, Runtime: "containerd", QoS: "burstable"},
		},
		{
			name:    "v1 systemd containerd burstable",
			content: v1("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"+esc(uid1)+".slice/cri-containerd-"+id1+".scope") + "0::/\n",
			want:    Location{PodUID: uid1, ContainerID: id1, Runtime: "containerd", QoS: "burstable"},
		},
		{
			name:    "v2 systemd crio besteffort",
			content: "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + esc(uid2) + ".slice/crio-" + id2 + ".scope\n",
			want:    Location{PodUID: uid2, ContainerID: id2, Runtime: "cri-o", QoS: "besteffort"},
		},
		{
			name:    "v2 systemd docker guaranteed",
			content: "0::/kubepods.slice/kubepods-pod" + esc(uid1) + ".slice/docker-" + id3 + ".scope\n",
			want:    Location{PodUID: uid1, ContainerID: id3, Runtime: "docker", QoS: "guaranteed"},
		},
		{
			name:    "v2 kind node cgroup root",
			content: "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" + esc(uid1) + ".slice/cri-containerd-" + id1 + ".scope\n",
			want:    Location{PodUID: uid1, ContainerID: id1, Runtime: "containerd", QoS: "besteffort"},
		},
		{
			name:    "v2 kind node seen from the host: container above the pod is ignored",
			content: "0::/system.slice/docker-" + id4 + ".scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod" + esc(uid1) + ".slice/cri-containerd-" + id1 + ".scope\n",
			want:    Location{PodUID: uid1, ContainerID: id1, Runtime: "containerd", QoS: "guaranteed"},
		},
		{
			name:    "v2 nested cgroup inside the container",
			content: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(uid1) + ".slice/cri-containerd-" + id1 + ".scope/init.scope\n",
			want:    Location{PodUID: uid1, ContainerID: id1, Runtime: "containerd", QoS: "burstable"},
		},
		// private cgroup namespace: relative paths
		{
			name:    "v2 namespace-relative containerd burstable",
			content: "0::/../../kubepods-burstable-pod" + esc(uid1) + ".slice/cri-containerd-" + id1 + ".scope\n",
			want:    Location{PodUID: uid1, ContainerID: id1, Runtime: "containerd", QoS: "burstable"},
		},
		{
			name:    "v2 namespace-relative cgroupfs: QoS unknown",
			content: "0::/../pod" + uid1 + "/" + id1 + "\n",
			want:    Location{PodUID: uid1, ContainerID: id1},
		},
		// cgroupfs driver
		{
			name:    "v1 cgroupfs containerd burstable",
			content: v1("/kubepods/burstable/pod" + uid1 + "/" + id1),
			want:    Location{PodUID: uid1, ContainerID: id1, QoS: "burstable"},
		},
		{
			name:    "v1 cgroupfs guaranteed",
			content: v1("/kubepods/pod" + uid2 + "/" + id2),
			want:    Location{PodUID: uid2, ContainerID: id2, QoS: "guaranteed"},
		},
		{
			name:    "v2 cgroupfs crio besteffort",
			content: "0::/kubepods/besteffort/pod" + uid2 + "/crio-" + id2 + "\n",
			want:    Location{PodUID: uid2, ContainerID: id2, Runtime: "cri-o", QoS: "besteffort"},
		},
		// hybrid and disagreeing lines
		{
			name: "hybrid: empty name=systemd and 0::/ lines skipped",
			content: "12:name=systemd:/\n" +
				"11:memory:/kubepods/besteffort/pod" + uid2 + "/crio-" + id2 + "\n" +
				"10:devices:/kubepods/besteffort/pod" + uid2 + "/crio-" + id2 + "\n" +
				"0::/\n",
			want: Location{PodUID: uid2, ContainerID: id2, Runtime: "cri-o", QoS: "besteffort"},
		},
		{
			name: "v1 pod-level line before a full line: full line wins",
			content: "3:cpuset:/kubepods/burstable/pod" + uid1 + "\n" +
				"2:memory:/kubepods/burstable/pod" + uid1 + "/" + id1 + "\n",
			want: Location{PodUID: uid1, ContainerID: id1, QoS: "burstable"},
		},
		{
			name: "v1 CRLF line endings",
			content: "2:memory:/kubepods/burstable/pod" + uid1 + "/" + id1 + "\r\n" +
				"1:name=systemd:/kubepods/burstable/pod" + uid1 + "/" + id1 + "\r\n",
			want: Location{PodUID: uid1, ContainerID: id1, QoS: "burstable"},
		},
		{
			name:    "no trailing newline",
			content: "0::/kubepods.slice/kubepods-pod" + esc(uid1) + ".slice/cri-containerd-" + id1 + ".scope",
			want:    Location{PodUID: uid1, ContainerID: id1, Runtime: "containerd", QoS: "guaranteed"},
		},
		{
			name:    "upper-case hex is normalised",
			content: "0::/kubepods/pod" + strings.ToUpper(uid1) + "/" + strings.ToUpper(id1) + "\n",
			want:    Location{PodUID: uid1, ContainerID: id1, QoS: "guaranteed"},
		},
		// pod without container
		{
			name:    "pod-level path systemd",
			content: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(uid1) + ".slice\n",
			want:    Location{PodUID: uid1, QoS: "burstable"},
		},
		{
			name:    "pod-level path cgroupfs",
			content: v1("/kubepods/besteffort/pod" + uid2),
			want:    Location{PodUID: uid2, QoS: "besteffort"},
		},
		// containers outside Kubernetes
		{
			name:    "plain docker cgroupfs",
			content: v1("/docker/" + id3),
			want:    Location{ContainerID: id3, Runtime: "docker"},
		},
		{
			name:    "plain docker systemd",
			content: "0::/system.slice/docker-" + id3 + ".scope\n",
			want:    Location{ContainerID: id3, Runtime: "docker"},
		},
		{
			name:    "podman rootless",
			content: "0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + id4 + ".scope\n",
			want:    Location{ContainerID: id4, Runtime: "podman"},
		},
		{
			name:    "podman cgroupfs",
			content: v1("/libpod_parent/libpod-" + id4),
			want:    Location{ContainerID: id4, Runtime: "podman"},
		},
		{
			name:    "docker in docker: outermost container",
			content: "0::/docker/" + id3 + "/docker/" + id4 + "\n",
			want:    Location{ContainerID: id3, Runtime: "docker"},
		},
		// not a container
		{
			name:    "crio conmon systemd",
			content: "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + esc(uid2) + ".slice/crio-conmon-" + id2 + ".scope\n",
			want:    Location{PodUID: uid2, QoS: "besteffort"},
		},
		{
			name:    "crio conmon cgroupfs",
			content: v1("/kubepods/besteffort/pod" + uid2 + "/crio-conmon-" + id2),
			want:    Location{PodUID: uid2, QoS: "besteffort"},
		},
		{
			name:    "user.slice v2",
			content: "0::/user.slice/user-1000.slice/session-3.scope\n",
			want:    Location{},
		},
		{
			name:    "system.slice v1",
			content: v1("/system.slice/nvidia-persistenced.service") + "0::/system.slice/nvidia-persistenced.service\n",
			want:    Location{},
		},
		{
			name:    "root cgroup v2",
			content: "0::/\n",
			want:    Location{},
		},
		{
			name:    "root cgroup v1",
			content: v1("/"),
			want:    Location{},
		},
		{
			name:    "junk",
			content: "\x00\xff not a cgroup file \n::::\n:\n\n",
			want:    Location{},
		},
		{
			name:    "path without hierarchy fields",
			content: "/kubepods/pod" + uid1 + "/" + id1 + "\n",
			wantErr: ErrUnreadable,
		},
		{
			name:    "id too short",
			content: "0::/docker/" + id1[:63] + "\n",
			want:    Location{},
		},
		{
			name:    "id too long",
			content: "0::/docker/" + id1 + "0\n",
			want:    Location{},
		},
		{
			name:    "pod prefix glued to another word",
			content: "0::/xpod" + uid1 + "\n",
			want:    Location{},
		},
		// static (mirror) pods: the kubelet's 32-hex config hash is the UID
		{
			name:    "v2 systemd static pod",
			content: "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod6a2cb8a2c2fd95c5e6d9e3f1b0d1c7aa.slice/cri-containerd-" + id1 + ".scope\n",
			want:    Location{PodUID: "6a2cb8a2c2fd95c5e6d9e3f1b0d1c7aa", ContainerID: id1, Runtime: "containerd", QoS: "besteffort"},
		},
		{
			name:    "v1 cgroupfs static pod",
			content: v1("/kubepods/burstable/pod6A2CB8A2C2FD95C5E6D9E3F1B0D1C7AA/" + id2),
			want:    Location{PodUID: "6a2cb8a2c2fd95c5e6d9e3f1b0d1c7aa", ContainerID: id2, QoS: "burstable"},
		},
		// the kernel marks a removed cgroup
		{
			name:    "v2 deleted container cgroup",
			content: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(uid1) + ".slice/cri-containerd-" + id1 + ".scope (deleted)\n",
			want:    Location{PodUID: uid1, ContainerID: id1, Runtime: "containerd", QoS: "burstable"},
		},
		// crun runs the workload in a "container" sub-cgroup of CRI-O's scope
		{
			name:    "v2 crio crun sub-cgroup",
			content: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(uid2) + ".slice/crio-" + id2 + ".scope/container\n",
			want:    Location{PodUID: uid2, ContainerID: id2, Runtime: "cri-o", QoS: "burstable"},
		},
		// Slurm
		{
			name: "slurm cgroup v1 task",
			content: "11:devices:/slurm/uid_1000/job_4242/step_0/task_0\n" +
				"10:memory:/slurm/uid_1000/job_4242/step_0/task_0\n" +
				"7:freezer:/slurm/uid_1000/job_4242/step_0\n" +
				"4:cpuset:/slurm/uid_1000/job_4242/step_0\n" +
				"1:name=systemd:/system.slice/slurmd.service\n",
			want: Location{SlurmJob: "4242", SlurmStep: "0"},
		},
		{
			name:    "slurm cgroup v2 batch step",
			content: "0::/system.slice/slurmstepd.scope/job_77/step_batch/user/task_0\n",
			want:    Location{SlurmJob: "77", SlurmStep: "batch"},
		},
		{
			name:    "slurm cgroup v2 job level (extern step not yet joined)",
			content: "0::/system.slice/slurmstepd.scope/job_77\n",
			want:    Location{SlurmJob: "77"},
		},
		{
			name:    "slurm multiple-slurmd root",
			content: "5:devices:/slurm_node07/uid_0/job_9/step_extern\n",
			want:    Location{SlurmJob: "9", SlurmStep: "extern"},
		},
		{
			name:    "slurm 26.05 SLUID job directory",
			content: "0::/system.slice/slurmstepd.scope/sEKNKTV3WPV500/step_0/user/task_1\n",
			want:    Location{SlurmSLUID: "sEKNKTV3WPV500", SlurmStep: "0"},
		},
		{
			name:    "slurm heterogeneous job component step, multiple-slurmd v2",
			content: "0::/system.slice/node07_slurmstepd.scope/job_81/step_0+1/user/task_0\n",
			want:    Location{SlurmJob: "81", SlurmStep: "0+1"},
		},
		{
			name:    "slurm v1 under a custom CgroupPrepend",
			content: "4:cpuset:/hpc/uid_2001/job_55/step_batch/task_0\n1:name=systemd:/system.slice/slurmd.service\n",
			want:    Location{SlurmJob: "55", SlurmStep: "batch"},
		},
		{
			name:    "runc without the systemd driver under a systemd kubelet",
			content: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(uid1) + ".slice:cri-containerd:" + id1 + "\n",
			want:    Location{PodUID: uid1, ContainerID: id1, Runtime: "containerd", QoS: "burstable"},
		},
		{
			name:    "job_ segment outside Slurm is not a job",
			content: "0::/system.slice/cron.service/job_12\n",
			want:    Location{},
		},
		{
			name:    "slurmstepd itself",
			content: "0::/system.slice/slurmstepd.scope/system\n",
			want:    Location{},
		},
		{
			name:    "garbage",
			content: "not a cgroup file\n",
			wantErr: ErrUnreadable,
		},
		{
			name:    "empty",
			content: "",
			wantErr: ErrUnreadable,
		},
		{
			name:    "unknown runtime prefix",
			content: "0::/system.slice/runc-" + id1 + ".scope\n",
			want:    Location{},
		},
	}
}

func TestParse(t *testing.T) {
	for _, tc := range parseCases() {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.content)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.Equal(t, Location{}, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

var (
	uuidRe  = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	hex64Re = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// Static pods: the kubelet's config hash.
	staticUIDRe = regexp.MustCompile(`^[0-9a-f]{32}$`)
	digitsRe    = regexp.MustCompile(`^[0-9]+$`)
)

func FuzzParse(f *testing.F) {
	// Seeds live in testdata/fuzz/FuzzParse (one /proc/<pid>/cgroup content per file).
	f.Fuzz(func(t *testing.T, content string) {
		c, err := Parse(content)
		if err != nil {
			if err != ErrUnreadable {
				t.Fatalf("unexpected error %v", err)
			}
			if c != (Location{}) {
				t.Fatalf("non-empty location %+v with error", c)
			}
			return
		}
		if (c.SlurmJob != "" || c.SlurmSLUID != "") && (c.PodUID != "" || c.ContainerID != "") {
			t.Fatalf("a Slurm job inside a container: %+v", c)
		}
		if c.SlurmStep != "" && c.SlurmJob == "" && c.SlurmSLUID == "" {
			t.Fatalf("a Slurm step without its job: %+v", c)
		}
		if c.SlurmJob != "" && !digitsRe.MatchString(c.SlurmJob) {
			t.Fatalf("malformed Slurm job %q", c.SlurmJob)
		}
		if c.PodUID != "" && !uuidRe.MatchString(c.PodUID) && !staticUIDRe.MatchString(c.PodUID) {
			t.Fatalf("malformed pod UID %q", c.PodUID)
		}
		if c.ContainerID != "" && !hex64Re.MatchString(c.ContainerID) {
			t.Fatalf("malformed container ID %q", c.ContainerID)
		}
		switch c.Runtime {
		case "", "containerd", "cri-o", "docker", "podman":
		default:
			t.Fatalf("unknown runtime %q", c.Runtime)
		}
		switch c.QoS {
		case "", "guaranteed", "burstable", "besteffort":
		default:
			t.Fatalf("unknown QoS %q", c.QoS)
		}
		if c.PodUID == "" && c.QoS != "" {
			t.Fatalf("QoS %q without pod", c.QoS)
		}
	})
}

// The agent runs with hostPID (or a host /proc) but in its own cgroup namespace, the
// default for containerd and CRI-O on cgroup v2. The kernel prints another process's cgroup
// relative to the *reader's* namespace root, one "../" per level above it
// (Documentation/admin-guide/cgroup-v2.rst, "Namespace": "0::/../container_id2/sub_cgrp_1"
// from a sibling namespace; cgroup_namespaces(7): the same for each v1 hierarchy). The agent's
// root is its own container's cgroup, so a workload's line climbs out of it and names the
// workload's pod and container below: they are still found, and nothing above the root is
// needed (seeds in testdata/fuzz/FuzzParse/cgroupns-*).
func TestParseCgroupNamespaceRelativePaths(t *testing.T) {
	for _, tc := range []parseCase{
		{
			name:    "kernel doc: a sibling namespace's process",
			content: "0::/../container_id2/sub_cgrp_1\n",
			want:    Location{},
		},
		{
			name:    "v2 systemd, the agent under another slice",
			content: "0::/../../kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(uid1) + ".slice/cri-containerd-" + id1 + ".scope\n",
			want:    Location{PodUID: uid1, ContainerID: id1, Runtime: "containerd", QoS: "burstable"},
		},
		{
			name:    "v2 systemd, the agent a besteffort pod's container, the workload a guaranteed pod's",
			content: "0::/../../../kubepods-pod" + esc(uid2) + ".slice/crio-" + id2 + ".scope\n",
			want:    Location{PodUID: uid2, ContainerID: id2, Runtime: "cri-o", QoS: "guaranteed"},
		},
		{
			name:    "v2 cgroupfs, another QoS class",
			content: "0::/../../../burstable/pod" + uid1 + "/" + id1 + "\n",
			want:    Location{PodUID: uid1, ContainerID: id1, QoS: "burstable"},
		},
		{
			name:    "v2 relative and deleted",
			content: "0::/../../kubepods-besteffort-pod" + esc(uid2) + ".slice/cri-containerd-" + id2 + ".scope (deleted)\n",
			want:    Location{PodUID: uid2, ContainerID: id2, Runtime: "containerd", QoS: "besteffort"},
		},
		{
			name: "v1 private namespace: each hierarchy relative to its own root",
			content: "12:hugetlb:/../../../burstable/pod" + uid1 + "/" + id1 + "\n" +
				"11:memory:/../../../burstable/pod" + uid1 + "/" + id1 + "\n" +
				"9:devices:/../../../burstable/pod" + uid1 + "/" + id1 + "\n" +
				"1:name=systemd:/../../..\n" +
				"0::/\n",
			want: Location{PodUID: uid1, ContainerID: id1, QoS: "burstable"},
		},
		{
			name:    "v1 systemd driver, relative",
			content: v1("/../../kubepods-besteffort-pod" + esc(uid2) + ".slice/cri-containerd-" + id2 + ".scope"),
			want:    Location{PodUID: uid2, ContainerID: id2, Runtime: "containerd", QoS: "besteffort"},
		},
		{
			name:    "the agent's own namespace root",
			content: "0::/\n",
			want:    Location{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.content)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
