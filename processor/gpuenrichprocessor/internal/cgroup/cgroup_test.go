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
	want    Container
	wantErr error
}

func parseCases() []parseCase {
	return []parseCase{
		// systemd driver
		{
			name:    "v2 systemd containerd burstable",
			content: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(uid1) + ".slice/cri-containerd-" + id1 + ".scope\n",
			want:    Container{PodUID: uid1, ContainerID: id1, Runtime: "containerd", QoS: "burstable"},
		},
		{
			name:    "v1 systemd containerd burstable",
			content: v1("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"+esc(uid1)+".slice/cri-containerd-"+id1+".scope") + "0::/\n",
			want:    Container{PodUID: uid1, ContainerID: id1, Runtime: "containerd", QoS: "burstable"},
		},
		{
			name:    "v2 systemd crio besteffort",
			content: "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + esc(uid2) + ".slice/crio-" + id2 + ".scope\n",
			want:    Container{PodUID: uid2, ContainerID: id2, Runtime: "cri-o", QoS: "besteffort"},
		},
		{
			name:    "v2 systemd docker guaranteed",
			content: "0::/kubepods.slice/kubepods-pod" + esc(uid1) + ".slice/docker-" + id3 + ".scope\n",
			want:    Container{PodUID: uid1, ContainerID: id3, Runtime: "docker", QoS: "guaranteed"},
		},
		{
			name:    "v2 kind node cgroup root",
			content: "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" + esc(uid1) + ".slice/cri-containerd-" + id1 + ".scope\n",
			want:    Container{PodUID: uid1, ContainerID: id1, Runtime: "containerd", QoS: "besteffort"},
		},
		{
			name:    "v2 kind node seen from the host: container above the pod is ignored",
			content: "0::/system.slice/docker-" + id4 + ".scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod" + esc(uid1) + ".slice/cri-containerd-" + id1 + ".scope\n",
			want:    Container{PodUID: uid1, ContainerID: id1, Runtime: "containerd", QoS: "guaranteed"},
		},
		{
			name:    "v2 nested cgroup inside the container",
			content: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(uid1) + ".slice/cri-containerd-" + id1 + ".scope/init.scope\n",
			want:    Container{PodUID: uid1, ContainerID: id1, Runtime: "containerd", QoS: "burstable"},
		},
		// private cgroup namespace: relative paths
		{
			name:    "v2 namespace-relative containerd burstable",
			content: "0::/../../kubepods-burstable-pod" + esc(uid1) + ".slice/cri-containerd-" + id1 + ".scope\n",
			want:    Container{PodUID: uid1, ContainerID: id1, Runtime: "containerd", QoS: "burstable"},
		},
		{
			name:    "v2 namespace-relative cgroupfs: QoS unknown",
			content: "0::/../pod" + uid1 + "/" + id1 + "\n",
			want:    Container{PodUID: uid1, ContainerID: id1},
		},
		// cgroupfs driver
		{
			name:    "v1 cgroupfs containerd burstable",
			content: v1("/kubepods/burstable/pod" + uid1 + "/" + id1),
			want:    Container{PodUID: uid1, ContainerID: id1, QoS: "burstable"},
		},
		{
			name:    "v1 cgroupfs guaranteed",
			content: v1("/kubepods/pod" + uid2 + "/" + id2),
			want:    Container{PodUID: uid2, ContainerID: id2, QoS: "guaranteed"},
		},
		{
			name:    "v2 cgroupfs crio besteffort",
			content: "0::/kubepods/besteffort/pod" + uid2 + "/crio-" + id2 + "\n",
			want:    Container{PodUID: uid2, ContainerID: id2, Runtime: "cri-o", QoS: "besteffort"},
		},
		// hybrid and disagreeing lines
		{
			name: "hybrid: empty name=systemd and 0::/ lines skipped",
			content: "12:name=systemd:/\n" +
				"11:memory:/kubepods/besteffort/pod" + uid2 + "/crio-" + id2 + "\n" +
				"10:devices:/kubepods/besteffort/pod" + uid2 + "/crio-" + id2 + "\n" +
				"0::/\n",
			want: Container{PodUID: uid2, ContainerID: id2, Runtime: "cri-o", QoS: "besteffort"},
		},
		{
			name: "v1 pod-level line before a full line: full line wins",
			content: "3:cpuset:/kubepods/burstable/pod" + uid1 + "\n" +
				"2:memory:/kubepods/burstable/pod" + uid1 + "/" + id1 + "\n",
			want: Container{PodUID: uid1, ContainerID: id1, QoS: "burstable"},
		},
		{
			name: "v1 CRLF line endings",
			content: "2:memory:/kubepods/burstable/pod" + uid1 + "/" + id1 + "\r\n" +
				"1:name=systemd:/kubepods/burstable/pod" + uid1 + "/" + id1 + "\r\n",
			want: Container{PodUID: uid1, ContainerID: id1, QoS: "burstable"},
		},
		{
			name:    "no trailing newline",
			content: "0::/kubepods.slice/kubepods-pod" + esc(uid1) + ".slice/cri-containerd-" + id1 + ".scope",
			want:    Container{PodUID: uid1, ContainerID: id1, Runtime: "containerd", QoS: "guaranteed"},
		},
		{
			name:    "upper-case hex is normalised",
			content: "0::/kubepods/pod" + strings.ToUpper(uid1) + "/" + strings.ToUpper(id1) + "\n",
			want:    Container{PodUID: uid1, ContainerID: id1, QoS: "guaranteed"},
		},
		// pod without container
		{
			name:    "pod-level path systemd",
			content: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(uid1) + ".slice\n",
			want:    Container{PodUID: uid1, QoS: "burstable"},
		},
		{
			name:    "pod-level path cgroupfs",
			content: v1("/kubepods/besteffort/pod" + uid2),
			want:    Container{PodUID: uid2, QoS: "besteffort"},
		},
		// containers outside Kubernetes
		{
			name:    "plain docker cgroupfs",
			content: v1("/docker/" + id3),
			want:    Container{ContainerID: id3, Runtime: "docker"},
		},
		{
			name:    "plain docker systemd",
			content: "0::/system.slice/docker-" + id3 + ".scope\n",
			want:    Container{ContainerID: id3, Runtime: "docker"},
		},
		{
			name:    "podman rootless",
			content: "0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + id4 + ".scope\n",
			want:    Container{ContainerID: id4, Runtime: "podman"},
		},
		{
			name:    "podman cgroupfs",
			content: v1("/libpod_parent/libpod-" + id4),
			want:    Container{ContainerID: id4, Runtime: "podman"},
		},
		{
			name:    "docker in docker: outermost container",
			content: "0::/docker/" + id3 + "/docker/" + id4 + "\n",
			want:    Container{ContainerID: id3, Runtime: "docker"},
		},
		// not a container
		{
			name:    "crio conmon systemd",
			content: "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + esc(uid2) + ".slice/crio-conmon-" + id2 + ".scope\n",
			wantErr: ErrNotAContainer,
		},
		{
			name:    "crio conmon cgroupfs",
			content: v1("/kubepods/besteffort/pod" + uid2 + "/crio-conmon-" + id2),
			wantErr: ErrNotAContainer,
		},
		{
			name:    "user.slice v2",
			content: "0::/user.slice/user-1000.slice/session-3.scope\n",
			wantErr: ErrNotAContainer,
		},
		{
			name:    "system.slice v1",
			content: v1("/system.slice/nvidia-persistenced.service") + "0::/system.slice/nvidia-persistenced.service\n",
			wantErr: ErrNotAContainer,
		},
		{
			name:    "root cgroup v2",
			content: "0::/\n",
			wantErr: ErrNotAContainer,
		},
		{
			name:    "root cgroup v1",
			content: v1("/"),
			wantErr: ErrNotAContainer,
		},
		{
			name:    "empty",
			content: "",
			wantErr: ErrNotAContainer,
		},
		{
			name:    "junk",
			content: "\x00\xff not a cgroup file \n::::\n:\n\n",
			wantErr: ErrNotAContainer,
		},
		{
			name:    "path without hierarchy fields",
			content: "/kubepods/pod" + uid1 + "/" + id1 + "\n",
			wantErr: ErrNotAContainer,
		},
		{
			name:    "id too short",
			content: "0::/docker/" + id1[:63] + "\n",
			wantErr: ErrNotAContainer,
		},
		{
			name:    "id too long",
			content: "0::/docker/" + id1 + "0\n",
			wantErr: ErrNotAContainer,
		},
		{
			name:    "pod prefix glued to another word",
			content: "0::/xpod" + uid1 + "\n",
			wantErr: ErrNotAContainer,
		},
		{
			name:    "unknown runtime prefix",
			content: "0::/system.slice/runc-" + id1 + ".scope\n",
			wantErr: ErrNotAContainer,
		},
	}
}

func TestParse(t *testing.T) {
	for _, tc := range parseCases() {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.content)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.Equal(t, Container{}, got)
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
)

func FuzzParse(f *testing.F) {
	// Seeds live in testdata/fuzz/FuzzParse (one /proc/<pid>/cgroup content per file).
	f.Fuzz(func(t *testing.T, content string) {
		c, err := Parse(content)
		if err != nil {
			if err != ErrNotAContainer {
				t.Fatalf("unexpected error %v", err)
			}
			if c != (Container{}) {
				t.Fatalf("non-empty container %+v with error", c)
			}
			return
		}
		if c.PodUID == "" && c.ContainerID == "" {
			t.Fatalf("success without pod or container: %+v", c)
		}
		if c.PodUID != "" && !uuidRe.MatchString(c.PodUID) {
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
