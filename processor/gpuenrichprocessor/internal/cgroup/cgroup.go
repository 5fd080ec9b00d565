// Package cgroup tells where a host PID runs — a Kubernetes pod, a container
// outside Kubernetes, a Slurm job, or the host itself — by reading
// /proc/<pid>/cgroup.
//
// NVML reports host-namespace PIDs, so the collector reads the host's /proc
// (mounted at a configurable root) rather than its own.
package cgroup

import (
	"errors"
	"regexp"
	"strings"
)

// Location is what a process's cgroup says about where it runs. A zero
// Location is a host process (a system service, a user's session).
type Location struct {
	// PodUID is the kubelet's pod UID: canonical dashed lower-case form, or
	// for static (file or URL) pods the 32-hex config hash the kubelet uses
	// as their UID, e.g. "3f1c2d4e-5b6a-4c7d-8e9f-0a1b2c3d4e5f".
	PodUID      string
	ContainerID string // 64 hex chars, lower-case, without runtime prefix
	Runtime     string // "containerd" | "cri-o" | "docker" | "podman" | "" when the path does not say
	QoS         string // "guaranteed" | "burstable" | "besteffort" | "" when unknown
	// SlurmJob and SlurmStep name the Slurm job and step ("0", "0+1" for a
	// heterogeneous job's component, "batch", "extern", "interactive") of a
	// process slurmstepd placed. Slurm 26.05+ names cgroup v2 job directories by
	// the job's SLUID instead of its ID (unless CgroupJobIdPaths=yes): then
	// SlurmSLUID is set and SlurmJob is empty.
	SlurmJob, SlurmSLUID, SlurmStep string
}

// InPod reports whether the process runs in a Kubernetes pod.
func (l Location) InPod() bool { return l.PodUID != "" }

// IsHost reports whether the cgroup names no pod, container or job.
func (l Location) IsHost() bool { return l == Location{} }

// ErrProcessGone: the process exited — <procRoot>/<pid> no longer exists (ENOENT) under a
// proc root that shows other processes, or its files fail with ESRCH. This is a normal
// event (NVML listed it a moment before it ended), not an error to log; it must not be
// mistaken for a process whose cgroup cannot be read.
var ErrProcessGone = errors.New("cgroup: process is gone")

// ErrProcessHidden: <procRoot>/<pid> does not exist, but neither does <procRoot>/1, so
// the proc root shows no other process (hidepid=invisible, or a proc root that is not
// the host's /proc): whether the process still runs cannot be told. Its cgroup is
// unreadable, not gone.
var ErrProcessHidden = errors.New("cgroup: the proc root does not show the process")

// ErrUnreadable: the content is not a /proc/<pid>/cgroup file (no
// "hierarchy:controllers:path" line).
var ErrUnreadable = errors.New("cgroup: no cgroup line")

var (
	// podSegment matches one path segment naming a pod cgroup: "pod<uid>"
	// (cgroupfs) or "<prefix>-pod<uid>.slice" (systemd, where the UID's dashes
	// are escaped to underscores). The prefix carries the QoS class with the
	// systemd driver, e.g. "kubepods-burstable". Any prefix is accepted
	// because kubelet's cgroup root is configurable (kind uses
	// "kubelet-kubepods-..."). Static pods' UIDs are the kubelet's 32-hex
	// config hash, without dashes.
	podSegment = regexp.MustCompile(`^(?:(.*)-)?pod([0-9a-fA-F]{8}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{12}|[0-9a-fA-F]{32})(?:\.slice)?$`)

	// containerSegment matches one path segment naming a container cgroup:
	// "<runtime>-<id>.scope" (systemd), "<runtime>-<id>" or a bare "<id>"
	// (cgroupfs).
	containerSegment = regexp.MustCompile(`^(?:(cri-containerd|crio|docker|libpod)-)?([0-9a-fA-F]{64})(?:\.scope)?$`)

	// conmonSegment is CRI-O's container monitor. It lives next to the
	// container, in the pod's cgroup with conmon_cgroup = "pod", but is not the
	// container: its process belongs to the pod and to no container.
	conmonSegment = regexp.MustCompile(`^crio-conmon-[0-9a-fA-F]{64}(?:\.scope)?$`)

	// Slurm's cgroup plugins: v1 "<CgroupPrepend, default /slurm>/uid_<uid>/job_<id>/step_<step>/task_<n>",
	// v2 ".../[<node>_]slurmstepd.scope/job_<id>/step_<step>/user/task_<n>"; from
	// 26.05 the v2 job directory is the job's SLUID: "s" and 13 Crockford base32
	// characters.
	slurmRootSegment = regexp.MustCompile(`^(?:[^/]+_)?slurmstepd\.scope$|^uid_[0-9]+$`)
	slurmJobSegment  = regexp.MustCompile(`^job_([0-9]+)$`)
	slurmSLUID       = regexp.MustCompile(`^s[0-9A-HJKMNP-TV-Z]{13}$`)
	slurmStepSegment = regexp.MustCompile(`^step_([0-9]+(?:\+[0-9]+)?|batch|extern|interactive)$`)
)

// runcSystemdPath is how containerd's runc shows a container when the kubelet uses the
// systemd cgroup driver but runc does not (SystemdCgroup=false, a misconfigured node):
// the cgroupsPath "<slice>:cri-containerd:<id>" becomes one literal directory.
const runcSystemdPath = ":cri-containerd:"

// deletedSuffix is what the kernel appends to a cgroup path whose directory
// was removed while the process still references it.
const deletedSuffix = " (deleted)"

// Parse reads the content of a /proc/<pid>/cgroup file (cgroup v1 with many
// "id:controllers:path" lines, v2 with a single "0::path" line, or hybrid) and
// says where the process runs. It does no I/O.
//
// v1 controller lines may disagree (an empty "name=systemd" line, a "0::/"
// line in hybrid mode, a controller not delegated to the container, Slurm's
// controllers next to slurmd's systemd unit). The first line naming both a pod
// and a container wins; failing that, the first line naming a pod or a
// container; failing that, a Slurm job; else the process is the host's.
func Parse(content string) (Location, error) {
	var partial, slurm Location
	lines := 0
	for line := range strings.Lines(content) {
		line = strings.TrimRight(line, "\r\n")
		// Hierarchy ID and controller list never contain ':', the path may.
		_, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		_, path, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		lines++
		path = strings.ReplaceAll(strings.TrimSuffix(path, deletedSuffix), runcSystemdPath, "/cri-containerd-")
		if l, ok := parseContainer(path); ok {
			if l.PodUID != "" && l.ContainerID != "" {
				return l, nil
			}
			if partial.IsHost() {
				partial = l
			}
			continue
		}
		if slurm.IsHost() {
			slurm = parseSlurm(path)
		}
	}
	switch {
	case lines == 0:
		return Location{}, ErrUnreadable
	case !partial.IsHost():
		return partial, nil
	default:
		return slurm, nil
	}
}

// parseSlurm finds a Slurm job (and step) right below a Slurm cgroup root: the step
// must directly follow the job, as slurmstepd lays them out.
func parseSlurm(path string) Location {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if !slurmRootSegment.MatchString(s) || i+1 >= len(segs) {
			continue
		}
		var l Location
		job := segs[i+1]
		if m := slurmJobSegment.FindStringSubmatch(job); m != nil {
			l.SlurmJob = m[1]
		} else if slurmSLUID.MatchString(job) && strings.HasSuffix(s, "slurmstepd.scope") {
			l.SlurmSLUID = job
		} else {
			continue
		}
		if i+2 < len(segs) {
			if m := slurmStepSegment.FindStringSubmatch(segs[i+2]); m != nil {
				l.SlurmStep = m[1]
			}
		}
		return l
	}
	return Location{}
}

// parseContainer extracts pod and container from one cgroup path. Segments are
// matched anywhere in the path, never anchored at the root: with a private
// cgroup namespace the path is relative ("/../../kubepods-...").
func parseContainer(path string) (Location, bool) {
	var c Location
	segs := strings.Split(path, "/")

	// The first pod segment; the container is searched after it so that a
	// container cgroup above the pod (e.g. a kind node's docker scope) is not
	// mistaken for the pod's container.
	start := 0
	for i, s := range segs {
		m := podSegment.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		c.PodUID = strings.ReplaceAll(strings.ToLower(m[2]), "_", "-")
		prev := ""
		if i > 0 {
			prev = segs[i-1]
		}
		c.QoS = qosClass(m[1], prev)
		start = i + 1
		break
	}

	// The first container segment is the outermost one: for nested
	// containers (docker-in-docker) that is the one the node's runtime and
	// Kubernetes know.
	for i := start; i < len(segs); i++ {
		s := segs[i]
		if conmonSegment.MatchString(s) {
			break // CRI-O's monitor, in the pod's cgroup: the pod's, no container's
		}
		m := containerSegment.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		c.ContainerID = strings.ToLower(m[2])
		prev := ""
		if i > 0 {
			prev = segs[i-1]
		}
		c.Runtime = runtimeName(m[1], prev)
		break
	}

	if c.PodUID == "" && c.ContainerID == "" {
		return Location{}, false
	}
	return c, true
}

// qosClass derives the pod QoS class from the systemd slice prefix
// ("kubepods-burstable") or, with cgroupfs, from the parent directory
// ("burstable"). Guaranteed pods have no QoS level of their own.
func qosClass(prefix, parent string) string {
	name := prefix
	if name == "" {
		name = parent
	}
	switch {
	case name == "burstable" || strings.HasSuffix(name, "kubepods-burstable"):
		return "burstable"
	case name == "besteffort" || strings.HasSuffix(name, "kubepods-besteffort"):
		return "besteffort"
	case name == "kubepods" || strings.HasSuffix(name, "-kubepods"):
		return "guaranteed"
	}
	return ""
}

// runtimeName maps the scope prefix to a runtime name. A bare ID only says
// "docker" when its parent is docker's cgroupfs parent ("/docker/<id>");
// containerd and docker under kubelet's cgroupfs are indistinguishable.
func runtimeName(prefix, parent string) string {
	switch prefix {
	case "cri-containerd":
		return "containerd"
	case "crio":
		return "cri-o"
	case "docker":
		return "docker"
	case "libpod":
		return "podman"
	}
	if parent == "docker" {
		return "docker"
	}
	return ""
}
